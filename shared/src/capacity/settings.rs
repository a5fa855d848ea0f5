//! Settings of the capacity gate, and their validation.

use crate::admission::ValidateSettings;
use crate::gpu::GpuResources;
use crate::selector::LabelSelector;
use crate::settings::{
    CustomKind, NamespaceList, validate_custom_kinds, validate_label_key, validate_label_value,
    validate_resource_names,
};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// The label the routing policy stamps on pod templates, naming their pool.
pub const DEFAULT_POOL_LABEL_KEY: &str = "gpu-admission/pool";

/// Percent of a pool's allocatable GPUs above which new work is denied.
pub const DEFAULT_THRESHOLD_PERCENT: u32 = 90;

/// Settings of gpu-capacity-gate-policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Settings {
    /// Pod label naming a workload's pool (also how the pool's Pods are listed).
    pub pool_label_key: String,
    /// The pools the gate measures. At least one.
    pub pools: Vec<Pool>,
    /// Where a pool's GPUs in use come from, unless the pool says otherwise.
    pub usage: Usage,
    /// Which Pods are charged when they are created (see [`ChargePods`]).
    pub charge_pods: ChargePods,
    /// Accept (with a warning) instead of deny when cluster state cannot be read.
    pub fail_open: bool,
    /// More GPU resource names (exact, or a prefix ending in `*`).
    pub extra_gpu_resources: Vec<String>,
    /// Where custom resources keep their pod templates.
    pub custom_kinds: Vec<CustomKind>,
    /// Namespaces whose workloads are never gated (exact, or a prefix ending in `*`).
    pub exempt_namespaces: NamespaceList,
    /// Exceptions with an owner and an end date ([`crate::exceptions`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exceptions: Vec<crate::exceptions::Exception>,
    /// The furthest ahead an exception may end, in days.
    pub max_exception_days: u32,
    /// Which Dynamic Resource Allocation device classes are GPUs.
    pub dra: crate::dra::DraSettings,
    /// Which fractional-GPU schedulers (KAI, HAMi) are recognized.
    pub fractional_gpus: crate::fractional::FractionalSettings,
    /// Pod templates with one of these `priorityClassName`s are not charged.
    pub exempt_priority_classes: Vec<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            pool_label_key: DEFAULT_POOL_LABEL_KEY.to_string(),
            pools: Vec::new(),
            usage: Usage::default(),
            charge_pods: ChargePods::default(),
            fail_open: false,
            extra_gpu_resources: Vec::new(),
            custom_kinds: Vec::new(),
            exempt_namespaces: NamespaceList::default(),
            exceptions: Vec::new(),
            max_exception_days: crate::exceptions::DEFAULT_MAX_DAYS,
            dra: Default::default(),
            fractional_gpus: Default::default(),
            exempt_priority_classes: Vec::new(),
        }
    }
}

/// One pool of GPU nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Pool {
    /// The pool's name: the value of the pool label on its pods.
    pub name: String,
    /// How to find the pool's Nodes (and which templates target it by node selector).
    /// Empty: the pool is targeted by its pool label only (then `capacity` is required).
    pub node_selector: LabelSelector,
    /// GPUs per resource name the pool has, declared instead of measured from its Nodes
    /// (the ceiling of an autoscaled pool). Values as written; [`Pool::declared_capacity`]
    /// reads them once settings are valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<BTreeMap<String, DeclaredGpus>>,
    /// Where the pool's GPUs in use come from; `None`: the gate's `usage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The PriorityClasses of the pool's pods, to which its ResourceQuotas are scoped
    /// (`usage: quotas` only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub priority_classes: Vec<String>,
    /// Deny when allocated + incoming GPUs would exceed this percent of allocatable (1..=100).
    pub threshold_percent: u32,
}

impl Default for Pool {
    fn default() -> Self {
        Pool {
            name: String::new(),
            node_selector: LabelSelector::default(),
            capacity: None,
            usage: None,
            priority_classes: Vec::new(),
            threshold_percent: DEFAULT_THRESHOLD_PERCENT,
        }
    }
}

/// Where a pool's GPUs in use come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Usage {
    /// The effective GPU requests of the pool's Pods (listed by the pool label): exact, but
    /// every decision reads every pod of the pool.
    #[default]
    Pods,
    /// The sum of `status.used["requests.<gpu>"]` of the pool's ResourceQuotas (listed by
    /// the pool label, one per namespace, scoped to the pool's PriorityClasses): one
    /// object per namespace, whatever the number of pods.
    Quotas,
}

impl Usage {
    pub fn as_str(self) -> &'static str {
        match self {
            Usage::Pods => "pods",
            Usage::Quotas => "quotas",
        }
    }
}

impl Pool {
    /// The declared capacity as counts (`None`: measured from the Nodes). Entries that are
    /// not whole numbers count as 0 (settings validation refuses them).
    pub fn declared_capacity(&self) -> Option<crate::gpu::GpuCounts> {
        self.capacity.as_ref().map(|declared| {
            declared
                .iter()
                .map(|(resource, n)| (resource.clone(), n.count().unwrap_or(0)))
                .collect()
        })
    }
}

/// A declared GPU count as written in settings: a number or a string (`512`, `"512"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct DeclaredGpus(pub String);

impl<'de> Deserialize<'de> for DeclaredGpus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        crate::podspec::QuantityText::deserialize(deserializer).map(|q| DeclaredGpus(q.0))
    }
}

impl DeclaredGpus {
    /// The count, when it is a whole, non-negative number.
    pub fn count(&self) -> Result<u64, crate::quantity::QuantityError> {
        crate::quantity::Quantity::parse_count(&self.0)
    }
}

/// Which Pods are charged when they are created.
///
/// Whatever the choice, a ReplicaSet, Job or other workload object created by a gated
/// controller (a Deployment, a CronJob, a configured custom kind) is not charged again:
/// its owner was charged for the same pods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ChargePods {
    /// Charge Pods unless their controller (ownerReference with `controller: true`) is
    /// a kind this policy gates. Pods of DaemonSets are charged (a DaemonSet is counted
    /// as one pod when it is admitted: its pod count is only known per node).
    #[default]
    Ownerless,
    /// Charge every Pod, including those controllers create. Strict: pods of an admitted
    /// Deployment can still be refused later (visible only in controller events).
    All,
    /// Never charge Pods: only workload objects are gated.
    None,
}

impl ChargePods {
    pub fn as_str(self) -> &'static str {
        match self {
            ChargePods::Ownerless => "ownerless",
            ChargePods::All => "all",
            ChargePods::None => "none",
        }
    }
}

impl Settings {
    /// The GPU resource names the gate accounts for.
    pub fn gpu_resources(&self) -> GpuResources {
        GpuResources::new(&self.extra_gpu_resources).with_fractional(&self.fractional_gpus)
    }

    /// The pool named `name`, with its index.
    pub fn pool_named(&self, name: &str) -> Option<(usize, &Pool)> {
        self.pools.iter().enumerate().find(|(_, p)| p.name == name)
    }

    /// Where `pool`'s GPUs in use come from.
    pub fn usage_of(&self, pool: &Pool) -> Usage {
        pool.usage.unwrap_or(self.usage)
    }
}

impl ValidateSettings for Settings {
    fn validate(&self) -> Result<(), String> {
        validate_label_key("poolLabelKey", &self.pool_label_key)?;
        if self.pools.is_empty() {
            return Err("pools: define at least one pool, e.g. {name: a100, nodeSelector: {matchLabels: {gpu-admission/pool: a100}}}; without pools the gate has nothing to measure".into());
        }
        for (i, pool) in self.pools.iter().enumerate() {
            let field = format!("pools[{i}]");
            if pool.name.is_empty() {
                return Err(format!(
                    "{field}.name: must not be empty; it is the value of the {} label on the pool's pods",
                    self.pool_label_key
                ));
            }
            validate_label_value(&format!("{field}.name"), &pool.name)?;
            if let Some((j, _)) = self.pool_named(&pool.name).filter(|(j, _)| *j != i) {
                return Err(format!(
                    "{field}.name: '{}' is already the name of pools[{j}]; pool names must be unique",
                    pool.name
                ));
            }
            if pool.node_selector.is_empty() && pool.capacity.is_none() {
                return Err(format!(
                    "{field}.nodeSelector: must select the pool's nodes (matchLabels or matchExpressions); an empty selector would count every node of the cluster. Or declare the pool's GPUs in {field}.capacity instead of measuring its nodes"
                ));
            }
            pool.node_selector
                .validate(&format!("{field}.nodeSelector"))?;
            if let Some((j, _)) = self
                .pools
                .iter()
                .enumerate()
                .take(i)
                .filter(|_| !pool.node_selector.is_empty())
                .find(|(_, other)| other.node_selector == pool.node_selector)
            {
                return Err(format!(
                    "{field}.nodeSelector: same as pools[{j}].nodeSelector; two pools cannot share their nodes"
                ));
            }
            if !(1..=100).contains(&pool.threshold_percent) {
                return Err(format!(
                    "{field}.thresholdPercent: must be between 1 and 100 (got {})",
                    pool.threshold_percent
                ));
            }
            self.validate_capacity(&field, pool)?;
            self.validate_priority_classes(i, &field, pool)?;
        }
        validate_resource_names("extraGpuResources", &self.extra_gpu_resources)?;
        validate_custom_kinds("customKinds", &self.custom_kinds)?;
        self.exempt_namespaces.validate("exemptNamespaces")?;
        crate::exceptions::Exceptions::check(
            &self.exceptions,
            self.max_exception_days,
            &RULE_NAMES,
            crate::clock::Clock::now(&crate::clock::SystemClock),
            "exceptions",
        )?;
        self.dra.validate("dra")?;
        self.fractional_gpus.validate("fractionalGpus")?;
        for (i, class) in self.exempt_priority_classes.iter().enumerate() {
            if !is_priority_class_name(class) {
                return Err(format!(
                    "exemptPriorityClasses[{i}]: '{class}' is not a PriorityClass name (lowercase letters, digits, '-' and '.')"
                ));
            }
        }
        Ok(())
    }
}

impl Settings {
    /// `capacity`: at least one entry, each a GPU resource the gate counts with a whole
    /// number of GPUs.
    fn validate_capacity(&self, field: &str, pool: &Pool) -> Result<(), String> {
        let Some(declared) = &pool.capacity else {
            return Ok(());
        };
        if declared.is_empty() {
            return Err(format!(
                "{field}.capacity: declare the pool's GPUs per resource, e.g. {{nvidia.com/gpu: 512}}, or remove capacity to measure them from the pool's nodes"
            ));
        }
        let names = self.gpu_resources();
        for (resource, value) in declared {
            if !names.is_gpu(resource) {
                return Err(format!(
                    "{field}.capacity.{resource}: not a GPU resource the gate counts ({}, nvidia.com/mig-*, or a name in extraGpuResources)",
                    crate::gpu::BUILTIN_GPU_RESOURCES.join(", ")
                ));
            }
            value.count().map_err(|e| {
                format!("{field}.capacity.{resource}: must be a whole number of GPUs ({e})")
            })?;
        }
        Ok(())
    }

    /// `priorityClasses`: required with `usage: quotas` (the scope of the pool's
    /// ResourceQuotas), meaningless without it, and never shared by two pools (a quota
    /// scoped to a shared class would count both pools' pods).
    fn validate_priority_classes(&self, i: usize, field: &str, pool: &Pool) -> Result<(), String> {
        let quotas = self.usage_of(pool) == Usage::Quotas;
        if !quotas {
            if !pool.priority_classes.is_empty() {
                return Err(format!(
                    "{field}.priorityClasses: only used with usage: quotas (the pool's usage is pods); remove it or set {field}.usage: quotas"
                ));
            }
            return Ok(());
        }
        if pool.priority_classes.is_empty() {
            return Err(format!(
                "{field}.priorityClasses: usage: quotas counts the pool's pods through ResourceQuotas scoped to the pool's PriorityClasses; list them (the classes gpu-pool-routing-policy gives the pool's workloads, e.g. [{}-high])",
                pool.name
            ));
        }
        for (k, class) in pool.priority_classes.iter().enumerate() {
            if !is_priority_class_name(class) {
                return Err(format!(
                    "{field}.priorityClasses[{k}]: '{class}' is not a PriorityClass name (lowercase letters, digits, '-' and '.')"
                ));
            }
            if pool.priority_classes[..k].contains(class) {
                return Err(format!(
                    "{field}.priorityClasses[{k}]: '{class}' is listed twice"
                ));
            }
            if let Some((j, _)) = self.pools[..i].iter().enumerate().find(|(_, other)| {
                self.usage_of(other) == Usage::Quotas && other.priority_classes.contains(class)
            }) {
                return Err(format!(
                    "{field}.priorityClasses[{k}]: '{class}' is also a class of pools[{j}]; a ResourceQuota scoped to it would count the pods of both pools"
                ));
            }
        }
        Ok(())
    }
}

/// A PriorityClass name is a DNS subdomain.
fn is_priority_class_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b.first().is_some_and(|c| c.is_ascii_alphanumeric())
                && b.last().is_some_and(|c| c.is_ascii_alphanumeric())
        })
}

/// The rule names `exceptions[].rules` may give.
pub const RULE_NAMES: [&str; 1] = ["capacity"];

impl crate::exceptions::HasExceptions for Settings {
    fn exceptions(&self) -> &[crate::exceptions::Exception] {
        &self.exceptions
    }
    fn max_exception_days(&self) -> u32 {
        self.max_exception_days
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn base() -> Value {
        json!({"pools": [
            {"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}}},
            {"name": "h100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "h100"}}, "thresholdPercent": 80}
        ]})
    }

    fn with(mut v: Value, pointer: &str, value: Value) -> Value {
        *v.pointer_mut(pointer).unwrap() = value;
        v
    }

    /// `base()` with a top-level field set.
    fn top(key: &str, value: Value) -> Value {
        let mut v = base();
        v[key] = value;
        v
    }

    fn parse(v: Value) -> Settings {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn defaults() {
        let s = parse(base());
        assert_eq!(s.pool_label_key, "gpu-admission/pool");
        assert_eq!(s.charge_pods, ChargePods::Ownerless);
        assert!(!s.fail_open);
        assert_eq!(s.pools[0].threshold_percent, 90);
        assert_eq!(s.pools[1].threshold_percent, 80);
        assert_eq!(s.pool_named("h100").map(|(i, _)| i), Some(1));
        s.validate().unwrap();
    }

    #[test]
    fn full_settings_are_valid() {
        let mut v = base();
        v["poolLabelKey"] = json!("example.com/pool");
        v["chargePods"] = json!("all");
        v["failOpen"] = json!(true);
        v["extraGpuResources"] = json!(["habana.ai/gaudi"]);
        v["customKinds"] = serde_json::to_value(crate::workload::presets::all()).unwrap();
        v["exemptNamespaces"] = json!(["gpu-operator", "ops-*"]);
        v["exemptPriorityClasses"] = json!(["system-node-critical"]);
        let s = parse(v);
        s.validate().unwrap();
        assert_eq!(s.charge_pods, ChargePods::All);
        assert!(s.gpu_resources().is_gpu("habana.ai/gaudi"));
    }

    #[rstest]
    #[case::no_pools(json!({}), "pools: define at least one pool")]
    #[case::bad_label_key(top("poolLabelKey", json!("bad key")), "poolLabelKey: 'bad key'")]
    #[case::empty_name(with(base(), "/pools/1/name", json!("")), "pools[1].name: must not be empty")]
    #[case::bad_name(with(base(), "/pools/1/name", json!("H 100")), "pools[1].name: 'H 100' is not a valid label value")]
    #[case::duplicate_name(with(base(), "/pools/1/name", json!("a100")), "pools[1].name: 'a100' is already the name of pools[0]")]
    #[case::empty_selector(with(base(), "/pools/1/nodeSelector", json!({})), "pools[1].nodeSelector: must select the pool's nodes")]
    #[case::bad_selector(with(base(), "/pools/0/nodeSelector", json!({"matchExpressions": [{"key": "k", "operator": "In"}]})), "pools[0].nodeSelector.matchExpressions[0].values")]
    #[case::shared_selector(with(base(), "/pools/1/nodeSelector", json!({"matchLabels": {"gpu-admission/pool": "a100"}})), "pools[1].nodeSelector: same as pools[0].nodeSelector")]
    #[case::threshold_zero(with(base(), "/pools/1/thresholdPercent", json!(0)), "pools[1].thresholdPercent: must be between 1 and 100 (got 0)")]
    #[case::threshold_high(with(base(), "/pools/1/thresholdPercent", json!(101)), "pools[1].thresholdPercent: must be between 1 and 100 (got 101)")]
    #[case::bad_resource(top("extraGpuResources", json!(["gpu"])), "extraGpuResources[0]:")]
    #[case::namespaces(top("exemptNamespaces", json!(["*"])), "exemptNamespaces[0]:")]
    #[case::priority_class(top("exemptPriorityClasses", json!(["ok", "Not_OK"])), "exemptPriorityClasses[1]: 'Not_OK'")]
    #[case::custom_kind(top("customKinds", json!([{"group": "", "kind": "X", "templates": []}])), "customKinds[0].group")]
    fn invalid_settings_name_the_field(#[case] settings: Value, #[case] start: &str) {
        let err = parse(settings).validate().unwrap_err();
        assert!(err.starts_with(start), "{err}");
    }

    /// `v` with field `key` of pools[i] set (added when absent).
    fn pool_field(mut v: Value, i: usize, key: &str, value: Value) -> Value {
        v["pools"][i][key] = value;
        v
    }

    /// Pool a100 from ResourceQuotas with declared capacity; h100 as `base()` says.
    fn quotas() -> Value {
        let mut v = base();
        v["pools"][0]["usage"] = json!("quotas");
        v["pools"][0]["priorityClasses"] = json!(["a100-high", "a100-low"]);
        v["pools"][0]["capacity"] = json!({"nvidia.com/gpu": 512, "nvidia.com/mig-1g.10gb": "28"});
        v
    }

    #[test]
    fn quota_usage_and_declared_capacity_are_valid() {
        let s = parse(quotas());
        s.validate().unwrap();
        assert_eq!(s.usage, Usage::Pods);
        assert_eq!(s.usage_of(&s.pools[0]), Usage::Quotas);
        assert_eq!(s.usage_of(&s.pools[1]), Usage::Pods);
        assert_eq!(
            s.pools[0].declared_capacity(),
            Some(crate::gpu::GpuCounts::from([
                ("nvidia.com/gpu".to_string(), 512),
                ("nvidia.com/mig-1g.10gb".to_string(), 28)
            ]))
        );
        assert_eq!(s.pools[1].declared_capacity(), None);
        // Declared capacity needs no node selector; pools without one share none.
        let mut v = quotas();
        v["pools"][0]["nodeSelector"] = json!({});
        v["pools"][1]["nodeSelector"] = json!({});
        v["pools"][1]["capacity"] = json!({"nvidia.com/gpu": 8});
        parse(v).validate().unwrap();
        // The gate's default applies to every pool that does not say.
        let mut v = quotas();
        v["usage"] = json!("quotas");
        v["pools"][1]["priorityClasses"] = json!(["h100"]);
        let s = parse(v);
        s.validate().unwrap();
        assert_eq!(s.usage_of(&s.pools[1]), Usage::Quotas);
    }

    #[rstest]
    #[case::empty(with(quotas(), "/pools/0/capacity", json!({})), "pools[0].capacity: declare the pool's GPUs per resource")]
    #[case::not_gpu(with(quotas(), "/pools/0/capacity", json!({"cpu": 64})), "pools[0].capacity.cpu: not a GPU resource the gate counts (nvidia.com/gpu, nvidia.com/gpu.shared, amd.com/gpu, gpu.intel.com/i915, gpu.intel.com/xe, nvidia.com/mig-*, or a name in extraGpuResources)")]
    #[case::fraction(with(quotas(), "/pools/0/capacity", json!({"nvidia.com/gpu": 1.5})), "pools[0].capacity.nvidia.com/gpu: must be a whole number of GPUs ('1.5' must be a whole number)")]
    #[case::fraction_text(with(quotas(), "/pools/0/capacity", json!({"nvidia.com/gpu": "500m"})), "pools[0].capacity.nvidia.com/gpu: must be a whole number of GPUs ('500m' must be a whole number)")]
    #[case::negative(with(quotas(), "/pools/0/capacity", json!({"nvidia.com/gpu": -8})), "pools[0].capacity.nvidia.com/gpu: must be a whole number of GPUs ('-8' must not be negative)")]
    #[case::not_a_quantity(with(quotas(), "/pools/0/capacity", json!({"nvidia.com/gpu": "many"})), "pools[0].capacity.nvidia.com/gpu: must be a whole number of GPUs ('many' is not a Kubernetes quantity")]
    #[case::neither_nodes_nor_capacity(with(base(), "/pools/1/nodeSelector", json!({})), "pools[1].nodeSelector: must select the pool's nodes (matchLabels or matchExpressions); an empty selector would count every node of the cluster. Or declare the pool's GPUs in pools[1].capacity instead of measuring its nodes")]
    #[case::no_classes(with(quotas(), "/pools/0/priorityClasses", json!([])), "pools[0].priorityClasses: usage: quotas counts the pool's pods through ResourceQuotas scoped to the pool's PriorityClasses; list them")]
    #[case::classes_without_quotas(pool_field(base(), 1, "priorityClasses", json!(["h100"])), "pools[1].priorityClasses: only used with usage: quotas (the pool's usage is pods); remove it or set pools[1].usage: quotas")]
    #[case::bad_class(with(quotas(), "/pools/0/priorityClasses", json!(["A100"])), "pools[0].priorityClasses[0]: 'A100' is not a PriorityClass name")]
    #[case::class_twice(with(quotas(), "/pools/0/priorityClasses", json!(["a", "a"])), "pools[0].priorityClasses[1]: 'a' is listed twice")]
    #[case::shared_class(pool_field(pool_field(quotas(), 1, "usage", json!("quotas")), 1, "priorityClasses", json!(["h100", "a100-low"])), "pools[1].priorityClasses[1]: 'a100-low' is also a class of pools[0]; a ResourceQuota scoped to it would count the pods of both pools")]
    fn invalid_quota_settings_name_the_field(#[case] settings: Value, #[case] start: &str) {
        let err = parse(settings).validate().unwrap_err();
        assert!(err.starts_with(start), "{err}");
    }

    #[test]
    fn extra_gpu_resources_may_be_declared() {
        let mut v = top("extraGpuResources", json!(["habana.ai/gaudi"]));
        v["pools"][0]["capacity"] = json!({"habana.ai/gaudi": 16});
        parse(v).validate().unwrap();
    }

    #[rstest]
    #[case::unknown_usage(json!({"usage": "nodes"}))]
    #[case::unknown_pool_usage(json!({"pools": [{"name": "a", "usage": "quota"}]}))]
    #[case::capacity_not_a_map(json!({"pools": [{"name": "a", "capacity": 512}]}))]
    #[case::capacity_not_a_number(json!({"pools": [{"name": "a", "capacity": {"nvidia.com/gpu": true}}]}))]
    fn malformed_quota_settings_do_not_parse(#[case] settings: Value) {
        assert!(serde_json::from_value::<Settings>(settings).is_err());
    }

    #[rstest]
    #[case::unknown_field(json!({"pool": []}))]
    #[case::unknown_pool_field(json!({"pools": [{"name": "a", "selector": {}}]}))]
    #[case::unknown_charge_pods(json!({"chargePods": "some"}))]
    #[case::fractional_threshold(json!({"pools": [{"name": "a", "thresholdPercent": 90.5}]}))]
    #[case::negative_threshold(json!({"pools": [{"name": "a", "thresholdPercent": -1}]}))]
    fn malformed_settings_do_not_parse(#[case] settings: Value) {
        assert!(serde_json::from_value::<Settings>(settings).is_err());
    }
}
