//! The case lists live in the harness library ([`gpu_e2e::cases`]), shared with the manifest
//! checker's kwctl comparison.

// Each test binary uses a different subset (or none).
#[allow(unused_imports)]
pub use gpu_e2e::cases::*;
