//! The pools of GPU nodes, as every policy that reads a `pools` block reads it: one
//! block means the same thing to the capacity gate and to the autoscaler policy.
//!
//! - [`pool`]: what a pool is: its name (the value of the pool label on its pods), its
//!   Nodes (node selector) or declared `capacity`, its ceiling (`maxAllocatable`, a
//!   Karpenter NodePool, a cluster-autoscaler node group), where its GPUs in use are
//!   counted (`usage`, `priorityClasses`), its thresholds (by schedule window) and its
//!   `alternatives`, its `reserve` per workload type.
//! - [`reserve`]: GPUs a pool keeps for named workload types.
//! - [`sustained`]: a pool's sustained rule (held above a percent for a while).
//! - [`set`]: the pool set of a policy ([`PoolSet`]: `poolLabelKey` and `pools`): which
//!   pools a pod template targets, and the checks of every pool ([`PoolChecks`] says what
//!   the policy reads besides the pools: the gate's `usage` default and its schedules).
//! - [`checked`]: a pool in the form the rules take ([`CheckedPool`]: the pool as written
//!   and its [`PoolForm`], what its settings say read once when the settings are checked:
//!   declared GPUs as counts, the ceiling the settings give, the node selector as a query,
//!   each threshold with its window's schedule read).
//! - [`nodes`], [`ceiling`], [`read`]: reading what a pool offers ([`read::read_offer`]):
//!   its Nodes with one query and one set of field masks, its ceiling, and the larger of
//!   the two per resource ([`ceiling::most`]), what both policies judge against. Host
//!   failures are worded by [`crate::cluster::HostFailure`].
//!
//! Routing's `pools` describe the same pools from the other side (which workloads go
//! there, the node selector and tolerations and priority class that send them there) and
//! are a settings format of their own ([`crate::routing::settings::Pool`]): see the
//! routing README.

pub mod ceiling;
pub mod checked;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod nodes;
pub mod pool;
pub mod read;
pub mod reserve;
pub mod set;
pub mod sustained;

pub use ceiling::{Ceiling, CeilingSource};
pub use checked::{CheckedPool, PoolForm};
pub use pool::{
    ClusterAutoscalerCeiling, DEFAULT_THRESHOLD_PERCENT, DeclaredGpus, Pool, Usage, WindowThreshold,
};
pub use read::{Offer, plugin_down_warning, read_offer, read_offer_labelled};
pub use set::{PoolChecks, PoolSet};
