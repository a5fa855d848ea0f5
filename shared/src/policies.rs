//! The five policies, each a [`crate::policy::Policy`] implemented beside its rules: what a
//! policy crate registers (`gpu_rules::kubewarden_policy!(gpu_rules::policies::Labels)`), and
//! what the benchmarks and fuzz targets run.

pub use crate::autoscaler::policy::Autoscaler;
pub use crate::capacity::policy::CapacityGate;
pub use crate::labels::policy::Labels;
pub use crate::routing::policy::Routing;
pub use crate::vram::policy::VramFit;
