//! Settings of the capacity gate (checked in [`super::check`]). Its pools are the pool
//! set of [`crate::pools`], the autoscaler policy's too.

use crate::cluster::{ClusterRequest, GetResource};
use crate::pools::PoolSet;
use crate::settings::{Action, UnreadableCluster, policy_settings};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub mod brakes;

pub use crate::pools::{DEFAULT_THRESHOLD_PERCENT, Pool, Usage};
pub use crate::settings::DEFAULT_POOL_LABEL_KEY;

/// The label Kueue reads to find a workload's LocalQueue.
pub const DEFAULT_QUEUE_LABEL_KEY: &str = "kueue.x-k8s.io/queue-name";

/// Kinds whose `suspend` field keeps their pods from being created, built in: (API group,
/// kind, dot path of the field).
pub const BUILTIN_SUSPENDABLE: &[(&str, &str, &str)] = &[
    ("batch", "Job", "spec.suspend"),
    ("jobset.x-k8s.io", "JobSet", "spec.suspend"),
    ("ray.io", "RayJob", "spec.suspend"),
    ("kubeflow.org", "PyTorchJob", "spec.runPolicy.suspend"),
];

policy_settings! {
    /// Settings of gpu-capacity-gate-policy.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Settings {
        @pools(Pool);
        /// Where a pool's GPUs in use come from, unless the pool says otherwise.
        pub usage: Usage = Usage::default(),
        /// Which Pods are charged when they are created (see [`ChargePods`]).
        pub charge_pods: ChargePods = ChargePods::default(),
        /// What to do when cluster state cannot be read: `deny` (fail closed, naming what to
        /// grant) or `warn` (accept with that warning). Read through
        /// [`Settings::on_unreadable_cluster`], which folds in `failOpen`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub unreadable_cluster: Option<Action> = None,
        /// The old spelling of `unreadableCluster`: `true` reads as `warn`, `false` as `deny`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub fail_open: Option<bool> = None,
        @shared + exceptions;
        /// Pod templates with one of these `priorityClassName`s are not charged.
        pub exempt_priority_classes: Vec<String> = Vec::new(),
        /// Named time windows that `pools[].thresholds` refer to.
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        pub schedules: crate::schedule::Schedules = Default::default(),
        /// What to do when the pool has room in total but no node has room for one of the
        /// workload's pods (they would wait, Pending, until GPUs free up on a node): `warn`
        /// (accept, naming the largest free block) or `deny`.
        pub fragmentation: Action = Action::Warn,
        /// Charge an UPDATE that changes a Deployment's pod template `maxSurge` pods.
        pub charge_rollout_surge: bool = true,
        /// The label that hands a workload to a queue (Kueue's LocalQueue name); empty: none.
        pub queue_label_key: String = DEFAULT_QUEUE_LABEL_KEY.to_string(),
        /// Gate workloads that carry the queue label too (default: the queue owns the
        /// quota of the workloads it is proven to own, [`super::queue`]).
        pub gate_queued: bool = false,
        /// The kinds Kueue manages in this cluster: only these can be left to their queue.
        pub queue_managed_kinds: Vec<ManagedKind> = default_managed_kinds(),
        /// More kinds whose `suspend` field keeps their pods from being created.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub suspendable_kinds: Vec<SuspendableKind> = Vec::new(),
        /// Check the ResourceQuotas of the workload's namespace that count its GPUs; left
        /// out: on, and a missing grant only warns ([`super::upgrade`]).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub check_namespace_quotas: Option<bool> = None,
        /// What to do when the namespace's ResourceQuotas cannot be read: `deny` (as for
        /// every host error: `unreadableCluster` applies) or `warn` (accept, with a
        /// warning naming the permission to grant: Kubernetes still enforces the quotas when
        /// the pods are created, so nothing escapes them). Left out: see
        /// [`Settings::on_unreadable_namespace_quotas`].
        #[serde(skip_serializing_if = "Option::is_none")]
        pub unreadable_namespace_quotas: Option<Action> = None,
        /// Count the GPUs the allocated DRA ResourceClaims of a pool's Pods hold in its
        /// usage (pools with `usage: pods`; [`super::claims`]). Off by default: it needs
        /// `list`/`watch` on `resourceclaims`, which the gate did not need before.
        pub count_dra_claims: bool = false,
        /// The Namespace label naming a namespace's team (team budgets).
        pub team_label_key: String = crate::settings::TEAM_POD_LABEL_KEY.to_string(),
        /// GPU budgets per team: limits per GPU resource, and per pool (as written; read by
        /// [`super::teams::parse_budgets`]).
        #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
        pub team_budgets: serde_json::Map<String, serde_json::Value> = serde_json::Map::new(),
        /// A ConfigMap holding more team budgets (read with `get_resource`); its entries
        /// replace the settings' for the same team.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub team_budgets_config_map: Option<ConfigMapRef> = None,
        /// At most so many GPUs newly admitted per namespace and per team within a window
        /// ([`super::brake`]).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub burst_brakes: Option<brakes::BurstBrakes> = None,
        // Node offers (`super::offers`).
        /// A charged pod template that selects a GPU product, a MIG profile or a least
        /// driver or CUDA version that no schedulable node of its pool offers: `deny`,
        /// `warn` (accept with a warning), or `allow` (not checked). A pool with a ceiling
        /// can add nodes whose labels are unknown: there it only warns.
        pub node_offers: Action = Action::Deny,
    }
}

/// A kind Kueue manages in this cluster (its `integrations.frameworks`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ManagedKind {
    /// API group (`""` for Pod), any version.
    pub group: String,
    pub kind: String,
}

/// The default `queueManagedKinds`: the suspendable kinds of Kueue's default integrations
/// the gate knows (batch/job, jobset, rayjob, pytorchjob).
pub fn default_managed_kinds() -> Vec<ManagedKind> {
    [
        ("batch", "Job"),
        ("jobset.x-k8s.io", "JobSet"),
        ("ray.io", "RayJob"),
        ("kubeflow.org", "PyTorchJob"),
    ]
    .iter()
    .map(|(group, kind)| ManagedKind {
        group: group.to_string(),
        kind: kind.to_string(),
    })
    .collect()
}

/// Where the team budgets ConfigMap is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ConfigMapRef {
    pub namespace: String,
    pub name: String,
    /// The data key holding the budgets (JSON); default `budgets.json`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl ConfigMapRef {
    pub fn what(&self) -> String {
        format!("ConfigMap {}/{}", self.namespace, self.name)
    }

    /// The host call that reads it.
    pub fn request(&self) -> ClusterRequest {
        ClusterRequest::Get(GetResource::config_map(&self.namespace, &self.name))
    }
}

/// A kind (custom resource) whose boolean field at `path` suspends it: while it is
/// `true` the kind's controller creates no pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SuspendableKind {
    /// API group, any version (`kubeflow.org`).
    pub group: String,
    pub kind: String,
    /// Dot path of the field in the object (`spec.runPolicy.suspend`).
    pub path: String,
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
    /// The pool label and the pools.
    pub fn pool_set(&self) -> PoolSet<'_> {
        PoolSet {
            label_key: &self.pool_label_key,
            pools: &self.pools,
        }
    }

    /// The pool named `name`, with its index.
    pub fn pool_named(&self, name: &str) -> Option<(usize, &Pool)> {
        self.pool_set().named(name)
    }

    /// Where `pool`'s GPUs in use come from.
    pub fn usage_of(&self, pool: &Pool) -> Usage {
        pool.usage.unwrap_or(self.usage)
    }

    /// What to do when cluster state cannot be read (`unreadableCluster`, or its old
    /// spelling `failOpen`): `warn` or `deny`.
    pub fn on_unreadable_cluster(&self) -> Action {
        UnreadableCluster::of(self.unreadable_cluster, self.fail_open).action()
    }
}

/// The rule names `exceptions[].rules` may give: `capacity` excuses every denial of the
/// gate; `burstBrake`, `sustained` and `nodeOffers` only those rules' ([`super::brake`],
/// [`super::sustained`], [`super::offers`]).
pub const RULE_NAMES: [&str; 4] = ["capacity", "burstBrake", "sustained", "nodeOffers"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::ValidateSettings;
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
        assert_eq!(s.on_unreadable_cluster(), Action::Deny);
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
        v["unreadableCluster"] = json!("warn");
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
        let err = parse(settings).validate().unwrap_err().to_string();
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
        let err = parse(settings).validate().unwrap_err().to_string();
        assert!(err.starts_with(start), "{err}");
    }

    /// `base()` with the growth settings of issue-sized clusters: ceilings of every kind,
    /// schedules with thresholds, alternatives, queue and suspend settings.
    fn growth() -> Value {
        let mut v = base();
        v["pools"][0]["maxAllocatable"] = json!({"nvidia.com/gpu": 64});
        v["pools"][0]["alternatives"] = json!(["h100", "batch"]);
        v["pools"][0]["thresholds"] = json!([{"window": "peak", "thresholdPercent": 80}]);
        v["pools"][1]["karpenterNodePool"] = json!("h100-spot");
        v["pools"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "batch",
            "nodeSelector": {"matchLabels": {"gpu-admission/pool": "batch"}},
            "clusterAutoscaler": {"maxNodes": 16, "gpusPerNode": {"nvidia.com/gpu": "8"}}}));
        v["schedules"] = json!({"peak": {"timeZone": "Europe/Berlin",
            "windows": [{"days": ["Mon", "Tue", "Wed", "Thu", "Fri"], "from": "08:00", "to": "20:00"}]}});
        v["fragmentation"] = json!("deny");
        v["chargeRolloutSurge"] = json!(false);
        v["queueLabelKey"] = json!("example.com/queue");
        v["gateQueued"] = json!(true);
        v["suspendableKinds"] =
            json!([{"group": "kubeflow.org", "kind": "TFJob", "path": "spec.runPolicy.suspend"}]);
        v
    }

    #[test]
    fn growth_settings_are_valid_and_default_sensibly() {
        let s = parse(growth());
        s.validate().unwrap();
        assert_eq!(s.fragmentation, Action::Deny);
        assert_eq!(
            s.pools[2].node_count_ceiling(),
            Some((
                16,
                crate::gpu::GpuCounts::from([("nvidia.com/gpu".to_string(), 8)])
            ))
        );
        let d = parse(base());
        assert_eq!(d.fragmentation, Action::Warn);
        assert!(d.charge_rollout_surge);
        assert_eq!(d.queue_label_key, "kueue.x-k8s.io/queue-name");
        assert!(!d.gate_queued);
        assert!(!d.pools[0].has_ceiling());
        // An empty queue label key recognises no queue; an empty NodePool name is none.
        parse(top("queueLabelKey", json!(""))).validate().unwrap();
        let s = parse(with(growth(), "/pools/1/karpenterNodePool", json!("")));
        s.validate().unwrap();
        assert!(!s.pools[1].has_ceiling());
    }

    #[rstest]
    #[case::two_ceilings(pool_field(growth(), 1, "maxAllocatable", json!({"nvidia.com/gpu": 8})), "pools[1].karpenterNodePool: the pool already has a ceiling in pools[1].maxAllocatable; give one ceiling per pool")]
    #[case::ceiling_and_capacity(pool_field(growth(), 0, "capacity", json!({"nvidia.com/gpu": 8})), "pools[0].maxAllocatable: the pool declares its capacity in pools[0].capacity, which is already what it is judged against; remove one of them")]
    #[case::empty_max(with(growth(), "/pools/0/maxAllocatable", json!({})), "pools[0].maxAllocatable: give the most GPUs per resource the pool can grow to, e.g. {nvidia.com/gpu: 64}")]
    #[case::max_not_gpu(with(growth(), "/pools/0/maxAllocatable", json!({"cpu": 64})), "pools[0].maxAllocatable.cpu: not a GPU resource the gate counts")]
    #[case::max_fraction(with(growth(), "/pools/0/maxAllocatable", json!({"nvidia.com/gpu": "0.5"})), "pools[0].maxAllocatable.nvidia.com/gpu: must be a whole number of GPUs ('0.5' must be a whole number)")]
    #[case::bad_node_pool(with(growth(), "/pools/1/karpenterNodePool", json!("H100 Spot")), "pools[1].karpenterNodePool: 'H100 Spot' is not a NodePool name")]
    #[case::no_max_nodes(with(growth(), "/pools/2/clusterAutoscaler/maxNodes", json!(0)), "pools[2].clusterAutoscaler.maxNodes: must be at least 1")]
    #[case::no_node_shape(with(growth(), "/pools/2/clusterAutoscaler/gpusPerNode", json!({})), "pools[2].clusterAutoscaler.gpusPerNode: give the GPUs one node of the pool has, e.g. {nvidia.com/gpu: 8}")]
    #[case::own_alternative(with(growth(), "/pools/0/alternatives", json!(["a100"])), "pools[0].alternatives[0]: a pool cannot be its own alternative")]
    #[case::unknown_alternative(with(growth(), "/pools/0/alternatives", json!(["h100", "spot"])), "pools[0].alternatives[1]: 'spot' names no pool; use one of h100, batch")]
    #[case::alternative_twice(with(growth(), "/pools/0/alternatives", json!(["h100", "h100"])), "pools[0].alternatives[1]: 'h100' is listed twice")]
    #[case::unknown_window(with(growth(), "/pools/0/thresholds/0/window", json!("night")), "pools[0].thresholds[0].window: 'night' names no schedule; define it under schedules (defined: peak)")]
    #[case::window_threshold(with(growth(), "/pools/0/thresholds/0/thresholdPercent", json!(0)), "pools[0].thresholds[0].thresholdPercent: must be between 1 and 100 (got 0)")]
    #[case::window_twice(with(growth(), "/pools/0/thresholds", json!([{"window": "peak", "thresholdPercent": 80}, {"window": "peak", "thresholdPercent": 70}])), "pools[0].thresholds[1].window: 'peak' is listed twice")]
    #[case::bad_schedule(with(growth(), "/schedules/peak/windows/0/from", json!("25:00")), "schedules.peak.windows[0].from: '25:00' is not a time HH:MM")]
    #[case::bad_zone(with(growth(), "/schedules/peak/timeZone", json!("Mars/Olympus")), "schedules.peak.timeZone: 'Mars/Olympus' is not a time zone the policy knows")]
    #[case::queue_key(top("queueLabelKey", json!("bad key")), "queueLabelKey: 'bad key'")]
    #[case::suspend_group(with(growth(), "/suspendableKinds/0/group", json!("")), "suspendableKinds[0].group: must name the API group")]
    #[case::suspend_path(with(growth(), "/suspendableKinds/0/path", json!("spec..suspend")), "suspendableKinds[0].path: 'spec..suspend' must be a dot path like spec.suspend")]
    #[case::suspend_builtin(with(growth(), "/suspendableKinds/0/kind", json!("PyTorchJob")), "suspendableKinds[0]: kubeflow.org/PyTorchJob is built in")]
    fn invalid_growth_settings_name_the_field(#[case] settings: Value, #[case] start: &str) {
        let err = parse(settings).validate().unwrap_err().to_string();
        assert!(err.starts_with(start), "{err}");
    }

    #[rstest]
    #[case::fragmentation(json!({"fragmentation": "ignore"}))]
    #[case::ca_field(json!({"pools": [{"name": "a", "clusterAutoscaler": {"maxNodes": 2, "nodes": 3}}]}))]
    #[case::threshold_field(json!({"pools": [{"name": "a", "thresholds": [{"window": "w", "percent": 3}]}]}))]
    #[case::alternatives_not_a_list(json!({"pools": [{"name": "a", "alternatives": "b"}]}))]
    fn malformed_growth_settings_do_not_parse(#[case] settings: Value) {
        assert!(serde_json::from_value::<Settings>(settings).is_err());
    }

    #[test]
    fn warn_or_deny_fields_refuse_allow() {
        let err = parse(top("fragmentation", json!("allow")))
            .validate()
            .unwrap_err()
            .to_string();
        assert_eq!(err, "fragmentation: 'allow' is not one of warn, deny");
        let err = parse(top("unreadableNamespaceQuotas", json!("allow")))
            .validate()
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "unreadableNamespaceQuotas: 'allow' is not one of warn, deny"
        );
        let s = parse(top("unreadableNamespaceQuotas", json!("warn")));
        s.validate().unwrap();
        assert_eq!(s.unreadable_namespace_quotas, Some(Action::Warn));
    }

    /// `unreadableCluster: deny | warn`, and `failOpen`, its old spelling, still valid:
    /// settings are read the same either way, and only a disagreement is an error.
    #[test]
    fn unreadable_cluster_and_its_old_spelling_fail_open() {
        let read = |fields: Value| {
            let mut v = base();
            for (k, x) in fields.as_object().unwrap() {
                v[k] = x.clone();
            }
            let s = parse(v);
            s.validate().map(|()| s.on_unreadable_cluster())
        };
        for (fields, action) in [
            (json!({}), Action::Deny),
            (json!({"unreadableCluster": "warn"}), Action::Warn),
            (json!({"unreadableCluster": "deny"}), Action::Deny),
            (json!({"failOpen": true}), Action::Warn),
            (json!({"failOpen": false}), Action::Deny),
            (
                json!({"failOpen": true, "unreadableCluster": "warn"}),
                Action::Warn,
            ),
        ] {
            assert_eq!(read(fields.clone()), Ok(action), "{fields}");
        }
        assert_eq!(
            read(json!({"unreadableCluster": "allow"}))
                .unwrap_err()
                .to_string(),
            "unreadableCluster: 'allow' is not one of deny, warn"
        );
        assert_eq!(
            read(json!({"failOpen": true, "unreadableCluster": "deny"}))
                .unwrap_err()
                .to_string(),
            "failOpen: true (the old spelling of unreadableCluster: warn) disagrees with unreadableCluster: deny; remove failOpen"
        );
        // Serialized, the settings keep the spelling they were given.
        let old = parse(top("failOpen", json!(true)));
        let v = serde_json::to_value(&old).unwrap();
        assert_eq!(
            (v.get("failOpen"), v.get("unreadableCluster")),
            (Some(&json!(true)), None)
        );
        assert_eq!(parse(v), old);
    }

    #[test]
    fn a_map_of_node_labels_is_a_node_selector() {
        let map = with(
            base(),
            "/pools/0/nodeSelector",
            json!({"gpu-admission/pool": "a100"}),
        );
        assert_eq!(parse(map), parse(base()));
        let err = serde_json::from_value::<Settings>(with(
            base(),
            "/pools/0/nodeSelector",
            json!({"matchLabel": {"gpu-admission/pool": "a100"}}),
        ))
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("invalid type: map, expected a string"),
            "{err}"
        );
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
