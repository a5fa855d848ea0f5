//! A pool's Nodes: the one query (the pool's node selector, masked to taints,
//! `unschedulable` and allocatable), and the GPUs its schedulable nodes offer.

use super::pool::Pool;
use crate::cluster::{ClusterRequest, ListAll};
use crate::gpu::{GpuCounts, GpuResources, add_scaled};
use crate::lists::{ListError, for_each_item, json_string, lean, parse_or_default, read_raw};
use crate::podspec::null_as_default;
use crate::selector::LabelSelector;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::rc::Rc;

/// What crosses the host boundary for each Node.
pub const NODE_FIELD_MASKS: &[&str] = &["spec.taints", "spec.unschedulable", "status.allocatable"];

/// Node taints that keep new pods off a node (set by the node lifecycle controller and
/// by `kubectl cordon`): such nodes' GPUs are not counted as allocatable.
const UNSCHEDULABLE_TAINTS: &[&str] = &[
    "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// The pool's Nodes: `list_resources_all` of `v1/Node` by the pool's node selector.
pub fn node_query(pool: &Pool) -> ClusterRequest {
    node_list(&pool.node_selector.to_query())
}

/// The Nodes `selector` matches: [`node_list`] of its query.
pub fn nodes_by(selector: &LabelSelector) -> ClusterRequest {
    node_list(&selector.to_query())
}

/// The Nodes `label_selector` (a query) matches, masked to [`NODE_FIELD_MASKS`]: the one
/// Node query of every policy (the capacity gate's pools, the autoscaler's, the GPU
/// inventory), so policy-server answers the same selector from one watch.
pub fn node_list(label_selector: &str) -> ClusterRequest {
    ClusterRequest::ListAll(ListAll {
        api_version: "v1".into(),
        kind: "Node".into(),
        label_selector: Some(label_selector.to_string()),
        field_selector: None,
        field_masks: Some(NODE_FIELD_MASKS.iter().map(|s| s.to_string()).collect()),
    })
}

/// GPUs of a pool's Nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeTotals {
    pub nodes: u64,
    pub schedulable: u64,
    /// GPU resources allocatable on schedulable nodes.
    pub allocatable: GpuCounts,
    /// Each schedulable node, in list order.
    pub per_node: Vec<NodeGpus>,
}

/// One schedulable node: its name and allocatable GPUs (shared by the nodes of one
/// machine type).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeGpus {
    pub name: String,
    pub allocatable: Rc<GpuCounts>,
}

// Every field optional: field masks drop whatever they do not name.
#[derive(Deserialize, Default)]
#[serde(default)]
struct NodeSpec {
    unschedulable: Option<bool>,
    #[serde(deserialize_with = "null_as_default")]
    taints: Vec<Taint>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Taint {
    key: Option<String>,
    effect: Option<String>,
}

/// Sums the GPU resources of schedulable nodes in a `NodeList`. An allocatable GPU
/// quantity that is not a whole number counts as 0 (less capacity, never more). Like
/// the capacity gate's pod lists, the list is read item by item by [`crate::lists`], which keeps each
/// node's name and the raw values of its `spec` and `status.allocatable`: the rest of the
/// metadata (GPU Feature Discovery puts dozens of labels there) is skipped. Nodes of one
/// machine type have the same masked `spec` and `allocatable` text, so each distinct pair
/// is read once.
pub fn parse_nodes(bytes: &[u8], names: &GpuResources) -> Result<NodeTotals, ListError> {
    let mut totals = NodeTotals::default();
    // (spec, allocatable) text -> allocatable GPUs, `None` when unschedulable; shared by the
    // nodes of one machine type.
    type Key<'a> = (Option<&'a str>, Option<&'a str>);
    let mut seen: HashMap<Key, Option<Rc<GpuCounts>>> = HashMap::new();
    let mut last: Option<(Key, Option<Rc<GpuCounts>>)> = None;
    for_each_item(
        bytes,
        [&["metadata", "name"], &["spec"], &["status", "allocatable"]],
        |[name, spec, allocatable]| {
            totals.nodes += 1;
            let key = (spec.map(RawValue::get), allocatable.map(RawValue::get));
            // Nodes of one machine type are usually listed together.
            let gpus = match &last {
                Some((k, gpus)) if *k == key => gpus.clone(),
                _ => {
                    let gpus = match seen.entry(key) {
                        Entry::Occupied(e) => e.get().clone(),
                        Entry::Vacant(e) => e
                            .insert(node_gpus(key.0, key.1, names)?.map(Rc::new))
                            .clone(),
                    };
                    last = Some((key, gpus.clone()));
                    gpus
                }
            };
            if let Some(gpus) = gpus {
                totals.schedulable += 1;
                add_scaled(&mut totals.allocatable, &gpus, 1);
                totals.per_node.push(NodeGpus {
                    name: name.map_or(Ok(String::new()), |n| json_string(n.get()))?,
                    allocatable: gpus,
                });
            }
            Ok::<(), ListError>(())
        },
    )?;
    Ok(totals)
}

/// A node's allocatable GPUs (from the raw text of its masked `spec` and
/// `status.allocatable`), `None` when new pods cannot be scheduled on it.
pub(crate) fn node_gpus(
    spec: Option<&str>,
    allocatable: Option<&str>,
    names: &GpuResources,
) -> Result<Option<GpuCounts>, serde_json::Error> {
    let spec: NodeSpec = parse_or_default(spec)?;
    let blocked = spec.unschedulable == Some(true)
        || spec.taints.iter().any(|t| {
            t.key
                .as_deref()
                .is_some_and(|k| UNSCHEDULABLE_TAINTS.contains(&k))
                && matches!(t.effect.as_deref(), Some("NoSchedule" | "NoExecute"))
        });
    if blocked {
        return Ok(None);
    }
    let allocatable = allocatable
        .map(|raw| read_raw(raw, lean::Object(lean::GpuList(names))))
        .transpose()?
        .unwrap_or_default();
    let mut gpus = GpuCounts::new();
    for (resource, quantity) in allocatable {
        let n = crate::quantity::Quantity::parse_count(&quantity.0).unwrap_or(0);
        let e = gpus.entry(resource).or_insert(0);
        *e = e.saturating_add(n);
    }
    Ok(Some(gpus))
}

#[cfg(test)]
mod tests;
