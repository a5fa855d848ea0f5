//! Whether some node offers what a pod selects. The nodes are narrowed step by step: the
//! products the pod is restricted to, then the GPUs per pod of each resource (a MIG
//! profile is a resource), then the minimum driver version, then the minimum CUDA version.
//! The first step that leaves no node gives the denial, naming what the nodes of the
//! step before offer. Adding a node can only add candidates at every step: it never turns
//! an acceptance into a denial.

use super::{GpuNode, Inventory, Version};
use crate::gpu::{GpuCounts, MIG_PREFIX};
use std::collections::{BTreeMap, BTreeSet};

/// What one pod selects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Demand {
    /// Products the pod's node selector or required node affinity allows, when it
    /// restricts the product label.
    pub products: Option<BTreeSet<String>>,
    /// Effective GPUs per pod, by resource.
    pub gpus: GpuCounts,
    /// The least driver version, with where it was asked for.
    pub min_driver: Option<(Version, String)>,
    /// The least CUDA version, with where it was asked for.
    pub min_cuda: Option<(Version, String)>,
}

/// Why no node offers what a pod selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No schedulable node carries a product the pod selects (or, selecting none, no
    /// schedulable node has GPUs): nothing to compare with, and nodes that do not exist
    /// yet (a node pool scaling from zero) may. The message names what there is.
    NoMatchingNode(String),
    /// Nodes of the selected products exist, and none offers the rest (a MIG profile, as
    /// many GPUs per pod, the driver or CUDA version).
    Denied(String),
}

impl Refusal {
    pub fn message(&self) -> &str {
        match self {
            Refusal::NoMatchingNode(m) | Refusal::Denied(m) => m,
        }
    }
}

/// `Ok` when some node offers what `demand` selects, else why not: what is missing and
/// what the nodes offer. `product_key` is the node label the pod selects products by.
pub fn check(inventory: &Inventory, demand: &Demand, product_key: &str) -> Result<(), Refusal> {
    offering(inventory, demand, product_key).map(|_| ())
}

/// The nodes that offer what `demand` selects (at least one), else why none does, as
/// [`check`].
pub fn offering<'i>(
    inventory: &'i Inventory,
    demand: &Demand,
    product_key: &str,
) -> Result<Vec<&'i GpuNode>, Refusal> {
    let mut nodes: Vec<&GpuNode> = inventory.gpu_nodes.iter().collect();
    if nodes.is_empty() {
        return Err(Refusal::NoMatchingNode(format!(
            "no schedulable node offers GPUs ({} nodes read{})",
            inventory.nodes,
            match inventory.plugin_down_names(5) {
                Some(n) => format!("; with GPU labels but no allocatable GPU: {n}"),
                None => String::new(),
            }
        )));
    }
    let mut of = String::new();
    if let Some(products) = &demand.products {
        let matching: Vec<&GpuNode> = nodes
            .iter()
            .copied()
            .filter(|n| n.product.as_ref().is_some_and(|p| products.contains(p)))
            .collect();
        if matching.is_empty() {
            let asked = products
                .iter()
                .map(|p| format!("'{p}'"))
                .collect::<Vec<_>>()
                .join(" or ");
            let offered = product_list(inventory);
            let hint = products
                .iter()
                .find_map(|p| near(p, inventory))
                .map(|n| format!(" (did you mean '{n}'?)"))
                .unwrap_or_default();
            return Err(Refusal::NoMatchingNode(format!(
                "no node offers GPU product {asked} ({product_key}){hint}; the nodes offer {offered}"
            )));
        }
        nodes = matching;
        of = format!(
            " of {}",
            products.iter().cloned().collect::<Vec<_>>().join(" or ")
        );
    }
    for (resource, n) in &demand.gpus {
        let most = nodes
            .iter()
            .map(|node| node.allocatable.get(resource).copied().unwrap_or(0))
            .max()
            .unwrap_or(0);
        if most >= *n {
            nodes.retain(|node| node.allocatable.get(resource).copied().unwrap_or(0) >= *n);
            continue;
        }
        if most == 0
            && let Some(profile) = resource.strip_prefix(MIG_PREFIX)
        {
            let profiles = mig_profiles(&nodes);
            return Err(Refusal::Denied(format!(
                "no node{of} offers MIG profile {profile} ({resource}); {}",
                if profiles.is_empty() {
                    format!(
                        "they offer no MIG device (MIG strategy: {})",
                        strategies(&nodes)
                    )
                } else {
                    format!("they offer {}", profiles.join(", "))
                }
            )));
        }
        if most == 0 {
            return Err(Refusal::Denied(format!(
                "no node{of} offers {resource}; they offer {}",
                resources(&nodes)
            )));
        }
        return Err(Refusal::Denied(format!(
            "the pod asks for {n} {resource}, and no node{of} has more than {most} allocatable: ask for at most {most} per pod and split the work over more pods"
        )));
    }
    for (wanted, what, version) in [
        (
            &demand.min_driver,
            "driver",
            (|n: &GpuNode| n.driver.clone()) as fn(&GpuNode) -> Option<Version>,
        ),
        (&demand.min_cuda, "CUDA", |n: &GpuNode| n.cuda.clone()),
    ] {
        let Some((least, source)) = wanted else {
            continue;
        };
        let newest = nodes.iter().filter_map(|n| version(n)).max();
        match newest {
            Some(v) if v >= *least => {
                nodes.retain(|n| version(n).is_some_and(|v| v >= *least));
            }
            Some(v) => {
                return Err(Refusal::Denied(format!(
                    "the pod needs {what} version {least} or later ({source}), and the newest {what} on the nodes{of} that offer its GPUs is {v}"
                )));
            }
            None => {
                return Err(Refusal::Denied(format!(
                    "the pod needs {what} version {least} or later ({source}), and no node{of} that offers its GPUs reports its {what} version"
                )));
            }
        }
    }
    Ok(nodes)
}

/// `NVIDIA-A100-SXM4-40GB (3 nodes), NVIDIA-L4 (1 node)`.
fn product_list(inventory: &Inventory) -> String {
    let products = inventory.products();
    let unlabelled = inventory
        .gpu_nodes
        .iter()
        .filter(|n| n.product.is_none())
        .count();
    let mut parts: Vec<String> = products
        .iter()
        .map(|(p, o)| format!("{p} ({})", nodes_text(o.nodes)))
        .collect();
    if unlabelled > 0 {
        parts.push(format!(
            "GPUs without a product label ({})",
            nodes_text(unlabelled as u64)
        ));
    }
    parts.join(", ")
}

fn nodes_text(n: u64) -> String {
    if n == 1 {
        "1 node".into()
    } else {
        format!("{n} nodes")
    }
}

fn mig_profiles(nodes: &[&GpuNode]) -> Vec<String> {
    let set: BTreeSet<&str> = nodes
        .iter()
        .flat_map(|n| n.allocatable.iter())
        .filter(|(_, c)| **c > 0)
        .filter_map(|(r, _)| r.strip_prefix(MIG_PREFIX))
        .collect();
    set.into_iter().map(str::to_string).collect()
}

fn strategies(nodes: &[&GpuNode]) -> String {
    let set: BTreeSet<&str> = nodes
        .iter()
        .map(|n| n.mig_strategy.as_deref().unwrap_or("not labelled"))
        .collect();
    set.into_iter().collect::<Vec<_>>().join(", ")
}

/// `nvidia.com/gpu (up to 8 per node)`.
fn resources(nodes: &[&GpuNode]) -> String {
    let mut most: BTreeMap<&str, u64> = BTreeMap::new();
    for n in nodes {
        for (r, c) in n.allocatable.iter().filter(|(_, c)| **c > 0) {
            let m = most.entry(r).or_default();
            *m = (*m).max(*c);
        }
    }
    most.iter()
        .map(|(r, c)| format!("{r} (up to {c} per node)"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The offered product closest to `asked` (ignoring case and punctuation, or at most two
/// edits away), when it is not `asked` itself.
fn near(asked: &str, inventory: &Inventory) -> Option<String> {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let a = norm(asked);
    inventory
        .products()
        .keys()
        .map(|p| (edits(&a, &norm(p)), *p))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, p)| p.to_string())
}

/// Levenshtein distance (short strings: product names).
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(row[j]).min(cur)
            };
            prev = cur;
        }
    }
    row[b.len()]
}
