//! Settings of the autoscaler policy, their validation, and the form its rules take
//! ([`Checked`]).
//!
//! `poolLabelKey` and `pools` are the pool set of [`crate::pools`], the capacity gate's
//! too: one `pools` block means the same thing to both policies. A pool is found by the
//! pool label on the target's pod template or by its node selector, and what it can ever
//! hold is the larger of what it offers now (its declared `capacity`, or its Nodes'
//! allocatable GPUs) and its ceiling (`maxAllocatable`, `karpenterNodePool`,
//! `clusterAutoscaler`). The pools are checked as the gate checks them
//! ([`crate::pools::PoolSet::check`]), but for what refers to the gate's own settings:
//! `thresholds[].window` (the gate's `schedules`) and `priorityClasses` against `usage`
//! (the gate's default) are checked for their form only, and so are `reserve`,
//! `reserveWindows` and `headroom`. `thresholdPercent`, `thresholds`, `usage`,
//! `priorityClasses`, `alternatives`, the reserves and the headroom are not used here: an
//! autoscaler's bound is what the pool can hold at all; the gate brakes at its threshold
//! (less what the reserves in force keep from the workload's type, and the headroom) when
//! the scale-up happens.

use crate::pools::{CheckedPool, PoolChecks, PoolForm, PoolSet};
use crate::settings::{
    CheckedForm, FieldError, NamespaceList, UnreadableCluster, ValidateSettings, policy_settings,
};
use serde::{Deserialize, Serialize};

pub use crate::pools::Pool;
pub use crate::settings::{Action, DEFAULT_POOL_LABEL_KEY};

policy_settings! {
    /// Settings of gpu-autoscaler-policy.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Settings {
        @pools(Pool);
        /// The most GPUs one autoscaler may scale its target to, per namespace.
        pub namespace_max_gpus: Vec<NamespaceMax> = Vec::new(),
        /// The same bound for namespaces no entry of `namespaceMaxGpus` lists (`None`: none).
        pub default_max_gpus: Option<u64> = None,
        /// A HorizontalPodAutoscaler of a GPU target that scales on cpu or memory only.
        pub resource_metrics_only: Action = Action::Deny,
        /// A KEDA ScaledObject or ScaledJob of a GPU target whose triggers are cpu or memory only.
        pub resource_triggers_only: Action = Action::Warn,
        /// What to do when the target or a pool cannot be read: `deny` (fail closed, naming
        /// what to grant or create) or `warn` (accept with that warning). Read through
        /// [`Settings::on_unreadable_cluster`], which folds in `failOpen`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub unreadable_cluster: Option<Action> = None,
        /// The old spelling of `unreadableCluster`: `true` reads as `warn`, `false` as `deny`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub fail_open: Option<bool> = None,
        @shared;
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
    /// The pool label and the pools.
    pub fn pool_set(&self) -> PoolSet<'_> {
        PoolSet {
            label_key: &self.pool_label_key,
            pools: &self.pools,
        }
    }

    /// What to do when the target or a pool cannot be read (`unreadableCluster`, or its
    /// old spelling `failOpen`): `warn` or `deny`.
    pub fn on_unreadable_cluster(&self) -> Action {
        UnreadableCluster::of(self.unreadable_cluster, self.fail_open).action()
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

/// The autoscaler policy's settings in the form its rules take: the settings as written
/// (through `Deref`) and each pool's [`PoolForm`] (declared GPUs and settings ceilings as
/// counts, the node selector as a query). A request parses none of them again.
#[derive(Debug, Clone)]
pub struct Checked {
    settings: Box<Settings>,
    /// One form per pool, in the order of `pools`.
    forms: Vec<PoolForm>,
}

impl CheckedForm<Settings> for Checked {
    /// The pools' forms, without the checks.
    fn prepare(settings: Box<Settings>) -> Result<Box<Checked>, FieldError> {
        let forms = settings.pools.iter().map(PoolForm::new).collect();
        Ok(Box::new(Checked { settings, forms }))
    }
}

impl Checked {
    /// The `i`th pool, in the form the rules take.
    pub fn pool(&self, i: usize) -> Option<CheckedPool<'_>> {
        CheckedPool::at(&self.settings.pools, &self.forms, i)
    }
}

crate::settings::holds_settings!(Checked => Settings);

impl ValidateSettings for Settings {
    fn validate(&self) -> Result<(), FieldError> {
        self.validate_shared()?;
        self.pool_set().check(&PoolChecks {
            names: self.gpu_resources(),
            default_usage: None,
            schedules: None,
        })?;
        for (i, pool) in self.pools.iter().enumerate() {
            crate::pools::reserve::check_form(&format!("pools[{i}]"), pool)?;
        }
        for (i, m) in self.namespace_max_gpus.iter().enumerate() {
            let field = format!("namespaceMaxGpus[{i}]");
            if m.namespaces.0.is_empty() {
                return Err(FieldError::new(
                    format!("{field}.namespaces"),
                    "list the namespaces this maximum applies to (exact names, or a prefix ending in *); defaultMaxGpus covers the others",
                ));
            }
            m.namespaces.validate(&format!("{field}.namespaces"))?;
            if m.max_gpus == 0 {
                return Err(FieldError::new(
                    format!("{field}.maxGpus"),
                    "must be at least 1 (an autoscaler of a GPU workload needs at least one replica's GPUs)",
                ));
            }
        }
        UnreadableCluster::of(self.unreadable_cluster, self.fail_open).check()?;
        if self.default_max_gpus == Some(0) {
            return Err(FieldError::new(
                "defaultMaxGpus",
                "must be at least 1, or left out for no default",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuCounts;
    use rstest::rstest;
    use serde_json::{Value, json};

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
        assert_eq!(s.on_unreadable_cluster(), Action::Deny);
        assert!(s.pools.is_empty() && s.namespace_max("ml").is_none());
        s.validate().unwrap();
        parse(base()).validate().unwrap();
    }

    #[test]
    fn unreadable_cluster_or_its_old_spelling_fail_open() {
        for (field, value, action) in [
            ("/unreadableCluster", json!("warn"), Action::Warn),
            ("/unreadableCluster", json!("deny"), Action::Deny),
            ("/failOpen", json!(true), Action::Warn),
            ("/failOpen", json!(false), Action::Deny),
        ] {
            let s = parse(with(base(), field, value));
            s.validate().unwrap();
            assert_eq!(s.on_unreadable_cluster(), action, "{field}");
        }
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
    }

    /// The capacity gate's settings, their pools pasted: every pool field is valid here, and
    /// a pool the gate refuses is refused with the same message.
    #[test]
    fn a_pools_block_is_checked_as_the_gate_checks_it() {
        let pools = json!([
            {"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}},
             "maxAllocatable": {"nvidia.com/gpu": 64}, "alternatives": ["batch"],
             "thresholds": [{"window": "peak", "thresholdPercent": 80}],
             "reserve": {"interactive": 8}, "headroom": "5%",
             "reserveWindows": [{"window": "peak", "reserve": {"interactive": "25%"}}]},
            {"name": "h100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "h100"}},
             "karpenterNodePool": "h100-spot"},
            {"name": "batch", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "batch"}},
             "clusterAutoscaler": {"maxNodes": 16, "gpusPerNode": {"nvidia.com/gpu": 8}}}
        ]);
        let gate = |pools: &Value| -> crate::capacity::Settings {
            serde_json::from_value(
                json!({"pools": pools, "schedules": {"peak": {"timeZone": "UTC",
                "windows": [{"days": ["Mon"], "from": "08:00", "to": "20:00"}]}}}),
            )
            .unwrap()
        };
        let own = |pools: &Value| parse(json!({"pools": pools}));
        gate(&pools).validate().unwrap();
        own(&pools).validate().unwrap();
        for (pointer, value) in [
            ("/1/maxAllocatable", json!({"nvidia.com/gpu": 8})),
            ("/0/capacity", json!({"nvidia.com/gpu": 8})),
            ("/2/clusterAutoscaler/maxNodes", json!(0)),
            ("/0/maxAllocatable", json!({"cpu": 64})),
            ("/0/alternatives", json!(["spot"])),
            ("/0/thresholds/0/thresholdPercent", json!(0)),
            ("/1/karpenterNodePool", json!("H100 Spot")),
            ("/0/reserve/interactive", json!("lots")),
            ("/0/reserve", json!({"inter active": 4})),
            ("/0/headroom", json!(0)),
            ("/0/headroom", json!("95%")),
            ("/0/reserve", json!({"interactive": "96%"})),
            (
                "/0/reserveWindows/0/reserve",
                json!({"interactive": "60%", "serving": "50%"}),
            ),
        ] {
            let wrong = with(pools.clone(), pointer, value);
            let gate_error = gate(&wrong).validate().unwrap_err().to_string();
            let own_error = own(&wrong).validate().unwrap_err().to_string();
            assert_eq!(own_error, gate_error, "{pointer}");
        }
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
    #[case::capacity_negative(with(base(), "/pools/1/capacity", json!({"nvidia.com/gpu": -4})), "pools[1].capacity.nvidia.com/gpu: must be a whole number of GPUs ('-4' must not be negative)")]
    #[case::namespace_max_empty(with(base(), "/namespaceMaxGpus", json!([{"namespaces": [], "maxGpus": 8}])), "namespaceMaxGpus[0].namespaces: list the namespaces")]
    #[case::namespace_max_bad(with(base(), "/namespaceMaxGpus", json!([{"namespaces": ["ML"], "maxGpus": 8}])), "namespaceMaxGpus[0].namespaces[0]: 'ML' is not a namespace name")]
    #[case::namespace_max_zero(with(base(), "/namespaceMaxGpus", json!([{"namespaces": ["ml"], "maxGpus": 0}])), "namespaceMaxGpus[0].maxGpus: must be at least 1")]
    #[case::default_zero(with(base(), "/defaultMaxGpus", json!(0)), "defaultMaxGpus: must be at least 1")]
    #[case::extra(with(base(), "/extraGpuResources", json!(["gpu"])), "extraGpuResources[0]:")]
    #[case::custom_kind(with(base(), "/customKinds", json!([{"group": "", "kind": "X", "templates": []}])), "customKinds[0].group")]
    #[case::exempt(with(base(), "/exemptNamespaces", json!(["*"])), "exemptNamespaces[0]:")]
    #[case::unreadable_cluster_allow(with(base(), "/unreadableCluster", json!("allow")), "unreadableCluster: 'allow' is not one of deny, warn")]
    #[case::fail_open_disagrees(with(with(base(), "/unreadableCluster", json!("warn")), "/failOpen", json!(false)), "failOpen: false (the old spelling of unreadableCluster: deny) disagrees with unreadableCluster: warn; remove failOpen")]
    fn invalid_settings_name_the_field(#[case] settings: Value, #[case] start: &str) {
        let err = parse(settings).validate().unwrap_err().to_string();
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
