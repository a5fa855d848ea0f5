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
    /// The GPU nodes with their labels, when the caller asked for them
    /// ([`read_offer_labelled`]) and the Nodes were read.
    pub inventory: Option<Inventory>,
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
    read_offer_labelled(cluster, pool, names, false)
}

/// [`read_offer`], and with `labels` the GPU nodes' labels read from the same Node list
/// into [`Offer::inventory`] (the shared inventory's reader and keys; no other call).
pub fn read_offer_labelled(
    cluster: &dyn Cluster,
    pool: CheckedPool,
    names: &GpuResources,
    labels: bool,
) -> Result<Offer, HostFailure> {
    let (allocatable, nodes, inventory) = match pool.capacity() {
        Some(declared) => (declared.clone(), None, None),
        None => {
            let request = node_list(pool.selector_query());
            let bytes = call(cluster, &request)?;
            let unreadable = |e: crate::lists::ListError| HostFailure {
                request: Box::new(request.clone()),
                error: HostError::Unreadable(e.to_string()),
            };
            let nodes = parse_nodes(&bytes, names).map_err(unreadable)?;
            // The labels are read when asked for, or when a schedulable node without GPUs
            // may have a device plugin down.
            let inventory = if labels
                || nodes
                    .per_node
                    .iter()
                    .any(|n| !n.allocatable.values().any(|g| *g > 0))
            {
                Some(parse_inventory(&bytes, &LabelKeys::default(), names).map_err(unreadable)?)
            } else {
                None
            };
            (nodes.allocatable.clone(), Some(nodes), inventory)
        }
    };
    let ceiling = read_ceiling(cluster, pool, names)?;
    let plugin_down = inventory
        .as_ref()
        .map(|i| i.plugin_down.clone())
        .unwrap_or_default();
    Ok(Offer {
        allocatable,
        nodes,
        ceiling,
        plugin_down,
        inventory: inventory.filter(|_| labels),
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
