//! What one pool is: its name (the value of the pool label), how its Nodes are found, its
//! declared capacity or its ceiling, where its GPUs in use are counted, its thresholds,
//! the pools to suggest when it is full, its reserves and headroom.

use crate::gpu::GpuCounts;
use crate::selector::LabelSelector;
use crate::settings::read_node_selector;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// Percent of a pool's allocatable GPUs above which the capacity gate denies new work.
pub const DEFAULT_THRESHOLD_PERCENT: u32 = 90;

/// A pool's threshold inside a time window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WindowThreshold {
    /// A name in `schedules`.
    pub window: String,
    /// Replaces the pool's `thresholdPercent` while the window holds "now" (1..=100).
    pub threshold_percent: u32,
}

/// A pool's ceiling under cluster-autoscaler: node groups are not Kubernetes objects, so
/// their size is given here.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ClusterAutoscalerCeiling {
    /// The most nodes the pool's node groups may have together (their `--nodes` maximum).
    pub max_nodes: u64,
    /// GPUs per resource name one node of the group has (the node shape).
    pub gpus_per_node: BTreeMap<String, DeclaredGpus>,
}

/// One pool of GPU nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Pool {
    /// The pool's name: the value of the pool label on its pods.
    pub name: String,
    /// How to find the pool's Nodes (and which templates target it by node selector).
    /// Empty: the pool is targeted by its pool label only (then `capacity` is required).
    /// A map of node labels reads as its `matchLabels`.
    #[serde(deserialize_with = "read_node_selector")]
    pub node_selector: LabelSelector,
    /// GPUs per resource name the pool has, declared instead of measured from its Nodes
    /// (the ceiling of an autoscaled pool). Values as written; [`Pool::declared_capacity`]
    /// reads them when the settings are checked ([`super::checked::PoolForm`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<BTreeMap<String, DeclaredGpus>>,
    /// Where the pool's GPUs in use come from; `None`: the gate's `usage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The PriorityClasses of the pool's pods, to which its ResourceQuotas are scoped
    /// (`usage: quotas` only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub priority_classes: Vec<String>,
    /// Deny when allocated + incoming GPUs would exceed this percent of allocatable (1..=100).
    pub threshold_percent: u32,
    /// Thresholds by time window: the first entry whose window holds "now" replaces
    /// `thresholdPercent`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<WindowThreshold>,
    /// The most GPUs per resource name the pool can grow to (a static ceiling).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_allocatable: Option<BTreeMap<String, DeclaredGpus>>,
    /// The Karpenter NodePool (karpenter.sh/v1) whose `spec.limits` is the pool's ceiling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub karpenter_node_pool: Option<String>,
    /// The pool's ceiling under cluster-autoscaler: `maxNodes` x `gpusPerNode`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_autoscaler: Option<ClusterAutoscalerCeiling>,
    /// Pools to suggest, in order, when this one denies a workload: the first with room is
    /// named in the denial.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<String>,
    /// GPUs kept for named workload types (the pods' `workload-type` label): per type, a
    /// count or a percent of each resource. Other types are denied once they would eat
    /// into a reserve its type does not fill (the capacity gate, `usage: pods`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub reserve: BTreeMap<String, super::reserve::ReserveText>,
    /// Reserves by time window: the first entry whose window holds "now" replaces `reserve`
    /// (a reserve kept at peak only: `reserve` empty, one entry for the peak window).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reserve_windows: Vec<super::reserve::WindowReserve>,
    /// GPUs (a count or a percent of each resource) kept free under the threshold for
    /// everyone: admissions that race on the same snapshot of the pool eat into it before
    /// they take the pool over its threshold (the capacity gate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headroom: Option<super::reserve::ReserveText>,
    /// Deny new work while the pool has held `thresholdPercent` of its GPUs for the whole
    /// of the last `for` (the capacity gate, `usage: pods`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sustained: Option<super::sustained::Sustained>,
}

impl Default for Pool {
    fn default() -> Self {
        Pool {
            name: String::new(),
            node_selector: LabelSelector::default(),
            capacity: None,
            usage: None,
            priority_classes: Vec::new(),
            threshold_percent: DEFAULT_THRESHOLD_PERCENT,
            thresholds: Vec::new(),
            max_allocatable: None,
            karpenter_node_pool: None,
            cluster_autoscaler: None,
            alternatives: Vec::new(),
            reserve: BTreeMap::new(),
            reserve_windows: Vec::new(),
            headroom: None,
            sustained: None,
        }
    }
}

/// Where a pool's GPUs in use come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Usage {
    /// The effective GPU requests of the pool's Pods (listed by the pool label): exact, but
    /// every decision reads every pod of the pool.
    #[default]
    Pods,
    /// The sum of `status.used["requests.<gpu>"]` of the pool's ResourceQuotas (listed by
    /// the pool label, one per namespace, scoped to the pool's PriorityClasses): one
    /// object per namespace, whatever the number of pods.
    Quotas,
}

impl Usage {
    pub fn as_str(self) -> &'static str {
        match self {
            Usage::Pods => "pods",
            Usage::Quotas => "quotas",
        }
    }
}

/// Counts of a map of declared GPUs; entries that are not whole numbers count as 0
/// (the settings check refuses them, [`super::set::PoolSet::check`]).
fn counts_of(declared: &BTreeMap<String, DeclaredGpus>) -> GpuCounts {
    declared
        .iter()
        .map(|(resource, n)| (resource.clone(), n.count().unwrap_or(0)))
        .collect()
}

impl Pool {
    /// True when the pool's ceiling is read from a Karpenter NodePool, declared, or given
    /// by node count.
    pub fn has_ceiling(&self) -> bool {
        self.max_allocatable.is_some()
            || self.node_pool().is_some()
            || self.cluster_autoscaler.is_some()
    }

    /// The Karpenter NodePool's name (an empty name, as forms send, is none).
    pub fn node_pool(&self) -> Option<&str> {
        self.karpenter_node_pool
            .as_deref()
            .filter(|name| !name.is_empty())
    }

    /// The static ceiling (`maxAllocatable`) as counts.
    pub fn static_ceiling(&self) -> Option<GpuCounts> {
        self.max_allocatable.as_ref().map(counts_of)
    }

    /// The cluster-autoscaler ceiling: (`maxNodes`, GPUs per node).
    pub fn node_count_ceiling(&self) -> Option<(u64, GpuCounts)> {
        self.cluster_autoscaler
            .as_ref()
            .map(|c| (c.max_nodes, counts_of(&c.gpus_per_node)))
    }

    /// The declared capacity as counts (`None`: measured from the Nodes). Entries that are
    /// not whole numbers count as 0 (the settings check refuses them).
    pub fn declared_capacity(&self) -> Option<GpuCounts> {
        self.capacity.as_ref().map(counts_of)
    }

    /// The headroom as written (an empty text, as forms send, is none).
    pub fn headroom(&self) -> Option<&super::reserve::ReserveText> {
        self.headroom.as_ref().filter(|h| !h.0.trim().is_empty())
    }

    /// True when the pool keeps GPUs for workload types, in any window.
    pub fn has_reserves(&self) -> bool {
        !self.reserve.is_empty() || self.reserve_windows.iter().any(|w| !w.reserve.is_empty())
    }
}

/// A declared GPU count as written in settings: a number or a string (`512`, `"512"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct DeclaredGpus(pub String);

impl<'de> Deserialize<'de> for DeclaredGpus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        crate::podspec::QuantityText::deserialize(deserializer).map(|q| DeclaredGpus(q.0))
    }
}

impl DeclaredGpus {
    /// The count, when it is a whole, non-negative number.
    pub fn count(&self) -> Result<u64, crate::quantity::QuantityError> {
        crate::quantity::Quantity::parse_count(&self.0)
    }
}
