//! How much GPU memory a pod gets: its GPUs, and the memory of each.
//!
//! Memory per GPU, in order:
//! 1. a MIG resource (`nvidia.com/mig-3g.40gb`): the profile's memory (when the policy
//!    reads the nodes, the smallest their `nvidia.com/mig-<profile>.memory` labels report,
//!    else the catalog's);
//! 2. the GPU product the pod is restricted to by `nodeSelector` or required node
//!    affinity on the product label (several allowed: the smallest);
//! 3. the pool: the pod template's pool label (or a node selector on the same key) ->
//!    `poolProducts` (several allowed: the smallest).
//!
//! 4. a DRA claim whose device selector names the product (`productName == 'NVIDIA H100
//!    80GB HBM3'`, read as `NVIDIA-H100-80GB-HBM3`), when nothing above names one.
//!
//! Time-sliced GPUs (`-SHARED` products, `*.shared` resources) share one physical GPU's
//! memory: however many replicas a pod asks for, they count as one GPU's memory. A
//! fractional-GPU share ([`crate::fractional`]) gets its part of each device: a share in
//! MiB that much (known even when the product is not), a fraction that part of the
//! product's memory.

use super::catalog::products::{DeviceMemory, GpuCatalog};
use super::numbers::{Round, gib, percent_of};
use crate::fractional::{Portion, Share};
use crate::gpu::{GpuCounts, MIG_PREFIX};
use crate::inventory::Inventory;
use crate::podspec::PodSpec;
use crate::scheduling::required_label_values;
use std::collections::{BTreeMap, BTreeSet};

/// Where the memory per GPU was read from, for messages and audit annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProductSource {
    Mig,
    /// The product label in a node selector or required node affinity.
    Selector,
    /// A pool (named) via the pool label.
    Pool(String),
    /// A DRA claim's device selector.
    Claim,
    /// A fractional-GPU share given in MiB.
    Share,
}

/// One GPU resource of a pod, with the memory of each device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    pub resource: String,
    /// Devices per pod.
    pub count: u64,
    /// `NVIDIA-A10G`, `MIG 3g.40gb`.
    pub label: String,
    /// The product name when whole GPUs, for suggestions.
    pub product: Option<String>,
    pub device: DeviceMemory,
    pub source: ProductSource,
    /// The fractional-GPU share this slice is of each device (its `device.mib` is the
    /// share's part), for advice: more of the same share is not a fix.
    pub share: Option<Share>,
    /// Where the memory per GPU comes from, when the policy reads the nodes
    /// (`nodeInventory`): the nodes' report or the catalog.
    pub memory_from: Option<String>,
}

impl Slice {
    /// Devices whose memory counts for one model server: time-sliced replicas share one
    /// GPU, and a CUDA process sees only one MIG device (MIG slices do not combine).
    pub fn effective_count(&self) -> u64 {
        if self.device.shared || self.device.mig.is_some() {
            self.count.min(1)
        } else {
            self.count
        }
    }

    /// MiB this slice gives one pod (before the usable percentage).
    pub fn mib(&self) -> u64 {
        self.effective_count().saturating_mul(self.device.mib)
    }

    /// MiB this slice gives one model server at `percent` usable: the percentage is taken
    /// of each device (as `--gpu-memory-utilization` is), rounded down per device. Taking
    /// it of the sum instead made one more GPU able to turn a fit into a misfit: the
    /// rounding of a sum is not additive, while the need grows with the GPU count.
    pub fn usable_mib(&self, percent: u64) -> u64 {
        usable_per_device(self.effective_count(), self.device.mib, percent)
    }
}

/// MiB that `devices` GPUs of `mib` each give at `percent` usable, rounded down per device.
pub fn usable_per_device(devices: u64, mib: u64, percent: u64) -> u64 {
    devices.saturating_mul(percent_of(mib, percent))
}

/// The keys and tables memory resolution reads.
pub struct Lookup<'a> {
    pub catalog: &'a GpuCatalog,
    /// The GPU nodes, when the policy reads them: the memory they report per product
    /// replaces the catalog's.
    pub inventory: Option<&'a Inventory>,
    pub product_label_key: &'a str,
    pub pool_label_key: &'a str,
    pub pool_products: &'a BTreeMap<String, String>,
}

/// The GPU memory of one pod with `gpus` (effective, per resource), or why it is unknown
/// (a sentence that says what to add).
pub fn pod_slices(
    lookup: &Lookup<'_>,
    pod: PodGpuView<'_>,
    labels: &BTreeMap<String, String>,
    gpus: &GpuCounts,
) -> Result<Vec<Slice>, String> {
    let mut slices = whole_slices(lookup, pod, labels, gpus);
    if let Some(share) = pod.share {
        slices = match (slices, share.portion) {
            (Ok(mut slices), portion) => {
                for s in &mut slices {
                    s.device.mib = match portion {
                        Portion::MemoryMib(mib) => mib.min(s.device.mib),
                        Portion::Milli(m) => s.device.mib.saturating_mul(m) / 1000,
                    };
                    s.label = format!("{share} on {}", s.label);
                    s.share = Some(share.clone());
                }
                Ok(slices)
            }
            (Err(_), Portion::MemoryMib(mib)) => Ok(gpus
                .iter()
                .map(|(resource, count)| Slice {
                    resource: resource.clone(),
                    count: *count,
                    label: share.to_string(),
                    product: None,
                    device: DeviceMemory {
                        mib,
                        shared: false,
                        mig: None,
                    },
                    source: ProductSource::Share,
                    share: Some(share.clone()),
                    memory_from: None,
                })
                .collect()),
            (Err(e), Portion::Milli(_)) => Err(e),
        };
    }
    slices
}

/// What [`pod_slices`] reads of a pod beyond its GPU counts.
#[derive(Debug, Clone, Copy)]
pub struct PodGpuView<'a> {
    pub spec: &'a PodSpec,
    /// Products named by the pod's DRA claims.
    pub claim_products: &'a BTreeSet<String>,
    pub share: Option<&'a Share>,
}

fn whole_slices(
    lookup: &Lookup<'_>,
    pod: PodGpuView<'_>,
    labels: &BTreeMap<String, String>,
    gpus: &GpuCounts,
) -> Result<Vec<Slice>, String> {
    let spec = pod.spec;
    let mut slices = Vec::new();
    let mut product: Option<Result<Resolved, String>> = None;
    for (resource, count) in gpus {
        if resource.starts_with(MIG_PREFIX) {
            let mut device = lookup.catalog.mig_resource(resource).ok_or_else(|| {
                format!("{resource} is not a MIG profile name like nvidia.com/mig-3g.40gb")
            })?;
            let profile = device.mig.clone().unwrap_or_default();
            let memory_from =
                lookup
                    .inventory
                    .map(|inventory| match inventory.reported_mig_mib(&profile) {
                        Some((mib, nodes)) => {
                            device.mib = mib;
                            format!("{mib} MiB per device, reported by {}", nodes_text(nodes))
                        }
                        None => format!(
                            "{} MiB per device from the catalog: no node reports it",
                            device.mib
                        ),
                    });
            slices.push(Slice {
                resource: resource.clone(),
                count: *count,
                label: format!("MIG {profile}"),
                product: None,
                device,
                source: ProductSource::Mig,
                share: None,
                memory_from,
            });
            continue;
        }
        let resolved = product
            .get_or_insert_with(|| {
                whole_gpu_product(lookup, spec, labels)
                    .or_else(|e| claim_product(lookup, pod.claim_products).unwrap_or(Err(e)))
            })
            .clone()?;
        let Resolved {
            name,
            mut device,
            source,
            memory_from,
        } = resolved;
        if resource.ends_with(".shared") {
            device.shared = true;
        }
        slices.push(Slice {
            resource: resource.clone(),
            count: *count,
            label: name.clone(),
            product: (device.mig.is_none()).then_some(name),
            device,
            source,
            share: None,
            memory_from,
        });
    }
    Ok(slices)
}

/// A whole-GPU product, its memory per GPU and where both come from.
#[derive(Debug, Clone)]
struct Resolved {
    name: String,
    device: DeviceMemory,
    source: ProductSource,
    memory_from: Option<String>,
}

fn whole_gpu_product(
    lookup: &Lookup<'_>,
    spec: &PodSpec,
    labels: &BTreeMap<String, String>,
) -> Result<Resolved, String> {
    let key = lookup.product_label_key;
    if let Some(values) = required_label_values(spec, key) {
        return smallest(lookup, &values, key, ProductSource::Selector);
    }
    let pool_key = lookup.pool_label_key;
    if !pool_key.is_empty() {
        let pools: Option<(BTreeSet<String>, &str)> = match labels.get(pool_key) {
            Some(pool) => Some((BTreeSet::from([pool.clone()]), "label")),
            None => required_label_values(spec, pool_key).map(|v| (v, "node selector")),
        };
        if let Some((pools, how)) = pools {
            let mut products = BTreeSet::new();
            for pool in &pools {
                let product = lookup.pool_products.get(pool).ok_or_else(|| {
                    format!(
                        "pool '{pool}' (pod {how} {pool_key}) has no GPU product in the policy's poolProducts; ask the cluster admins to add it, or select a product with nodeSelector {key}"
                    )
                })?;
                products.insert(product.clone());
            }
            let pool_name = pools.into_iter().collect::<Vec<_>>().join(", ");
            return smallest(lookup, &products, key, ProductSource::Pool(pool_name));
        }
    }
    Err(format!(
        "the GPU type is unknown: select one with nodeSelector {key}: <product> (e.g. NVIDIA-L4, NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3){}",
        if pool_key.is_empty() {
            String::new()
        } else {
            format!(" or a pool with the pod label {pool_key}")
        }
    ))
}

/// The product named by DRA device selectors (NVIDIA's driver reports `NVIDIA H100 80GB
/// HBM3` where the GPU Operator's node label says `NVIDIA-H100-80GB-HBM3`).
fn claim_product(
    lookup: &Lookup<'_>,
    products: &BTreeSet<String>,
) -> Option<Result<Resolved, String>> {
    if products.is_empty() {
        return None;
    }
    let names: BTreeSet<String> = products.iter().map(|p| p.replace(' ', "-")).collect();
    Some(smallest(
        lookup,
        &names,
        "a DRA claim's productName selector",
        ProductSource::Claim,
    ))
}

/// The product with the least memory among `values`; every one must be known (to the
/// catalog, or reported by the nodes when the policy reads them).
fn smallest(
    lookup: &Lookup<'_>,
    values: &BTreeSet<String>,
    key: &str,
    source: ProductSource,
) -> Result<Resolved, String> {
    let mut best: Option<(String, DeviceMemory, Option<String>)> = None;
    for v in values {
        let (device, memory_from) = product_memory(lookup, v).ok_or_else(|| {
            format!(
                "GPU product '{v}' ({key}) is not in the policy's catalog; use a known product name or ask the cluster admins to add it to gpuProducts"
            )
        })?;
        if best.as_ref().is_none_or(|(_, b, _)| device.mib < b.mib) {
            best = Some((v.clone(), device, memory_from));
        }
    }
    best.map(|(name, device, memory_from)| Resolved {
        name,
        device,
        source,
        memory_from,
    })
    .ok_or_else(|| {
        format!(
            "the pod's nodeSelector and node affinity on {key} allow no GPU product at all; it can never be scheduled"
        )
    })
}

/// The memory per GPU of `product`: the smallest its nodes report when the policy reads
/// the nodes and any does, else the catalog's; with where it comes from when the nodes
/// are read.
fn product_memory(lookup: &Lookup<'_>, product: &str) -> Option<(DeviceMemory, Option<String>)> {
    let catalog = lookup.catalog.product(product);
    let Some(inventory) = lookup.inventory else {
        return catalog.map(|d| (d, None));
    };
    match (inventory.reported_mib(product), catalog) {
        (Some((mib, nodes)), catalog) => {
            let device = match catalog {
                Some(d) => DeviceMemory { mib, ..d },
                None => DeviceMemory {
                    mib,
                    shared: product.ends_with("-SHARED"),
                    mig: None,
                },
            };
            Some((
                device,
                Some(format!(
                    "{mib} MiB per GPU, reported by {}",
                    nodes_text(nodes)
                )),
            ))
        }
        (None, Some(d)) => {
            let mib = d.mib;
            Some((
                d,
                Some(format!(
                    "{mib} MiB per GPU from the catalog: no node reports it"
                )),
            ))
        }
        (None, None) => None,
    }
}

fn nodes_text(nodes: u64) -> String {
    if nodes == 1 {
        "1 node".to_string()
    } else {
        format!("{nodes} nodes")
    }
}

/// `2 x NVIDIA-A10G + 1 x MIG 1g.10gb` for one pod, or summed over a group's pods; with
/// where the memory per GPU comes from when the policy reads the nodes.
pub fn describe(parts: &[(u64, &Slice)]) -> String {
    let mut by_label: Vec<(String, u64, Option<String>)> = Vec::new();
    for (pods, s) in parts {
        let n = pods.saturating_mul(s.count);
        let combine = (s.count > s.effective_count()).then_some(if s.device.shared {
            "time-sliced: counted as one GPU's memory per pod"
        } else {
            "MIG devices do not combine: counted as one per pod"
        });
        let note = match (combine, &s.memory_from) {
            (Some(c), Some(m)) => Some(format!("{m}; {c}")),
            (Some(c), None) => Some(c.to_string()),
            (None, m) => m.clone(),
        };
        match by_label.iter_mut().find(|(l, _, _)| *l == s.label) {
            Some((_, c, old)) => {
                *c = c.saturating_add(n);
                if old.is_none() {
                    *old = note;
                }
            }
            None => by_label.push((s.label.clone(), n, note)),
        }
    }
    by_label
        .iter()
        .map(|(label, n, note)| match note {
            Some(note) => format!("{n} x {label} ({note})"),
            None => format!("{n} x {label}"),
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// `40 GiB usable at 90%`, from the usable MiB ([`Slice::usable_mib`]).
pub fn usable_text(usable_mib: u64, percent: u64) -> String {
    format!("{} usable at {percent}%", gib(usable_mib, Round::Down))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{text_ends, text_says, text_starts};
    use serde_json::{Value, json};

    fn spec(v: Value) -> PodSpec {
        serde_json::from_value(v).unwrap()
    }

    fn counts(pairs: &[(&str, u64)]) -> GpuCounts {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn resolve(
        spec_json: Value,
        labels: &[(&str, &str)],
        gpus: &[(&str, u64)],
    ) -> Result<Vec<Slice>, String> {
        let catalog = GpuCatalog::default();
        let pools = BTreeMap::from([
            ("a10g".to_string(), "NVIDIA-A10G".to_string()),
            ("h100".to_string(), "NVIDIA-H100-80GB-HBM3".to_string()),
        ]);
        let lookup = Lookup {
            catalog: &catalog,
            inventory: None,
            product_label_key: "nvidia.com/gpu.product",
            pool_label_key: "gpu-admission/pool",
            pool_products: &pools,
        };
        let labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let spec = spec(spec_json);
        let none = BTreeSet::new();
        let view = PodGpuView {
            spec: &spec,
            claim_products: &none,
            share: None,
        };
        pod_slices(&lookup, view, &labels, &counts(gpus))
    }

    /// The slices of `gpus` on nodes selected by their product label.
    fn on_product(product: &str, gpus: &[(&str, u64)]) -> Vec<Slice> {
        resolve(
            json!({"nodeSelector": {"nvidia.com/gpu.product": product}}),
            &[],
            gpus,
        )
        .unwrap()
    }

    fn summary(slices: &[Slice]) -> Vec<(String, u64, u64)> {
        slices
            .iter()
            .map(|s| (s.label.clone(), s.count, s.mib()))
            .collect()
    }

    #[test]
    fn mig_resources_need_no_selector() {
        let s = resolve(json!({}), &[], &[("nvidia.com/mig-3g.40gb", 1)]).unwrap();
        assert_eq!(summary(&s), vec![("MIG 3g.40gb".to_string(), 1, 40960)]);
        assert_eq!(s[0].source, ProductSource::Mig);
    }

    #[test]
    fn node_selector_gives_the_product() {
        let s = on_product("NVIDIA-A10G", &[("nvidia.com/gpu", 2)]);
        assert_eq!(summary(&s), vec![("NVIDIA-A10G".to_string(), 2, 46056)]);
        assert_eq!(s[0].source, ProductSource::Selector);
        assert_eq!(s[0].product.as_deref(), Some("NVIDIA-A10G"));
    }

    #[test]
    fn affinity_with_several_products_takes_the_smallest() {
        let s = resolve(
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
                  "values": ["NVIDIA-H100-80GB-HBM3", "NVIDIA-L4", "NVIDIA-A100-SXM4-80GB"]}]}]}}}}),
            &[("gpu-admission/pool", "h100")],
            &[("nvidia.com/gpu", 1)],
        )
        .unwrap();
        assert_eq!(s[0].label, "NVIDIA-L4", "the selector beats the pool label");
    }

    #[test]
    fn pool_label_gives_the_product() {
        let s = resolve(
            json!({}),
            &[("gpu-admission/pool", "h100")],
            &[("nvidia.com/gpu", 4)],
        )
        .unwrap();
        assert_eq!(s[0].label, "NVIDIA-H100-80GB-HBM3");
        assert_eq!(s[0].source, ProductSource::Pool("h100".into()));
        let by_selector = resolve(
            json!({"nodeSelector": {"gpu-admission/pool": "a10g"}}),
            &[],
            &[("nvidia.com/gpu", 1)],
        )
        .unwrap();
        assert_eq!(by_selector[0].label, "NVIDIA-A10G");
    }

    #[test]
    fn shared_gpus_count_once() {
        let s = on_product("NVIDIA-A10G-SHARED", &[("nvidia.com/gpu", 4)]);
        assert_eq!(s[0].mib(), 23028);
        assert_eq!(
            describe(&[(1, &s[0])]),
            "4 x NVIDIA-A10G-SHARED (time-sliced: counted as one GPU's memory per pod)"
        );
        let r = on_product("NVIDIA-L4", &[("nvidia.com/gpu.shared", 2)]);
        assert_eq!(r[0].mib(), 23034);
    }

    #[test]
    fn mixed_resources_are_each_resolved() {
        let s = on_product(
            "NVIDIA-A100-SXM4-80GB",
            &[("nvidia.com/gpu", 1), ("nvidia.com/mig-1g.10gb", 2)],
        );
        assert_eq!(
            describe(&[(1, &s[0]), (1, &s[1])]),
            "1 x NVIDIA-A100-SXM4-80GB + 2 x MIG 1g.10gb (MIG devices do not combine: counted as one per pod)"
        );
        assert_eq!(s.iter().map(Slice::mib).sum::<u64>(), 81920 + 10240);
        assert_eq!(
            describe(&[(3, &s[0])]),
            "3 x NVIDIA-A100-SXM4-80GB",
            "pods add up"
        );
    }

    #[test]
    fn unknown_gpus_say_what_to_add() {
        // Why one GPU of the pod `spec` labelled `labels` has no known memory.
        let refused = |spec: Value, labels: &[(&str, &str)]| {
            resolve(spec, labels, &[("nvidia.com/gpu", 1)]).unwrap_err()
        };
        let none = refused(json!({}), &[]);
        text_starts(
            &none,
            "the GPU type is unknown: select one with nodeSelector nvidia.com/gpu.product: <product>",
        );
        text_ends(&none, "or a pool with the pod label gpu-admission/pool");
        let product = refused(
            json!({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-Z9"}}),
            &[],
        );
        text_starts(
            &product,
            "GPU product 'NVIDIA-Z9' (nvidia.com/gpu.product) is not in the policy's catalog",
        );
        let pool = refused(json!({}), &[("gpu-admission/pool", "tpu")]);
        text_starts(
            &pool,
            "pool 'tpu' (pod label gpu-admission/pool) has no GPU product",
        );
        let empty = refused(
            json!({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
                   "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                     {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A10G"]}]}]}}}}),
            &[],
        );
        text_says(&empty, "allow no GPU product at all");
    }

    #[test]
    fn usable_text_rounds_down() {
        assert_eq!(usable_text(41450, 90), "40 GiB usable at 90%");
    }

    #[test]
    fn usable_memory_is_rounded_per_device() {
        // 0.9 x 23,028 = 20,725.2 per A10G: two give 41,450, three 62,175 (not 62,175.6
        // rounded once, which can exceed what each GPU's share adds).
        let s = on_product("NVIDIA-A10G", &[("nvidia.com/gpu", 3)]);
        assert_eq!(s[0].usable_mib(90), 3 * 20725);
        assert_eq!(usable_per_device(3, 20001, 50), 30000);
        let mig = resolve(json!({}), &[], &[("nvidia.com/mig-1g.10gb", 4)]).unwrap();
        assert_eq!(mig[0].usable_mib(90), 9216, "MIG devices do not combine");
    }
}
