//! GPUs held by Pods: a pool's (in total and per node), a team's (per value of the pool
//! label), read from masked Pod lists one pod at a time.

use crate::gpu::{GpuCounts, GpuResources, add_into, add_scaled, pod_gpus};
use crate::lists::{ListError, for_each_item, json_string, lean, raw_str, read_raw};
use crate::pools::nodes::NodeGpus;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::collections::hash_map::Entry;

/// GPUs held by a pool's Pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodTotals {
    pub pods: u64,
    pub used: GpuCounts,
    /// GPUs held by the pods bound to each node (`spec.nodeName`); pending pods hold
    /// theirs in `used` only.
    pub per_node: HashMap<String, GpuCounts>,
}

/// Sums the effective GPU requests of the pods in a `PodList`, one pod at a time (the
/// list is never held in memory as a whole). The list is read by [`crate::lists`], which
/// keeps the raw values of the `spec` members that hold GPU requests and the pod's
/// `nodeName`, and skips the rest (metadata, status); those values are parsed by
/// serde_json keeping only GPU entries of `limits` / `requests` (keys borrowed while
/// reading), then go through the shared effective-request rule ([`pod_gpus`]).
///
/// Replicas of one workload have the same masked `spec` but for `nodeName` (the masks keep
/// only resources and the node), so each distinct text of those members is read once and
/// its GPUs are counted per occurrence: a pool of thousands of pods from a few dozen
/// workloads parses a few dozen specs. The memo borrows the input and holds one entry per
/// distinct spec; GPUs are summed per node (one entry per node name, borrowed too) and for
/// pending pods, and the pool's total is their sum.
pub fn parse_pods(bytes: &[u8], names: &GpuResources) -> Result<PodTotals, ListError> {
    let counts = count_pods(bytes, names)?;
    let mut totals = counts.totals();
    for ((node, shape), n) in &counts.on_node {
        add_scaled(
            totals.per_node.entry(json_string(node)?).or_default(),
            &counts.shapes[*shape],
            *n,
        );
    }
    Ok(totals)
}

/// [`parse_pods`] for the nodes of `nodes` (as [`crate::pools::nodes::parse_nodes`] lists them): the totals,
/// and the GPUs held by the pods bound to each of those nodes, in their order (pods bound
/// to other nodes count in the totals only). No node name is copied.
pub fn parse_pods_on(
    bytes: &[u8],
    names: &GpuResources,
    nodes: &[NodeGpus],
) -> Result<(PodTotals, Vec<GpuCounts>), ListError> {
    let counts = count_pods(bytes, names)?;
    let totals = counts.totals();
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let mut used = vec![GpuCounts::new(); nodes.len()];
    for ((node, shape), n) in &counts.on_node {
        let found = match raw_str(node) {
            Some(name) => index.get(name).copied(),
            None => index.get(json_string(node)?.as_str()).copied(),
        };
        if let Some(i) = found {
            add_scaled(&mut used[i], &counts.shapes[*shape], *n);
        }
    }
    Ok((totals, used))
}

/// What [`count_pods`] found: the GPUs of each distinct pod shape, how many pods have
/// it, and how many of those are bound to each node (raw `nodeName` values).
struct PodCounts<'a> {
    pods: u64,
    shapes: Vec<GpuCounts>,
    per_shape: Vec<u64>,
    on_node: HashMap<(&'a str, usize), u64>,
    /// Per (raw value of the counted label, `None` without it; shape), when a label is
    /// counted.
    per_label: HashMap<(Option<&'a str>, usize), u64>,
}

impl PodCounts<'_> {
    fn totals(&self) -> PodTotals {
        let mut totals = PodTotals {
            pods: self.pods,
            ..PodTotals::default()
        };
        for (shape, n) in self.shapes.iter().zip(&self.per_shape) {
            add_scaled(&mut totals.used, shape, *n);
        }
        totals
    }
}

fn count_pods<'a>(bytes: &'a [u8], names: &GpuResources) -> Result<PodCounts<'a>, ListError> {
    count_pods_labelled(bytes, names, None)
}

/// The raw `spec` members a pod's GPUs depend on: `containers`, `initContainers`,
/// `ephemeralContainers`, `resources`.
pub(crate) type SpecParts<'a> = [Option<&'a str>; 4];

/// What [`count_pods_labelled`] reads of a pod: its [`SpecParts`], `spec.nodeName` and the
/// counted label.
type PodValues<'a> = [Option<&'a RawValue>; 6];

/// [`count_pods`], also counting the pods of each shape per raw value of the pod label
/// `label` (pods without it under `None`) when it is given.
fn count_pods_labelled<'a>(
    bytes: &'a [u8],
    names: &GpuResources,
    label: Option<&str>,
) -> Result<PodCounts<'a>, ListError> {
    let mut pods = 0u64;
    let mut per_label: HashMap<(Option<&str>, usize), u64> = HashMap::new();
    // The spec's members but nodeName -> its index in `shapes`, the GPUs of one such pod.
    let mut seen: HashMap<SpecParts, usize> = HashMap::new();
    let mut shapes: Vec<GpuCounts> = Vec::new();
    // Pods per shape (all of them), and per (raw nodeName value, shape) for bound pods:
    // per pod one lookup in `seen` and one here, nothing allocated.
    let mut per_shape: Vec<u64> = Vec::new();
    let mut on_node: HashMap<(&str, usize), u64> = HashMap::new();
    let mut recent: [Option<(SpecParts, usize)>; 4] = [None; 4];
    let mut run: Option<(&str, usize, u64)> = None;
    // Without a label to count, the last path names no member of a pod.
    let label_path = ["metadata", "labels", label.unwrap_or_default()];
    let label_path: &[&str] = if label.is_some() { &label_path } else { &[""] };
    let paths: [&[&str]; 6] = [
        &["spec", "containers"],
        &["spec", "initContainers"],
        &["spec", "ephemeralContainers"],
        &["spec", "resources"],
        &["spec", "nodeName"],
        label_path,
    ];
    let on_pod = |[containers, init, ephemeral, resources, node, label_value]: PodValues<'a>|
     -> Result<(), ListError> {
        pods += 1;
        let key: SpecParts = [containers, init, ephemeral, resources].map(|p| p.map(RawValue::get));
        // Replicas are listed near each other (lists come sorted by namespace and name):
        // comparing with the few specs seen last is cheaper than hashing this one.
        let cached = recent
            .iter()
            .flatten()
            .find(|(k, _)| *k == key)
            .map(|(_, s)| *s);
        let shape = match cached {
            Some(shape) => shape,
            None => {
                let shape = match seen.entry(key) {
                    Entry::Occupied(e) => *e.get(),
                    Entry::Vacant(e) => {
                        let gpus = spec_gpus(&key, names)?;
                        if gpus.is_empty() {
                            // A pod without GPUs counts nowhere: remember it as such.
                            *e.insert(usize::MAX)
                        } else {
                            shapes.push(gpus);
                            per_shape.push(0);
                            *e.insert(shapes.len() - 1)
                        }
                    }
                };
                recent.rotate_right(1);
                recent[0] = Some((key, shape));
                shape
            }
        };
        if shape == usize::MAX {
            return Ok(());
        }
        per_shape[shape] += 1;
        if label.is_some() {
            *per_label
                .entry((label_value.map(RawValue::get), shape))
                .or_insert(0) += 1;
        }
        if let Some(node) = node.map(RawValue::get) {
            // Pods of one node in a row are counted together, then added to `on_node`.
            match &mut run {
                Some((n, s, count)) if *n == node && *s == shape => *count += 1,
                _ => {
                    if let Some((n, s, count)) = run.replace((node, shape, 1)) {
                        *on_node.entry((n, s)).or_insert(0) += count;
                    }
                }
            }
        }
        Ok(())
    };
    for_each_item(bytes, paths, on_pod)?;
    if let Some((n, s, count)) = run {
        *on_node.entry((n, s)).or_insert(0) += count;
    }
    Ok(PodCounts {
        pods,
        shapes,
        per_shape,
        on_node,
        per_label,
    })
}

/// GPUs held by a set of Pods (a team's), in total and per value of one pod label (the
/// pool label).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelledUse {
    pub pods: u64,
    pub used: GpuCounts,
    /// Per value of the label (in no order; values are few); pods without it are in
    /// `used` only.
    pub per_value: Vec<(String, GpuCounts)>,
}

impl LabelledUse {
    /// What the pods with label value `value` hold.
    pub fn of_value(&self, value: &str) -> Option<&GpuCounts> {
        self.per_value
            .iter()
            .find(|(v, _)| v == value)
            .map(|(_, used)| used)
    }

    fn value_mut(&mut self, value: &str) -> &mut GpuCounts {
        let i = match self.per_value.iter().position(|(v, _)| v == value) {
            Some(i) => i,
            None => {
                self.per_value.push((value.to_string(), GpuCounts::new()));
                self.per_value.len() - 1
            }
        };
        &mut self.per_value[i].1
    }

    /// Adds another list's counts (a team read namespace by namespace).
    pub fn add(&mut self, other: &LabelledUse) {
        self.pods += other.pods;
        add_into(&mut self.used, &other.used);
        for (value, used) in &other.per_value {
            add_into(self.value_mut(value), used);
        }
    }
}

/// Sums the effective GPU requests of the pods of a `PodList` as [`parse_pods`] does, and
/// per value of the pod label `label_key` (a team's pods per pool).
pub fn parse_pods_by_label(
    bytes: &[u8],
    names: &GpuResources,
    label_key: &str,
) -> Result<LabelledUse, ListError> {
    let counts = count_pods_labelled(bytes, names, Some(label_key))?;
    let totals = counts.totals();
    let mut labelled = LabelledUse::default();
    for ((raw, shape), n) in &counts.per_label {
        let Some(raw) = raw else {
            continue;
        };
        add_scaled(
            labelled.value_mut(&json_string(raw)?),
            &counts.shapes[*shape],
            *n,
        );
    }
    labelled.pods = totals.pods;
    labelled.used = totals.used;
    Ok(labelled)
}

/// The effective GPU request of one masked pod spec, given by the raw values of its
/// members `containers`, `initContainers`, `ephemeralContainers` and `resources`.
pub(crate) fn spec_gpus(
    parts: &SpecParts,
    names: &GpuResources,
) -> Result<GpuCounts, serde_json::Error> {
    let [containers, init, ephemeral, resources] = *parts;
    let list = |raw: Option<&str>| {
        raw.map_or_else(|| Ok(Vec::new()), |r| read_raw(r, lean::Containers(names)))
    };
    let spec = crate::podspec::PodSpec {
        containers: list(containers)?,
        init_containers: list(init)?,
        ephemeral_containers: list(ephemeral)?,
        resources: resources
            .map(|r| read_raw(r, lean::Object(lean::ResourcesOf(names))))
            .transpose()?,
        ..Default::default()
    };
    Ok(pod_gpus(&spec, names).effective)
}

#[cfg(test)]
mod tests;
