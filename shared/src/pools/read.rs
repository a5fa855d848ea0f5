//! Reading what a pool offers: its allocatable GPUs (declared, or from its schedulable
//! Nodes) and its ceiling, with the same calls in the same order for every policy (so
//! policy-server answers the capacity gate and the autoscaler policy from one watch).

use super::ceiling::{Ceiling, CeilingSource, node_pool_query, parse_node_pool_limits};
use super::checked::CheckedPool;
use super::nodes::{NodeTotals, node_list, parse_nodes};
use crate::cluster::{Cluster, HostError, HostFailure, call};
use crate::gpu::{GpuCounts, GpuResources};
use crate::inventory::{Inventory, LabelKeys, parse_inventory};

/// What a pool offers now and what it can grow to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// GPUs allocatable now: declared `capacity`, or the schedulable Nodes' allocatable.
    pub allocatable: GpuCounts,
    /// The pool's Nodes, when they were read (`None`: capacity is declared).
    pub nodes: Option<NodeTotals>,
    /// The pool's ceiling, when it has one.
    pub ceiling: Option<Ceiling>,
    /// Schedulable nodes that carry GPU labels but report no allocatable GPU (their
    /// device plugin is down): they offer nothing.
    pub plugin_down: Vec<String>,
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
    let (allocatable, nodes, plugin_down) = match pool.capacity() {
        Some(declared) => (declared.clone(), None, Vec::new()),
        None => {
            let request = node_list(pool.selector_query());
            let bytes = call(cluster, &request)?;
            let unreadable = |e: crate::lists::ListError| HostFailure {
                request: Box::new(request.clone()),
                error: HostError::Unreadable(e.to_string()),
            };
            let nodes = parse_nodes(&bytes, names).map_err(unreadable)?;
            // Only a schedulable node without GPUs makes the labels worth reading.
            let plugin_down = if nodes
                .per_node
                .iter()
                .any(|n| !n.allocatable.values().any(|g| *g > 0))
            {
                parse_inventory(&bytes, &LabelKeys::default(), names)
                    .map_err(unreadable)?
                    .plugin_down
            } else {
                Vec::new()
            };
            (nodes.allocatable.clone(), Some(nodes), plugin_down)
        }
    };
    let ceiling = read_ceiling(cluster, pool, names)?;
    Ok(Offer {
        allocatable,
        nodes,
        ceiling,
        plugin_down,
    })
}

/// The warning naming a pool's device-plugin-down nodes (at most 5, then how many more).
pub fn plugin_down_warning(pool: &str, plugin_down: &[String]) -> Option<String> {
    let inventory = Inventory {
        plugin_down: plugin_down.to_vec(),
        ..Inventory::default()
    };
    inventory.plugin_down_names(5).map(|names| {
        format!(
            "pool {pool}: GPU nodes with GPU labels but no allocatable GPU (is their device plugin down?), not counted as capacity: {names}"
        )
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
