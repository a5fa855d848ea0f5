//! A pool's ceiling: the most GPUs it can grow to, from `maxAllocatable`, a Karpenter
//! NodePool's `spec.limits` (its query and the reading of its answer; the call is
//! [`super::read::read_ceiling`]'s), or cluster-autoscaler's `maxNodes` x `gpusPerNode`; and what a pool is judged against, the larger of what its Nodes offer
//! now and its ceiling, per resource ([`most`]), for the capacity gate and the autoscaler
//! policy alike.

use super::pool::Pool;
use crate::cluster::{ClusterRequest, GetResource};
use crate::gpu::{GpuCounts, GpuResources};
use crate::workload::At;
use std::collections::BTreeSet;

/// What crosses the host boundary for a Karpenter NodePool: its limits.
pub const NODE_POOL_FIELD_MASKS: &[&str] = &["spec.limits"];

/// Karpenter's NodePool, whose `spec.limits` is a pool's ceiling.
pub const NODE_POOL_API_VERSION: &str = "karpenter.sh/v1";
pub const NODE_POOL_KIND: &str = "NodePool";

/// The most GPUs a pool can grow to, per resource name, and where that comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ceiling {
    /// Resources without an entry have no ceiling (the pool is judged on what is allocatable).
    pub gpus: GpuCounts,
    pub source: CeilingSource,
    /// The GPUs of one node the autoscaler adds, when the ceiling is by node count.
    pub node_shape: Option<GpuCounts>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CeilingSource {
    /// `maxAllocatable` in settings.
    MaxAllocatable,
    /// `spec.limits` of this Karpenter NodePool.
    NodePool(String),
    /// `clusterAutoscaler`: this many nodes of `gpusPerNode`.
    ClusterAutoscaler { max_nodes: u64 },
}

impl Ceiling {
    /// Where the ceiling of `resource` comes from, for messages: `maxAllocatable in
    /// settings`, `NodePool a100 spec.limits`, `clusterAutoscaler: 8 nodes x 8 nvidia.com/gpu`.
    pub fn from_text(&self, resource: &str) -> String {
        match &self.source {
            CeilingSource::MaxAllocatable => "maxAllocatable in settings".into(),
            CeilingSource::NodePool(name) => format!("NodePool {name} spec.limits"),
            CeilingSource::ClusterAutoscaler { max_nodes } => {
                let per_node = self
                    .node_shape
                    .as_ref()
                    .and_then(|s| s.get(resource))
                    .copied()
                    .unwrap_or(0);
                format!("clusterAutoscaler: {max_nodes} nodes x {per_node} {resource}")
            }
        }
    }
}

/// The most of `resource` a pool is judged against: the larger of `now` (what its Nodes
/// offer, or its declared capacity) and its ceiling for that resource. A ceiling that
/// gives no number for the resource (a NodePool without that limit) leaves `now`.
pub fn most(now: u64, ceiling: Option<&Ceiling>, resource: &str) -> u64 {
    match ceiling.and_then(|c| c.gpus.get(resource)) {
        Some(&limit) => now.max(limit),
        None => now,
    }
}

/// The Karpenter NodePool `name` (cluster-scoped), masked to its limits.
pub fn node_pool_query(name: &str) -> ClusterRequest {
    ClusterRequest::Get(GetResource {
        api_version: NODE_POOL_API_VERSION.into(),
        kind: NODE_POOL_KIND.into(),
        name: name.into(),
        namespace: None,
        disable_cache: false,
        field_masks: Some(
            NODE_POOL_FIELD_MASKS
                .iter()
                .map(|s| s.to_string())
                .collect::<BTreeSet<_>>(),
        ),
    })
}

/// The GPU entries of a NodePool's `spec.limits` (resource names the policy counts). A
/// NodePool without limits, or without a GPU limit, gives no entry (it may grow without
/// bound: the pool is then judged on what is allocatable). A GPU limit that is not a
/// whole, non-negative count makes the answer unreadable.
pub fn parse_node_pool_limits(bytes: &[u8], names: &GpuResources) -> Result<GpuCounts, String> {
    let object: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if !object.is_object() {
        return Err(format!("expected an object, got {object}"));
    }
    let mut limits = GpuCounts::new();
    let entries = object.at("/spec/limits").and_then(|l| l.as_object());
    for (resource, quantity) in entries.into_iter().flatten() {
        if !names.is_gpu(resource) {
            continue;
        }
        let text = match quantity {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let n = crate::quantity::Quantity::parse_count(&text)
            .map_err(|e| format!("spec.limits.{resource}: {e}"))?;
        limits.insert(resource.clone(), n);
    }
    Ok(limits)
}

/// The ceiling `pool`'s settings give: `maxAllocatable`, or `clusterAutoscaler`
/// (`maxNodes` x `gpusPerNode`); `None` for a Karpenter NodePool's (read from the cluster) or
/// none. Read once, when the settings are checked ([`super::checked::PoolForm`]).
pub fn settings_ceiling(pool: &Pool) -> Option<Ceiling> {
    if let Some(gpus) = pool.static_ceiling() {
        return Some(Ceiling {
            gpus,
            source: CeilingSource::MaxAllocatable,
            node_shape: None,
        });
    }
    let (max_nodes, shape) = pool.node_count_ceiling()?;
    Some(Ceiling {
        gpus: crate::gpu::scale(&shape, max_nodes),
        source: CeilingSource::ClusterAutoscaler { max_nodes },
        node_shape: Some(shape),
    })
}

#[cfg(test)]
mod tests;
