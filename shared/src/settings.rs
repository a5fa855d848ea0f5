//! Settings fragments that several policies share, each with validation that names the
//! field it found wrong. Policies embed these as fields of their own settings struct
//! (serde's `deny_unknown_fields` does not combine with `flatten`).

pub use crate::workload::CustomKind;
