//! The pool set of a policy's settings (`poolLabelKey` and `pools`): which pools a pod
//! template targets, and the checks every pool passes, whichever policy reads it.

use super::pool::{DeclaredGpus, Pool, Usage};
use crate::gpu::GpuResources;
use crate::podspec::PodSpec;
use crate::schedule::Checked;
use crate::scheduling::required_label_values;
use crate::selector::{LabelSelector, Operator};
use crate::settings::{
    FieldError, check_pool_ref, check_unique_pool_name, check_window_ref, validate_label_key,
    validate_label_value, validate_object_name,
};
use std::collections::{BTreeMap, BTreeSet};

/// A policy's pools: the pool label and the pools, borrowed from its settings (where they
/// are two top-level fields).
#[derive(Debug, Clone, Copy)]
pub struct PoolSet<'a> {
    /// The pod template label that names a workload's pool.
    pub label_key: &'a str,
    pub pools: &'a [Pool],
}

/// What a policy's pools are checked against besides themselves.
pub struct PoolChecks<'a> {
    /// What counts as a GPU (`capacity`, `maxAllocatable`, `gpusPerNode` keys).
    pub names: GpuResources<'a>,
    /// The `usage` of pools that do not say (the capacity gate's). `None`: the policy
    /// does not count GPUs in use, so `usage` and `priorityClasses` are checked for their
    /// form only.
    pub default_usage: Option<Usage>,
    /// The checked schedules `thresholds[].window` may name. `None`: the policy has no
    /// schedules (thresholds do not apply to it), so windows are checked for their form only.
    pub schedules: Option<&'a BTreeMap<String, Checked>>,
}

impl<'a> PoolSet<'a> {
    /// The pool named `name`, with its index.
    pub fn named(&self, name: &str) -> Option<(usize, &'a Pool)> {
        self.pools.iter().enumerate().find(|(_, p)| p.name == name)
    }

    /// The pools a pod template targets: the pool its pool label names, and every pool
    /// whose node selector its node constraints satisfy. A template can target several
    /// pools; it is then checked against each (pods could land in any of them).
    ///
    /// Node constraints are the template's `nodeSelector` plus every required node
    /// affinity key restricted to exactly one value. A pool label naming no configured
    /// pool is ignored (the nodeSelector still decides), so a made-up pool name does not
    /// escape.
    pub fn targeted_by(&self, labels: &BTreeMap<String, String>, spec: &PodSpec) -> Vec<usize> {
        let mut pools = Vec::new();
        if let Some((i, _)) = labels.get(self.label_key).and_then(|name| self.named(name)) {
            pools.push(i);
        }
        let mut node_labels = spec.node_selector.clone();
        let keys: BTreeSet<&str> = self
            .pools
            .iter()
            .flat_map(|p| {
                p.node_selector
                    .match_labels
                    .keys()
                    .map(String::as_str)
                    .chain(
                        p.node_selector
                            .match_expressions
                            .iter()
                            .map(|r| r.key.as_str()),
                    )
            })
            .collect();
        for key in keys {
            if node_labels.contains_key(key) {
                continue;
            }
            if let Some(values) = required_label_values(spec, key)
                && values.len() == 1
                && let Some(value) = values.into_iter().next()
            {
                node_labels.insert(key.to_string(), value);
            }
        }
        for (i, pool) in self.pools.iter().enumerate() {
            if !pools.contains(&i) && selects(&pool.node_selector, &node_labels) {
                pools.push(i);
            }
        }
        pools
    }

    /// Checks the pool label and every pool: named (a label value, unique), with a node
    /// selector of its own or a declared `capacity`, a threshold in 1..=100, GPU maps of
    /// whole GPUs the policy counts, at most one ceiling and not beside `capacity`,
    /// `priorityClasses` as `usage` needs them, `alternatives` naming other pools, and
    /// `thresholds` naming schedules.
    pub fn check(&self, checks: &PoolChecks) -> Result<(), FieldError> {
        validate_label_key("poolLabelKey", self.label_key)?;
        for (i, pool) in self.pools.iter().enumerate() {
            let field = format!("pools[{i}]");
            self.check_pool(i, &field, pool)?;
            check_gpus(
                checks,
                &format!("{field}.capacity"),
                pool.capacity.as_ref(),
                "declare the pool's GPUs per resource, e.g. {nvidia.com/gpu: 512}, or remove capacity to measure them from the pool's nodes",
            )?;
            check_ceiling(checks, &field, pool)?;
            self.check_priority_classes(checks, i, &field, pool)?;
            self.check_alternatives(i, &field, pool)?;
        }
        for (i, pool) in self.pools.iter().enumerate() {
            check_thresholds(checks, &format!("pools[{i}]"), pool)?;
        }
        Ok(())
    }

    fn check_pool(&self, i: usize, field: &str, pool: &Pool) -> Result<(), FieldError> {
        if pool.name.is_empty() {
            return Err(FieldError::new(
                format!("{field}.name"),
                format!(
                    "must not be empty; it is the value of the {} label on the pool's pods",
                    self.label_key
                ),
            ));
        }
        validate_label_value(&format!("{field}.name"), &pool.name)?;
        check_unique_pool_name(
            field,
            &pool.name,
            self.pools[..i].iter().map(|p| p.name.as_str()),
        )?;
        let selector_field = format!("{field}.nodeSelector");
        if pool.node_selector.is_empty() && pool.capacity.is_none() {
            return Err(FieldError::new(
                selector_field,
                format!(
                    "must select the pool's nodes (matchLabels or matchExpressions); an empty selector would count every node of the cluster. Or declare the pool's GPUs in {field}.capacity instead of measuring its nodes"
                ),
            ));
        }
        pool.node_selector.validate(&selector_field)?;
        if let Some((j, _)) = self
            .pools
            .iter()
            .enumerate()
            .take(i)
            .filter(|_| !pool.node_selector.is_empty())
            .find(|(_, other)| other.node_selector == pool.node_selector)
        {
            return Err(FieldError::new(
                selector_field,
                format!("same as pools[{j}].nodeSelector; two pools cannot share their nodes"),
            ));
        }
        check_percent(&format!("{field}.thresholdPercent"), pool.threshold_percent)
    }

    /// `alternatives`: other pools, each once.
    fn check_alternatives(&self, i: usize, field: &str, pool: &Pool) -> Result<(), FieldError> {
        for (k, name) in pool.alternatives.iter().enumerate() {
            let f = format!("{field}.alternatives[{k}]");
            if *name == pool.name {
                return Err(FieldError::new(f, "a pool cannot be its own alternative"));
            }
            let others: Vec<&str> = self
                .pools
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, p)| p.name.as_str())
                .collect();
            check_pool_ref(&f, name, &others)?;
            if pool.alternatives[..k].contains(name) {
                return Err(FieldError::new(f, format!("'{name}' is listed twice")));
            }
        }
        Ok(())
    }

    /// `priorityClasses`: PriorityClass names, each once. Where GPUs in use are counted:
    /// required with `usage: quotas` (the scope of the pool's ResourceQuotas), meaningless
    /// without it, and never shared by two pools (a quota scoped to a shared class would
    /// count both pools' pods).
    fn check_priority_classes(
        &self,
        checks: &PoolChecks,
        i: usize,
        field: &str,
        pool: &Pool,
    ) -> Result<(), FieldError> {
        let usage_of = |p: &Pool| p.usage.or(checks.default_usage);
        let quotas = usage_of(pool) == Some(Usage::Quotas);
        if checks.default_usage.is_some() && !quotas {
            if !pool.priority_classes.is_empty() {
                return Err(FieldError::new(
                    format!("{field}.priorityClasses"),
                    format!(
                        "only used with usage: quotas (the pool's usage is pods); remove it or set {field}.usage: quotas"
                    ),
                ));
            }
            return Ok(());
        }
        if quotas && pool.priority_classes.is_empty() {
            return Err(FieldError::new(
                format!("{field}.priorityClasses"),
                format!(
                    "usage: quotas counts the pool's pods through ResourceQuotas scoped to the pool's PriorityClasses; list them (the classes gpu-pool-routing-policy gives the pool's workloads, e.g. [{}-high])",
                    pool.name
                ),
            ));
        }
        for (k, class) in pool.priority_classes.iter().enumerate() {
            let f = format!("{field}.priorityClasses[{k}]");
            validate_object_name(&f, class, "PriorityClass")?;
            if pool.priority_classes[..k].contains(class) {
                return Err(FieldError::new(f, format!("'{class}' is listed twice")));
            }
            if !quotas {
                continue;
            }
            if let Some((j, _)) = self.pools[..i].iter().enumerate().find(|(_, other)| {
                usage_of(other) == Some(Usage::Quotas) && other.priority_classes.contains(class)
            }) {
                return Err(FieldError::new(
                    f,
                    format!(
                        "'{class}' is also a class of pools[{j}]; a ResourceQuota scoped to it would count the pods of both pools"
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn check_percent(field: &str, percent: u32) -> Result<(), FieldError> {
    if !(1..=100).contains(&percent) {
        return Err(FieldError::new(
            field,
            format!("must be between 1 and 100 (got {percent})"),
        ));
    }
    Ok(())
}

/// A map of GPUs per resource name, when given ([`check_gpu_map`]).
fn check_gpus(
    checks: &PoolChecks,
    field: &str,
    declared: Option<&BTreeMap<String, DeclaredGpus>>,
    if_empty: &str,
) -> Result<(), FieldError> {
    match declared {
        Some(declared) => check_gpu_map(&checks.names, field, declared, if_empty),
        None => Ok(()),
    }
}

/// A map of GPUs per resource name (`{nvidia.com/gpu: 64}`): at least one entry (else
/// `if_empty`), each a GPU resource of `names` with a whole number of GPUs.
pub fn check_gpu_map(
    names: &GpuResources,
    field: &str,
    declared: &BTreeMap<String, DeclaredGpus>,
    if_empty: &str,
) -> Result<(), FieldError> {
    if declared.is_empty() {
        return Err(FieldError::new(field, if_empty));
    }
    for (resource, value) in declared {
        if !names.is_gpu(resource) {
            return Err(FieldError::new(
                format!("{field}.{resource}"),
                format!(
                    "not a GPU resource the gate counts ({}, nvidia.com/mig-*, or a name in extraGpuResources)",
                    crate::gpu::BUILTIN_GPU_RESOURCES.join(", ")
                ),
            ));
        }
        value.count().map_err(|e| {
            FieldError::new(
                format!("{field}.{resource}"),
                format!("must be a whole number of GPUs ({e})"),
            )
        })?;
    }
    Ok(())
}

/// The pool's ceiling: one of `maxAllocatable`, `karpenterNodePool` and
/// `clusterAutoscaler`, on a pool whose allocatable GPUs are measured from its nodes.
fn check_ceiling(checks: &PoolChecks, field: &str, pool: &Pool) -> Result<(), FieldError> {
    let given: Vec<&str> = [
        ("maxAllocatable", pool.max_allocatable.is_some()),
        ("karpenterNodePool", pool.node_pool().is_some()),
        ("clusterAutoscaler", pool.cluster_autoscaler.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect();
    let Some(first) = given.first() else {
        return Ok(());
    };
    if let Some(second) = given.get(1) {
        return Err(FieldError::new(
            format!("{field}.{second}"),
            format!("the pool already has a ceiling in {field}.{first}; give one ceiling per pool"),
        ));
    }
    if pool.capacity.is_some() {
        return Err(FieldError::new(
            format!("{field}.{first}"),
            format!(
                "the pool declares its capacity in {field}.capacity, which is already what it is judged against; remove one of them (a ceiling is for pools whose GPUs are measured from their nodes)"
            ),
        ));
    }
    check_gpus(
        checks,
        &format!("{field}.maxAllocatable"),
        pool.max_allocatable.as_ref(),
        "give the most GPUs per resource the pool can grow to, e.g. {nvidia.com/gpu: 64}",
    )?;
    if let Some(name) = pool.node_pool() {
        validate_object_name(&format!("{field}.karpenterNodePool"), name, "NodePool")?;
    }
    if let Some(ca) = &pool.cluster_autoscaler {
        if ca.max_nodes == 0 {
            return Err(FieldError::new(
                format!("{field}.clusterAutoscaler.maxNodes"),
                "must be at least 1 (the most nodes the pool's node groups may have together)",
            ));
        }
        check_gpus(
            checks,
            &format!("{field}.clusterAutoscaler.gpusPerNode"),
            Some(&ca.gpus_per_node),
            "give the GPUs one node of the pool has, e.g. {nvidia.com/gpu: 8}",
        )?;
    }
    Ok(())
}

/// `thresholds`: each a threshold in 1..=100, its window once, naming a schedule (when
/// the policy has schedules).
fn check_thresholds(checks: &PoolChecks, field: &str, pool: &Pool) -> Result<(), FieldError> {
    for (k, t) in pool.thresholds.iter().enumerate() {
        let field = format!("{field}.thresholds[{k}]");
        if let Some(schedules) = checks.schedules {
            let defined: Vec<&str> = schedules.keys().map(String::as_str).collect();
            let valid = schedules.contains_key(&t.window);
            check_window_ref(&format!("{field}.window"), &t.window, valid, &defined)?;
        } else if t.window.trim().is_empty() {
            return Err(FieldError::new(
                format!("{field}.window"),
                "must name a schedule of the capacity gate",
            ));
        }
        check_percent(&format!("{field}.thresholdPercent"), t.threshold_percent)?;
        if pool.thresholds[..k].iter().any(|o| o.window == t.window) {
            return Err(FieldError::new(
                format!("{field}.window"),
                format!(
                    "'{}' is listed twice; the first entry whose window holds now wins, so the second would never apply",
                    t.window
                ),
            ));
        }
    }
    Ok(())
}

/// True when a node with (at least) `labels` would match `selector`. Requirements that
/// only exclude (`NotIn`, `DoesNotExist`) cannot be decided from a partial label set; a
/// selector made only of them is not taken as targeted (nothing positively asks for it).
fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let positive = !selector.match_labels.is_empty()
        || selector
            .match_expressions
            .iter()
            .any(|r| matches!(r.operator, Operator::In | Operator::Exists));
    positive && selector.matches(labels)
}
