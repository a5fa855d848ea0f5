//! Reading what a pool offers: its allocatable GPUs (declared, or from its schedulable
//! Nodes) and its ceiling, with the same calls in the same order for every policy (so
//! policy-server answers the capacity gate and the autoscaler policy from one watch).

use super::ceiling::{Ceiling, CeilingSource, node_pool_query, parse_node_pool_limits};
use super::checked::CheckedPool;
use super::nodes::{NodeTotals, node_list, parse_nodes};
use crate::cluster::{Cluster, HostError, HostFailure, call};
use crate::gpu::{GpuCounts, GpuResources};

/// What a pool offers now and what it can grow to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// GPUs allocatable now: declared `capacity`, or the schedulable Nodes' allocatable.
    pub allocatable: GpuCounts,
    /// The pool's Nodes, when they were read (`None`: capacity is declared).
    pub nodes: Option<NodeTotals>,
    /// The pool's ceiling, when it has one.
    pub ceiling: Option<Ceiling>,
}

impl Offer {
    /// The most of `resource` the pool is judged against ([`super::ceiling::most`]).
    pub fn most(&self, resource: &str) -> u64 {
        let now = self.allocatable.get(resource).copied().unwrap_or(0);
        super::ceiling::most(now, self.ceiling.as_ref(), resource)
    }
}

/// Reads what `pool` offers: its Nodes (one `list_resources_all`, unless its capacity is
/// declared), then its ceiling (one `get_resource` for a Karpenter NodePool).
pub fn read_offer(
    cluster: &dyn Cluster,
    pool: CheckedPool,
    names: &GpuResources,
) -> Result<Offer, HostFailure> {
    let (allocatable, nodes) = match pool.capacity() {
        Some(declared) => (declared.clone(), None),
        None => {
            let request = node_list(pool.selector_query());
            let bytes = call(cluster, &request)?;
            let nodes = parse_nodes(&bytes, names).map_err(|e| HostFailure {
                request: Box::new(request.clone()),
                error: HostError::Unreadable(e.to_string()),
            })?;
            (nodes.allocatable.clone(), Some(nodes))
        }
    };
    let ceiling = read_ceiling(cluster, pool, names)?;
    Ok(Offer {
        allocatable,
        nodes,
        ceiling,
    })
}

/// The pool's ceiling: the one its settings give ([`settings_ceiling`]), or the
/// `spec.limits` of its Karpenter NodePool (one `get_resource`).
pub fn read_ceiling(
    cluster: &dyn Cluster,
    pool: CheckedPool,
    names: &GpuResources,
) -> Result<Option<Ceiling>, HostFailure> {
    if let Some(ceiling) = pool.settings_ceiling() {
        return Ok(Some(ceiling.clone()));
    }
    let Some(name) = pool.node_pool() else {
        return Ok(None);
    };
    let request = node_pool_query(name);
    let bytes = call(cluster, &request)?;
    let gpus = parse_node_pool_limits(&bytes, names).map_err(|e| HostFailure {
        request: Box::new(request.clone()),
        error: HostError::Unreadable(e),
    })?;
    Ok(Some(Ceiling {
        gpus,
        source: CeilingSource::NodePool(name.to_string()),
        node_shape: None,
    }))
}
