//! How many replicas fit: under a pool's ceiling (per GPU resource) and under the
//! namespace's maximum (all GPUs together).
//!
//! What a pool can ever hold is what the capacity gate judges it against
//! ([`crate::pools::read_offer`], [`crate::pools::ceiling::most`]): per resource, the larger
//! of what it offers now (its declared `capacity`, or the allocatable GPUs of its
//! schedulable Nodes, listed with the same query and field masks, so policy-server keeps
//! one watch for both policies) and its ceiling (`maxAllocatable`, its Karpenter
//! NodePool's `spec.limits`, or `clusterAutoscaler`'s `maxNodes` x `gpusPerNode`). A pool
//! that scales from zero nodes holds what its ceiling says.

use crate::cluster::{Cluster, HostFailure};
use crate::gpu::gpus_text;
use crate::gpu::{GpuCounts, GpuResources};
use crate::pools::{CeilingSource, CheckedPool, Offer, read_offer};

/// What a pool can ever hold, and what it offers now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    pub offer: Offer,
    /// The pool's node selector as a query, for messages (empty: capacity declared).
    pub selector: String,
}

/// The bound of `pool`: what it offers now (declared, or its Nodes: one host call) and
/// its ceiling (a Karpenter NodePool: one more).
pub fn read(
    cluster: &dyn Cluster,
    pool: CheckedPool,
    names: &GpuResources,
) -> Result<Bound, HostFailure> {
    Ok(Bound {
        offer: read_offer(cluster, pool, names)?,
        selector: pool.selector_query().to_string(),
    })
}

/// The replicas that fit under `ceiling` when each holds `per_replica`, and the resource
/// that binds (the one with the fewest fitting replicas; ties: the first by name).
pub fn fit(per_replica: &GpuCounts, ceiling: &GpuCounts) -> Option<(u64, String)> {
    per_replica
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(resource, n)| {
            let held = ceiling.get(resource).copied().unwrap_or(0);
            (held / n, resource.clone())
        })
        .min_by_key(|(fits, _)| *fits)
}

impl Bound {
    /// The most of each resource the pool can hold: every resource it offers now or its
    /// ceiling names.
    pub fn gpus(&self) -> GpuCounts {
        let ceiling = self.offer.ceiling.iter().flat_map(|c| c.gpus.keys());
        self.offer
            .allocatable
            .keys()
            .chain(ceiling)
            .map(|resource| (resource.clone(), self.offer.most(resource)))
            .collect()
    }

    /// True when the pool's ceiling, not what it offers now, sets the most of `resource`.
    fn by_ceiling(&self, resource: &str) -> bool {
        let now = self.offer.allocatable.get(resource).copied().unwrap_or(0);
        self.offer
            .ceiling
            .as_ref()
            .and_then(|c| c.gpus.get(resource))
            .is_some_and(|limit| *limit > now)
    }

    /// True when the most of `resource` is what the pool's Nodes offer now: the pool has
    /// no ceiling for it and no declared capacity.
    pub fn from_nodes(&self, resource: &str) -> bool {
        let ceiling = self
            .offer
            .ceiling
            .as_ref()
            .is_some_and(|c| c.gpus.contains_key(resource));
        self.offer.nodes.is_some() && !ceiling
    }

    /// `64 nvidia.com/gpu allocatable on its 8 schedulable nodes`, `64 nvidia.com/gpu from
    /// maxAllocatable in settings`, for messages about `resource`.
    pub fn describe(&self, resource: &str) -> String {
        let held = self.offer.most(resource);
        if self.by_ceiling(resource)
            && let Some(c) = &self.offer.ceiling
        {
            return format!("{held} {resource} from {}", c.from_text(resource));
        }
        match &self.offer.nodes {
            None if !self.offer.allocatable.contains_key(resource) => {
                format!("its capacity in the policy settings declares no {resource}")
            }
            None => format!("{held} {resource} declared as its capacity in the policy settings"),
            Some(nodes) if nodes.nodes == 0 => format!("no node matches {}", self.selector),
            Some(nodes) => {
                let (n, schedulable) = (nodes.nodes, nodes.schedulable);
                let on = if n == schedulable {
                    format!("its {n} {}", plural(n, "node"))
                } else {
                    format!(
                        "its {schedulable} schedulable {} of {n}",
                        plural(schedulable, "node")
                    )
                };
                format!("{held} {resource} allocatable on {on}")
            }
        }
    }

    /// `64 nvidia.com/gpu (nodes)`, `64 nvidia.com/gpu (maxAllocatable)`, for the audit
    /// annotation.
    pub fn audit(&self) -> String {
        let gpus = self.gpus();
        let ceiling = self
            .offer
            .ceiling
            .as_ref()
            .filter(|_| gpus.keys().any(|r| self.by_ceiling(r)));
        let source = match (ceiling, &self.offer.nodes) {
            (Some(c), _) => match &c.source {
                CeilingSource::MaxAllocatable => "maxAllocatable".to_string(),
                CeilingSource::NodePool(name) => format!("NodePool {name}"),
                CeilingSource::ClusterAutoscaler { .. } => "clusterAutoscaler".to_string(),
            },
            (None, None) => "declared".to_string(),
            (None, Some(_)) => "nodes".to_string(),
        };
        if gpus.is_empty() {
            return format!("none ({source})");
        }
        format!("{} ({source})", gpus_text(&gpus))
    }
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        word.to_string()
    } else {
        format!("{word}s")
    }
}

#[cfg(test)]
mod tests;
