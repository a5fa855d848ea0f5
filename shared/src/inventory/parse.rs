//! A `NodeList` read into an [`Inventory`], item by item ([`crate::lists`]): each node's
//! name, the labels [`LabelKeys`] names (with the MIG memory labels of every profile) (the dozens of others GFD writes are skipped
//! unread), and its masked `spec` and `status.allocatable`, read as the capacity gate reads
//! them ([`crate::pools::nodes::node_gpus`]).

use super::keys::{LabelKeys, at};
use super::{GpuNode, Inventory, Version};
use crate::gpu::{GpuCounts, GpuResources};
use crate::lists::lean::{Labels, Members};
use crate::lists::{ListError, for_each_item, json_string, lean, read_raw};
use crate::pools::nodes::node_gpus;
use serde::de::MapAccess;
use serde_json::value::RawValue;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// Reads a `NodeList` answer.
pub fn parse_inventory(
    bytes: &[u8],
    keys: &LabelKeys,
    names: &GpuResources,
) -> Result<Inventory, ListError> {
    let wanted = keys.all();
    let mut inventory = Inventory::default();
    // (spec, allocatable) text -> allocatable GPUs (`None`: unschedulable), shared by the
    // nodes of one machine type.
    type Key<'a> = (Option<&'a str>, Option<&'a str>);
    let mut seen: HashMap<Key, Option<Rc<GpuCounts>>> = HashMap::new();
    for_each_item(
        bytes,
        [
            &["metadata", "name"],
            &["metadata", "labels"],
            &["spec"],
            &["status", "allocatable"],
        ],
        |[name, labels, spec, allocatable]: [Option<&RawValue>; 4]| {
            inventory.nodes += 1;
            let key = (spec.map(RawValue::get), allocatable.map(RawValue::get));
            let gpus = match seen.get(&key) {
                Some(g) => g.clone(),
                None => {
                    let g = node_gpus(key.0, key.1, names)?.map(Rc::new);
                    seen.insert(key, g.clone());
                    g
                }
            };
            let Some(allocatable) = gpus else {
                return Ok(());
            };
            let mut values: [Option<String>; at::N] = Default::default();
            let mut mig_memory = BTreeMap::new();
            if let Some(raw) = labels {
                let read = read_raw(
                    raw.get(),
                    lean::Object(NodeLabels {
                        keys,
                        wanted: &wanted,
                    }),
                )?;
                for (i, v) in read.values {
                    values[i] = Some(v);
                }
                mig_memory = read.mig_memory;
            }
            let name = name.map_or(Ok(String::new()), |n| json_string(n.get()))?;
            let mut node = node_of(name, &values, allocatable);
            node.mig_memory = mig_memory;
            let has_gpus = node.allocatable.values().any(|n| *n > 0);
            if has_gpus {
                inventory.gpu_nodes.push(node);
            } else if has_gpu_labels(&values) {
                inventory.plugin_down.push(node.name);
            }
            Ok::<(), ListError>(())
        },
    )?;
    Ok(inventory)
}

/// A node's labels: the values of the keys [`LabelKeys`] names (by index), and the MIG
/// memory labels (`nvidia.com/mig-<profile>.memory`, MiB above 0); the others skipped.
struct NodeLabels<'k> {
    keys: &'k LabelKeys,
    wanted: &'k [&'k str],
}

#[derive(Default)]
struct ReadLabels {
    values: Vec<(usize, String)>,
    mig_memory: BTreeMap<String, u64>,
}

impl Members for NodeLabels<'_> {
    type Value = ReadLabels;
    const WHAT: &'static str = "a map of labels";
    fn member<'de, A: MapAccess<'de>>(
        &self,
        out: &mut ReadLabels,
        key: &str,
        map: &mut A,
    ) -> Result<bool, A::Error> {
        if Labels(self.wanted).member(&mut out.values, key, map)? {
            return Ok(true);
        }
        let Some(profile) = self.keys.mig_profile_of(key) else {
            return Ok(false);
        };
        let value: String = map.next_value()?;
        if let Ok(mib) = value.trim().parse::<u64>()
            && mib > 0
        {
            out.mig_memory.insert(profile.to_string(), mib);
        }
        Ok(true)
    }
}

fn label(values: &[Option<String>], i: usize) -> Option<&str> {
    values[i]
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// A product label, or a GPU count above 0.
fn has_gpu_labels(values: &[Option<String>]) -> bool {
    [at::PRODUCT, at::AMD_PRODUCT, at::INTEL_PRODUCT]
        .iter()
        .any(|i| label(values, *i).is_some())
        || [at::COUNT, at::INTEL_COUNT]
            .iter()
            .any(|i| label(values, *i).and_then(|v| v.parse::<u64>().ok()) > Some(0))
}

fn node_of(name: String, values: &[Option<String>], allocatable: Rc<GpuCounts>) -> GpuNode {
    let product = [at::PRODUCT, at::AMD_PRODUCT, at::INTEL_PRODUCT]
        .iter()
        .find_map(|i| label(values, *i))
        .map(str::to_string);
    let memory_mib = label(values, at::MEMORY)
        .and_then(|v| v.parse::<u64>().ok())
        .or_else(|| label(values, at::AMD_MEMORY).and_then(amd_mib))
        .or_else(|| {
            let total: u64 = label(values, at::INTEL_MEMORY_TOTAL)?.parse().ok()?;
            let count = label(values, at::INTEL_COUNT)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(1)
                .max(1);
            Some(total / count / (1024 * 1024))
        })
        .filter(|m| *m > 0);
    let driver = Version::from_parts(&at::DRIVER.map(|i| label(values, i)))
        .or_else(|| label(values, at::AMD_DRIVER).and_then(Version::parse));
    let cuda = Version::from_parts(&at::CUDA.map(|i| label(values, i)));
    GpuNode {
        name,
        product,
        memory_mib,
        mig_strategy: label(values, at::MIG_STRATEGY).map(str::to_string),
        driver,
        cuda,
        allocatable,
        mig_memory: BTreeMap::new(),
    }
}

/// AMD's `amd.com/gpu.vram` (`191G`) in MiB: `M`, `G`, `T` as MiB, GiB, TiB.
fn amd_mib(v: &str) -> Option<u64> {
    let (number, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = number.parse().ok()?;
    let scale = match unit {
        "M" | "Mi" => 1,
        "G" | "Gi" => 1024,
        "T" | "Ti" => 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::amd_mib;

    #[test]
    fn amd_memory_reads_its_unit() {
        assert_eq!(amd_mib("191G"), Some(191 * 1024));
        assert_eq!(amd_mib("512M"), Some(512));
        assert_eq!(amd_mib("1T"), Some(1024 * 1024));
        assert_eq!(amd_mib("64"), None, "a unit is needed");
        assert_eq!(amd_mib("64X"), None);
        assert_eq!(amd_mib("G"), None);
    }
}
