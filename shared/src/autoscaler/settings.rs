//! Settings of the autoscaler policy, and their validation.
//!
//! `poolLabelKey` and `pools` are the capacity gate's own format (see
//! [`crate::capacity::Settings`]), so the gate's pool list can be pasted here unchanged:
//! a pool is found by the pool label on the target's pod template or by its node
//! selector, and its ceiling is its declared `capacity`, or else the allocatable GPUs of
//! its Nodes. The gate's other pool fields (`thresholdPercent`, `usage`,
//! `priorityClasses`) are accepted and checked, and not used: an autoscaler's bound is
//! what the pool can hold at all; the gate brakes at its threshold when the scale-up
//! happens.

use crate::admission::ValidateSettings;
use crate::gpu::{BUILTIN_GPU_RESOURCES, GpuCounts, GpuResources};
use crate::selector::LabelSelector;
use crate::settings::{
    CustomKind, NamespaceList, validate_custom_kinds, validate_label_key, validate_label_value,
    validate_resource_names,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

pub use crate::settings::DEFAULT_POOL_LABEL_KEY;

/// Settings of gpu-autoscaler-policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Settings {
    /// Pod label naming a workload's pool.
    pub pool_label_key: String,
    /// The pools whose ceiling bounds an autoscaler (the capacity gate's format).
    pub pools: Vec<Pool>,
    /// The most GPUs one autoscaler may scale its target to, per namespace.
    pub namespace_max_gpus: Vec<NamespaceMax>,
    /// The same bound for namespaces no entry of `namespaceMaxGpus` lists (`None`: none).
    pub default_max_gpus: Option<u64>,
    /// A HorizontalPodAutoscaler of a GPU target that scales on cpu or memory only.
    pub resource_metrics_only: Action,
    /// A KEDA ScaledObject or ScaledJob of a GPU target whose triggers are cpu or memory only.
    pub resource_triggers_only: Action,
    /// Accept (with a warning) instead of deny when the target or the pool cannot be read.
    pub fail_open: bool,
    /// More GPU resource names (exact, or a prefix ending in `*`).
    pub extra_gpu_resources: Vec<String>,
    /// Where custom resources keep their pod templates (targets of other kinds).
    pub custom_kinds: Vec<CustomKind>,
    /// Namespaces whose autoscalers are not checked (exact, or a prefix ending in `*`).
    pub exempt_namespaces: NamespaceList,
    /// Which Dynamic Resource Allocation device classes are GPUs.
    pub dra: crate::dra::DraSettings,
    /// Which fractional-GPU schedulers (KAI, HAMi) are recognized.
    pub fractional_gpus: crate::fractional::FractionalSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            pool_label_key: DEFAULT_POOL_LABEL_KEY.to_string(),
            pools: Vec::new(),
            namespace_max_gpus: Vec::new(),
            default_max_gpus: None,
            resource_metrics_only: Action::Deny,
            resource_triggers_only: Action::Warn,
            fail_open: false,
            extra_gpu_resources: Vec::new(),
            custom_kinds: Vec::new(),
            exempt_namespaces: NamespaceList::default(),
            dra: Default::default(),
            fractional_gpus: Default::default(),
        }
    }
}

/// What to do about a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    /// Reject the autoscaler.
    Deny,
    /// Accept it with a warning to the client.
    Warn,
    /// Accept it silently.
    Allow,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Deny => "deny",
            Action::Warn => "warn",
            Action::Allow => "allow",
        }
    }
}

/// One pool of GPU nodes, as the capacity gate's settings describe it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Pool {
    /// The pool's name: the value of the pool label on its pods.
    pub name: String,
    /// How to find the pool's Nodes (and which templates target it by node selector).
    /// Empty: the pool is targeted by its pool label only (then `capacity` is required).
    pub node_selector: LabelSelector,
    /// The pool's ceiling per GPU resource, declared (the most an autoscaled pool grows
    /// to); without it, the allocatable GPUs of the pool's Nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<BTreeMap<String, Value>>,
    /// The capacity gate's threshold (accepted and checked; not used here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold_percent: Option<u32>,
    /// The capacity gate's source of GPUs in use (accepted and checked; not used here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<GateUsage>,
    /// The capacity gate's PriorityClasses of the pool (accepted; not used here).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub priority_classes: Vec<String>,
    /// The capacity gate's thresholds by window, growth ceilings (`maxAllocatable`,
    /// `karpenterNodePool`, `clusterAutoscaler`) and alternatives: accepted, so the gate's
    /// pools can be copied here as they are, and checked by the gate; not used here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_allocatable: Option<BTreeMap<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub karpenter_node_pool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_autoscaler: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<String>,
}

/// The capacity gate's `usage` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum GateUsage {
    Pods,
    Quotas,
}

impl Pool {
    /// The declared ceiling as counts (`None`: measured from the Nodes). Entries that are
    /// not whole numbers count as 0 (settings validation refuses them).
    pub fn declared_capacity(&self) -> Option<GpuCounts> {
        self.capacity.as_ref().map(|declared| {
            declared
                .iter()
                .map(|(resource, value)| (resource.clone(), whole_gpus(value).unwrap_or(0)))
                .collect()
        })
    }

    /// The pool as the capacity gate's rules take it (name and node selector), to target
    /// pools and to list Nodes with the gate's very query.
    pub fn as_gate_pool(&self) -> crate::capacity::Pool {
        crate::capacity::Pool {
            name: self.name.clone(),
            node_selector: self.node_selector.clone(),
            ..crate::capacity::Pool::default()
        }
    }
}

/// A declared GPU count: a non-negative integer, or a string holding a whole quantity.
fn whole_gpus(value: &Value) -> Result<u64, String> {
    match value {
        Value::Number(n) => n.as_u64().ok_or_else(|| format!("got {n}")),
        Value::String(s) => crate::quantity::Quantity::parse_count(s).map_err(|e| e.to_string()),
        other => Err(format!("got {other}")),
    }
}

/// The most GPUs one autoscaler in these namespaces may scale its target to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct NamespaceMax {
    /// Namespace names, exact or a prefix ending in `*`.
    pub namespaces: NamespaceList,
    /// GPUs of every resource name together (a MIG slice or a time-sliced replica is one).
    pub max_gpus: u64,
}

impl Settings {
    /// The GPU resource names the policy counts.
    pub fn gpu_resources(&self) -> GpuResources {
        GpuResources::new(&self.extra_gpu_resources).with_fractional(&self.fractional_gpus)
    }

    /// The pools in the capacity gate's settings type, to reuse its pool targeting.
    pub fn gate_settings(&self) -> crate::capacity::Settings {
        crate::capacity::Settings {
            pool_label_key: self.pool_label_key.clone(),
            pools: self.pools.iter().map(Pool::as_gate_pool).collect(),
            extra_gpu_resources: self.extra_gpu_resources.clone(),
            custom_kinds: self.custom_kinds.clone(),
            ..crate::capacity::Settings::default()
        }
    }

    /// The GPU bound of one autoscaler in `namespace`, and where it comes from: the first
    /// entry of `namespaceMaxGpus` listing the namespace, else `defaultMaxGpus`.
    pub fn namespace_max(&self, namespace: &str) -> Option<(u64, String)> {
        self.namespace_max_gpus
            .iter()
            .enumerate()
            .find(|(_, m)| m.namespaces.contains(namespace))
            .map(|(i, m)| (m.max_gpus, format!("namespaceMaxGpus[{i}]")))
            .or_else(|| {
                self.default_max_gpus
                    .map(|n| (n, "defaultMaxGpus".to_string()))
            })
    }
}

impl ValidateSettings for Settings {
    fn validate(&self) -> Result<(), String> {
        validate_label_key("poolLabelKey", &self.pool_label_key)?;
        validate_resource_names("extraGpuResources", &self.extra_gpu_resources)?;
        for (i, pool) in self.pools.iter().enumerate() {
            self.validate_pool(i, pool)?;
        }
        for (i, m) in self.namespace_max_gpus.iter().enumerate() {
            let field = format!("namespaceMaxGpus[{i}]");
            if m.namespaces.0.is_empty() {
                return Err(format!(
                    "{field}.namespaces: list the namespaces this maximum applies to (exact names, or a prefix ending in *); defaultMaxGpus covers the others"
                ));
            }
            m.namespaces.validate(&format!("{field}.namespaces"))?;
            if m.max_gpus == 0 {
                return Err(format!(
                    "{field}.maxGpus: must be at least 1 (an autoscaler of a GPU workload needs at least one replica's GPUs)"
                ));
            }
        }
        if self.default_max_gpus == Some(0) {
            return Err("defaultMaxGpus: must be at least 1, or left out for no default".into());
        }
        validate_custom_kinds("customKinds", &self.custom_kinds)?;
        self.exempt_namespaces.validate("exemptNamespaces")?;
        self.dra.validate("dra")?;
        self.fractional_gpus.validate("fractionalGpus")?;
        Ok(())
    }
}

impl Settings {
    fn validate_pool(&self, i: usize, pool: &Pool) -> Result<(), String> {
        let field = format!("pools[{i}]");
        if pool.name.is_empty() {
            return Err(format!(
                "{field}.name: must not be empty; it is the value of the {} label on the pool's pods",
                self.pool_label_key
            ));
        }
        validate_label_value(&format!("{field}.name"), &pool.name)?;
        if let Some(j) = self.pools[..i].iter().position(|p| p.name == pool.name) {
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
        if !pool.node_selector.is_empty()
            && let Some(j) = self.pools[..i]
                .iter()
                .position(|p| p.node_selector == pool.node_selector)
        {
            return Err(format!(
                "{field}.nodeSelector: same as pools[{j}].nodeSelector; two pools cannot share their nodes"
            ));
        }
        if let Some(t) = pool.threshold_percent.filter(|t| !(1..=100).contains(t)) {
            return Err(format!(
                "{field}.thresholdPercent: must be between 1 and 100 (got {t})"
            ));
        }
        if let Some(declared) = &pool.capacity {
            if declared.is_empty() {
                return Err(format!(
                    "{field}.capacity: declare the pool's GPUs per resource, e.g. {{nvidia.com/gpu: 512}}, or remove capacity to measure them from the pool's nodes"
                ));
            }
            let names = self.gpu_resources();
            for (resource, value) in declared {
                if !names.is_gpu(resource) {
                    return Err(format!(
                        "{field}.capacity.{resource}: not a GPU resource the policy counts ({}, nvidia.com/mig-*, or a name in extraGpuResources)",
                        BUILTIN_GPU_RESOURCES.join(", ")
                    ));
                }
                whole_gpus(value).map_err(|e| {
                    format!("{field}.capacity.{resource}: must be a whole number of GPUs ({e})")
                })?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn base() -> Value {
        json!({"pools": [
            {"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}}},
            {"name": "h100-burst", "capacity": {"nvidia.com/gpu": 128}}
        ]})
    }

    fn with(mut v: Value, pointer: &str, value: Value) -> Value {
        match v.pointer_mut(pointer) {
            Some(slot) => *slot = value,
            None => {
                let (parent, key) = pointer.rsplit_once('/').unwrap();
                v.pointer_mut(parent).unwrap()[key] = value;
            }
        }
        v
    }

    fn parse(v: Value) -> Settings {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn defaults() {
        let s = parse(json!({}));
        assert_eq!(s.pool_label_key, "gpu-admission/pool");
        assert_eq!(s.resource_metrics_only, Action::Deny);
        assert_eq!(s.resource_triggers_only, Action::Warn);
        assert!(!s.fail_open && s.pools.is_empty() && s.namespace_max("ml").is_none());
        s.validate().unwrap();
        parse(base()).validate().unwrap();
    }

    #[test]
    fn the_capacity_gates_pools_are_valid_pools() {
        // Every field of the gate's pool format, as the gate's own settings carry it.
        let s = parse(json!({"pools": [
            {"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}}, "thresholdPercent": 90},
            {"name": "l4", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "l4"},
              "matchExpressions": [{"key": "nvidia.com/gpu.sharing-strategy", "operator": "In", "values": ["time-slicing"]}]},
             "usage": "quotas", "priorityClasses": ["l4-high"]},
            {"name": "h100", "capacity": {"nvidia.com/gpu": "64", "nvidia.com/mig-1g.10gb": 56}}
        ]}));
        s.validate().unwrap();
        assert_eq!(
            s.pools[2].declared_capacity(),
            Some(GpuCounts::from([
                ("nvidia.com/gpu".to_string(), 64),
                ("nvidia.com/mig-1g.10gb".to_string(), 56)
            ]))
        );
        assert_eq!(s.pools[0].declared_capacity(), None);
        let gate = s.gate_settings();
        assert_eq!(gate.pools.len(), 3);
        assert_eq!(gate.pools[1].node_selector, s.pools[1].node_selector);
    }

    #[test]
    fn namespace_maximum_first_match_then_default() {
        let s = parse(json!({
            "namespaceMaxGpus": [
                {"namespaces": ["ml-serving"], "maxGpus": 64},
                {"namespaces": ["research-*", "ml-serving"], "maxGpus": 16}
            ],
            "defaultMaxGpus": 8
        }));
        s.validate().unwrap();
        assert_eq!(
            s.namespace_max("ml-serving"),
            Some((64, "namespaceMaxGpus[0]".into()))
        );
        assert_eq!(
            s.namespace_max("research-nlp"),
            Some((16, "namespaceMaxGpus[1]".into()))
        );
        assert_eq!(s.namespace_max("web"), Some((8, "defaultMaxGpus".into())));
    }

    #[rstest]
    #[case::bad_label_key(with(base(), "/poolLabelKey", json!("bad key")), "poolLabelKey: 'bad key'")]
    #[case::empty_name(with(base(), "/pools/1/name", json!("")), "pools[1].name: must not be empty")]
    #[case::bad_name(with(base(), "/pools/0/name", json!("A 100")), "pools[0].name: 'A 100' is not a valid label value")]
    #[case::duplicate_name(with(base(), "/pools/1/name", json!("a100")), "pools[1].name: 'a100' is already the name of pools[0]")]
    #[case::no_nodes_no_capacity(with(base(), "/pools/0/nodeSelector", json!({})), "pools[0].nodeSelector: must select the pool's nodes")]
    #[case::shared_selector(with(base(), "/pools/1/nodeSelector", json!({"matchLabels": {"gpu-admission/pool": "a100"}})), "pools[1].nodeSelector: same as pools[0].nodeSelector")]
    #[case::bad_selector(with(base(), "/pools/0/nodeSelector", json!({"matchExpressions": [{"key": "k", "operator": "In"}]})), "pools[0].nodeSelector.matchExpressions[0].values")]
    #[case::threshold(with(base(), "/pools/0/thresholdPercent", json!(0)), "pools[0].thresholdPercent: must be between 1 and 100 (got 0)")]
    #[case::empty_capacity(with(base(), "/pools/1/capacity", json!({})), "pools[1].capacity: declare the pool's GPUs")]
    #[case::capacity_not_gpu(with(base(), "/pools/1/capacity", json!({"cpu": 8})), "pools[1].capacity.cpu: not a GPU resource")]
    #[case::capacity_fraction(with(base(), "/pools/1/capacity", json!({"nvidia.com/gpu": "1.5"})), "pools[1].capacity.nvidia.com/gpu: must be a whole number of GPUs")]
    #[case::capacity_negative(with(base(), "/pools/1/capacity", json!({"nvidia.com/gpu": -4})), "pools[1].capacity.nvidia.com/gpu: must be a whole number of GPUs (got -4)")]
    #[case::namespace_max_empty(with(base(), "/namespaceMaxGpus", json!([{"namespaces": [], "maxGpus": 8}])), "namespaceMaxGpus[0].namespaces: list the namespaces")]
    #[case::namespace_max_bad(with(base(), "/namespaceMaxGpus", json!([{"namespaces": ["ML"], "maxGpus": 8}])), "namespaceMaxGpus[0].namespaces[0]: 'ML' is not a namespace name")]
    #[case::namespace_max_zero(with(base(), "/namespaceMaxGpus", json!([{"namespaces": ["ml"], "maxGpus": 0}])), "namespaceMaxGpus[0].maxGpus: must be at least 1")]
    #[case::default_zero(with(base(), "/defaultMaxGpus", json!(0)), "defaultMaxGpus: must be at least 1")]
    #[case::extra(with(base(), "/extraGpuResources", json!(["gpu"])), "extraGpuResources[0]:")]
    #[case::custom_kind(with(base(), "/customKinds", json!([{"group": "", "kind": "X", "templates": []}])), "customKinds[0].group")]
    #[case::exempt(with(base(), "/exemptNamespaces", json!(["*"])), "exemptNamespaces[0]:")]
    fn invalid_settings_name_the_field(#[case] settings: Value, #[case] start: &str) {
        let err = parse(settings).validate().unwrap_err();
        assert!(err.starts_with(start), "{err}");
    }

    #[rstest]
    #[case::unknown_field(json!({"pool": []}))]
    #[case::unknown_pool_field(json!({"pools": [{"name": "a", "selector": {}}]}))]
    #[case::action_case(json!({"resourceMetricsOnly": "Deny"}))]
    #[case::action_unknown(json!({"resourceTriggersOnly": "ignore"}))]
    #[case::usage_unknown(json!({"pools": [{"name": "a", "usage": "nodes"}]}))]
    #[case::max_negative(json!({"defaultMaxGpus": -1}))]
    #[case::namespace_max_unknown(json!({"namespaceMaxGpus": [{"namespace": ["ml"], "maxGpus": 1}]}))]
    fn malformed_settings_do_not_parse(#[case] settings: Value) {
        assert!(serde_json::from_value::<Settings>(settings).is_err());
    }
}
