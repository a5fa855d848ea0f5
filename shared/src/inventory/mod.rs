//! The GPUs the cluster's Nodes really have: GPU product, memory per GPU, GPU count, MIG
//! strategy, driver and CUDA versions, as GPU Feature Discovery (NVIDIA), AMD's labeller
//! and Intel's NFD rules label them, and the GPUs each node's device plugin reports
//! allocatable.
//!
//! - [`keys`]: the node labels read ([`LabelKeys`], settings, each one configurable).
//! - [`read_inventory`]: one `list_resources_all` of Nodes by a label selector, the same
//!   query (and field masks) as a pool's Nodes ([`crate::pools::nodes::nodes_by`]), so
//!   policy-server answers both from one watch; host failures are worded by
//!   [`crate::cluster::HostFailure`]. Labels are metadata, which field masks never remove;
//!   only the labels named are kept.
//! - [`offer`]: whether some node offers what a pod selects (product, MIG profile, GPUs
//!   per pod, driver and CUDA version), and the message naming what is there when none does.
//! - [`settings`]: `nodeInventory` ([`InventorySettings`]): on or off, the Nodes read, the
//!   label keys, the pod-template keys asking for a driver or CUDA version.
//! - [`version`]: driver and CUDA versions.
//!
//! Nodes new pods cannot be scheduled on (cordoned, not ready: the capacity gate's rule,
//! [`crate::pools::nodes`]) are not read. A schedulable node that carries GPU labels but
//! reports no allocatable GPU (its device plugin is down) is named in
//! [`Inventory::plugin_down`] and offers nothing.

pub mod keys;
pub mod offer;
mod parse;
pub mod settings;
pub mod version;

pub use keys::LabelKeys;
pub use offer::{Demand, Refusal, check, offering};
pub use parse::parse_inventory;
pub use settings::InventorySettings;
pub use version::Version;

use crate::cluster::{Cluster, HostError, HostFailure, call};
use crate::gpu::{GpuCounts, GpuResources, MigProfile};
use crate::pools::nodes::nodes_by;
use crate::selector::LabelSelector;
use std::collections::BTreeMap;
use std::rc::Rc;

/// The GPU nodes one Node list gave.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Nodes listed.
    pub nodes: u64,
    /// Schedulable nodes with at least one allocatable GPU, in list order.
    pub gpu_nodes: Vec<GpuNode>,
    /// Schedulable nodes with GPU labels and no allocatable GPU (device plugin down).
    pub plugin_down: Vec<String>,
}

/// One schedulable node with GPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuNode {
    pub name: String,
    /// The GPU product label (NVIDIA's, else AMD's, else Intel's).
    pub product: Option<String>,
    /// Memory per GPU the node reports, MiB.
    pub memory_mib: Option<u64>,
    /// `none`, `single`, `mixed`.
    pub mig_strategy: Option<String>,
    pub driver: Option<Version>,
    pub cuda: Option<Version>,
    /// GPU resources allocatable (shared by nodes with the same allocatable text).
    pub allocatable: Rc<GpuCounts>,
    /// Memory of one MIG device per profile (`1g.10gb`), MiB, as the node reports it.
    pub mig_memory: BTreeMap<String, u64>,
}

/// What the nodes of one product offer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProductOffer {
    pub nodes: u64,
    /// The smallest memory per GPU a node of the product reports, MiB.
    pub smallest_mib: Option<u64>,
    /// Nodes of the product that report their memory.
    pub reporting: u64,
}

impl Inventory {
    /// Products the GPU nodes carry, with what their nodes report.
    pub fn products(&self) -> BTreeMap<&str, ProductOffer> {
        let mut out: BTreeMap<&str, ProductOffer> = BTreeMap::new();
        for n in &self.gpu_nodes {
            let Some(p) = n.product.as_deref() else {
                continue;
            };
            let o = out.entry(p).or_default();
            o.nodes += 1;
            if let Some(m) = n.memory_mib {
                o.reporting += 1;
                o.smallest_mib = Some(o.smallest_mib.map_or(m, |s| s.min(m)));
            }
        }
        out
    }

    /// The smallest memory per GPU the nodes of `product` report, with how many report
    /// it; `None` when none does.
    pub fn reported_mib(&self, product: &str) -> Option<(u64, u64)> {
        let mut found: Option<(u64, u64)> = None;
        for n in &self.gpu_nodes {
            if n.product.as_deref() == Some(product)
                && let Some(m) = n.memory_mib
            {
                found = Some(match found {
                    Some((s, c)) => (s.min(m), c + 1),
                    None => (m, 1),
                });
            }
        }
        found
    }

    /// The smallest memory of one MIG device of `profile` (`3g.40gb`, `03g.40gb` alike) the
    /// nodes report, with how many report it; `None` when none does.
    pub fn reported_mig_mib(&self, profile: &str) -> Option<(u64, u64)> {
        let wanted = MigProfile::from_profile(profile);
        let same =
            |p: &str| p == profile || (wanted.is_some() && MigProfile::from_profile(p) == wanted);
        let mut found: Option<(u64, u64)> = None;
        for n in &self.gpu_nodes {
            if let Some(m) = n.mig_memory.iter().find(|(p, _)| same(p)).map(|(_, m)| *m) {
                found = Some(match found {
                    Some((s, c)) => (s.min(m), c + 1),
                    None => (m, 1),
                });
            }
        }
        found
    }

    /// `a, b, c (+4 more)`: the device-plugin-down nodes, for a warning.
    pub fn plugin_down_names(&self, max: usize) -> Option<String> {
        if self.plugin_down.is_empty() {
            return None;
        }
        let mut names = self
            .plugin_down
            .iter()
            .take(max)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if self.plugin_down.len() > max {
            names.push_str(&format!(" (+{} more)", self.plugin_down.len() - max));
        }
        Some(names)
    }
}

/// The Nodes one decision reads: `nodeSelector` narrowed to one GPU product when every GPU
/// pod selects that product ([`InventorySettings::narrowed`]), and the whole of
/// `nodeSelector` when the narrowed list has no GPU node (the denial path: the message
/// names the products there are) or nothing narrows it. `product`: the product (on `key`)
/// the caller narrows to; the caller keeps the products it narrows to a known, bounded
/// set, since each distinct selector is a watch the host keeps for its lifetime.
pub fn read_for(
    cluster: &dyn Cluster,
    settings: &InventorySettings,
    names: &GpuResources,
    product: Option<(&str, &str)>,
) -> Result<Inventory, HostFailure> {
    let keys = &settings.label_keys;
    if let Some(narrowed) = product.and_then(|(key, p)| settings.narrowed(key, p)) {
        let inventory = read_inventory(cluster, &narrowed, keys, names)?;
        if !inventory.gpu_nodes.is_empty() {
            return Ok(inventory);
        }
    }
    read_inventory(cluster, &settings.node_selector, keys, names)
}

/// Reads the Nodes `selector` matches (one `list_resources_all`) into an [`Inventory`].
pub fn read_inventory(
    cluster: &dyn Cluster,
    selector: &LabelSelector,
    keys: &LabelKeys,
    names: &GpuResources,
) -> Result<Inventory, HostFailure> {
    let request = nodes_by(selector);
    let bytes = call(cluster, &request)?;
    parse_inventory(&bytes, keys, names).map_err(|e| HostFailure {
        request: Box::new(request),
        error: HostError::Unreadable(e.to_string()),
    })
}

#[cfg(test)]
pub(crate) mod tests;
