//! Settings of the capacity gate, and their validation.

use crate::admission::ValidateSettings;
use crate::gpu::GpuResources;
use crate::selector::LabelSelector;
use crate::settings::{
    CustomKind, NamespaceList, validate_custom_kinds, validate_label_key, validate_label_value,
    validate_resource_names,
};
use serde::{Deserialize, Serialize};

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
    /// Pod templates with one of these `priorityClassName`s are not charged.
    pub exempt_priority_classes: Vec<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            pool_label_key: DEFAULT_POOL_LABEL_KEY.to_string(),
            pools: Vec::new(),
            charge_pods: ChargePods::default(),
            fail_open: false,
            extra_gpu_resources: Vec::new(),
            custom_kinds: Vec::new(),
            exempt_namespaces: NamespaceList::default(),
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
    /// How to find the pool's Nodes.
    pub node_selector: LabelSelector,
    /// Deny when allocated + incoming GPUs would exceed this percent of allocatable (1..=100).
    pub threshold_percent: u32,
}

impl Default for Pool {
    fn default() -> Self {
        Pool {
            name: String::new(),
            node_selector: LabelSelector::default(),
            threshold_percent: DEFAULT_THRESHOLD_PERCENT,
        }
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
        GpuResources::new(&self.extra_gpu_resources)
    }

    /// The pool named `name`, with its index.
    pub fn pool_named(&self, name: &str) -> Option<(usize, &Pool)> {
        self.pools.iter().enumerate().find(|(_, p)| p.name == name)
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
            if pool.node_selector.is_empty() {
                return Err(format!(
                    "{field}.nodeSelector: must select the pool's nodes (matchLabels or matchExpressions); an empty selector would count every node of the cluster"
                ));
            }
            pool.node_selector
                .validate(&format!("{field}.nodeSelector"))?;
            if let Some((j, _)) = self
                .pools
                .iter()
                .enumerate()
                .take(i)
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
        }
        validate_resource_names("extraGpuResources", &self.extra_gpu_resources)?;
        validate_custom_kinds("customKinds", &self.custom_kinds)?;
        self.exempt_namespaces.validate("exemptNamespaces")?;
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
