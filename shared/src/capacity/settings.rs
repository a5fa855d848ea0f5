//! Settings of the capacity gate, and their validation.

use crate::selector::LabelSelector;
use crate::settings::{
    Action, FieldError, UnreadableCluster, ValidateSettings, check_pool_ref, check_window_ref,
    policy_settings, read_node_selector, validate_label_key, validate_label_value,
    validate_object_name,
};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

pub use crate::settings::DEFAULT_POOL_LABEL_KEY;

/// Percent of a pool's allocatable GPUs above which new work is denied.
pub const DEFAULT_THRESHOLD_PERCENT: u32 = 90;

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
        /// Gate workloads that carry the queue label too (default: the queue owns their quota).
        pub gate_queued: bool = false,
        /// More kinds whose `suspend` field keeps their pods from being created.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub suspendable_kinds: Vec<SuspendableKind> = Vec::new(),
        /// Check the ResourceQuotas of the workload's namespace that count its GPUs.
        pub check_namespace_quotas: bool = true,
        /// What to do when the namespace's ResourceQuotas cannot be read: `deny` (as for
        /// every host error: `unreadableCluster` applies) or `warn` (accept, with a
        /// warning naming the permission to grant: Kubernetes still enforces the quotas when
        /// the pods are created, so nothing escapes them).
        pub unreadable_namespace_quotas: Action = Action::Deny,
        /// The Namespace label naming a namespace's team (team budgets).
        pub team_label_key: String = crate::settings::TEAM_POD_LABEL_KEY.to_string(),
        /// GPU budgets per team: limits per GPU resource, and per pool (as written; read by
        /// [`super::teams::parse_budgets`]).
        #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
        pub team_budgets: serde_json::Map<String, serde_json::Value> = serde_json::Map::new(),
        /// A ConfigMap holding more team budgets (read with `get_resource`); its entries
        /// replace the settings' for the same team.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub team_budgets_config_map: Option<super::teams::ConfigMapRef> = None,
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

/// A pool's threshold inside a time window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WindowThreshold {
    /// A name in `schedules`.
    pub window: String,
    /// Replaces the pool's `thresholdPercent` while the window holds "now" (1..=100).
    pub threshold_percent: u32,
}

/// A pool's ceiling under cluster-autoscaler: node groups are not Kubernetes objects, so
/// their size is given here.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ClusterAutoscalerCeiling {
    /// The most nodes the pool's node groups may have together (their `--nodes` maximum).
    pub max_nodes: u64,
    /// GPUs per resource name one node of the group has (the node shape).
    pub gpus_per_node: BTreeMap<String, DeclaredGpus>,
}

/// One pool of GPU nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Pool {
    /// The pool's name: the value of the pool label on its pods.
    pub name: String,
    /// How to find the pool's Nodes (and which templates target it by node selector).
    /// Empty: the pool is targeted by its pool label only (then `capacity` is required).
    /// A map of node labels reads as its `matchLabels`.
    #[serde(deserialize_with = "read_node_selector")]
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
    /// Thresholds by time window: the first entry whose window holds "now" replaces
    /// `thresholdPercent`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<WindowThreshold>,
    /// The most GPUs per resource name the pool can grow to (a static ceiling).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_allocatable: Option<BTreeMap<String, DeclaredGpus>>,
    /// The Karpenter NodePool (karpenter.sh/v1) whose `spec.limits` is the pool's ceiling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub karpenter_node_pool: Option<String>,
    /// The pool's ceiling under cluster-autoscaler: `maxNodes` x `gpusPerNode`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_autoscaler: Option<ClusterAutoscalerCeiling>,
    /// Pools to suggest, in order, when this one denies a workload: the first with room is
    /// named in the denial.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<String>,
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
            thresholds: Vec::new(),
            max_allocatable: None,
            karpenter_node_pool: None,
            cluster_autoscaler: None,
            alternatives: Vec::new(),
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

/// Counts of a map of declared GPUs; entries that are not whole numbers count as 0
/// (settings validation refuses them).
fn counts_of(declared: &BTreeMap<String, DeclaredGpus>) -> crate::gpu::GpuCounts {
    declared
        .iter()
        .map(|(resource, n)| (resource.clone(), n.count().unwrap_or(0)))
        .collect()
}

impl Pool {
    /// The threshold at `now`, and the window that set it (`None`: `thresholdPercent`).
    /// `schedules` are the gate's; a window that names no valid schedule never holds.
    pub fn threshold_at(
        &self,
        schedules: &crate::schedule::Schedules,
        now: crate::clock::UnixSeconds,
    ) -> (u32, Option<&str>) {
        self.thresholds
            .iter()
            .find(|t| {
                schedules
                    .get(&t.window)
                    .and_then(|s| s.check("").ok())
                    .is_some_and(|s| s.contains(now))
            })
            .map(|t| (t.threshold_percent, Some(t.window.as_str())))
            .unwrap_or((self.threshold_percent, None))
    }

    /// True when the pool's ceiling is read from a Karpenter NodePool, declared, or given
    /// by node count.
    pub fn has_ceiling(&self) -> bool {
        self.max_allocatable.is_some()
            || self.node_pool().is_some()
            || self.cluster_autoscaler.is_some()
    }

    /// The Karpenter NodePool's name (an empty name, as forms send, is none).
    pub fn node_pool(&self) -> Option<&str> {
        self.karpenter_node_pool
            .as_deref()
            .filter(|name| !name.is_empty())
    }

    /// The static ceiling (`maxAllocatable`) as counts.
    pub fn static_ceiling(&self) -> Option<crate::gpu::GpuCounts> {
        self.max_allocatable.as_ref().map(counts_of)
    }

    /// The cluster-autoscaler ceiling: (`maxNodes`, GPUs per node).
    pub fn node_count_ceiling(&self) -> Option<(u64, crate::gpu::GpuCounts)> {
        self.cluster_autoscaler
            .as_ref()
            .map(|c| (c.max_nodes, counts_of(&c.gpus_per_node)))
    }

    /// The declared capacity as counts (`None`: measured from the Nodes). Entries that are
    /// not whole numbers count as 0 (settings validation refuses them).
    pub fn declared_capacity(&self) -> Option<crate::gpu::GpuCounts> {
        self.capacity.as_ref().map(counts_of)
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
    fn validate(&self) -> Result<(), FieldError> {
        validate_label_key("poolLabelKey", &self.pool_label_key)?;
        if self.pools.is_empty() {
            return Err(FieldError::new(
                "pools",
                "define at least one pool, e.g. {name: a100, nodeSelector: {matchLabels: {gpu-admission/pool: a100}}}; without pools the gate has nothing to measure",
            ));
        }
        for (i, pool) in self.pools.iter().enumerate() {
            let field = format!("pools[{i}]");
            self.validate_pool(i, pool)?;
            self.validate_ceiling(&field, pool)?;
            self.validate_priority_classes(i, &field, pool)?;
            self.validate_alternatives(i, &field, pool)?;
        }
        let warn_or_deny = [Action::Warn, Action::Deny];
        self.fragmentation
            .check_one_of("fragmentation", &warn_or_deny)?;
        self.unreadable_namespace_quotas
            .check_one_of("unreadableNamespaceQuotas", &warn_or_deny)?;
        UnreadableCluster::of(self.unreadable_cluster, self.fail_open).check()?;
        let schedules = crate::schedule::check_all(&self.schedules, "schedules")?;
        let defined: Vec<&str> = self.schedules.keys().map(String::as_str).collect();
        for (i, pool) in self.pools.iter().enumerate() {
            for (k, t) in pool.thresholds.iter().enumerate() {
                let field = format!("pools[{i}].thresholds[{k}]");
                let valid = schedules.contains_key(&t.window);
                check_window_ref(&format!("{field}.window"), &t.window, valid, &defined)?;
                if !(1..=100).contains(&t.threshold_percent) {
                    return Err(FieldError::new(
                        format!("{field}.thresholdPercent"),
                        format!("must be between 1 and 100 (got {})", t.threshold_percent),
                    ));
                }
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
        }
        if !self.queue_label_key.is_empty() {
            validate_label_key("queueLabelKey", &self.queue_label_key)?;
        }
        for (i, k) in self.suspendable_kinds.iter().enumerate() {
            let field = format!("suspendableKinds[{i}]");
            if k.group.trim().is_empty() {
                return Err(FieldError::new(
                    format!("{field}.group"),
                    "must name the API group, e.g. kubeflow.org",
                ));
            }
            if k.kind.trim().is_empty() {
                return Err(FieldError::new(
                    format!("{field}.kind"),
                    "must not be empty",
                ));
            }
            if k.path.is_empty() || k.path.split('.').any(|s| s.is_empty()) {
                return Err(FieldError::new(
                    format!("{field}.path"),
                    format!("'{}' must be a dot path like spec.suspend", k.path),
                ));
            }
            if BUILTIN_SUSPENDABLE
                .iter()
                .any(|(g, kind, _)| *g == k.group && *kind == k.kind)
            {
                return Err(FieldError::new(
                    field,
                    format!(
                        "{}/{} is built in (its suspend field is known); remove it",
                        k.group, k.kind
                    ),
                ));
            }
        }
        self.validate_shared()?;
        crate::exceptions::HasExceptions::validate_exceptions(self, &RULE_NAMES)?;
        for (i, class) in self.exempt_priority_classes.iter().enumerate() {
            validate_object_name(
                &format!("exemptPriorityClasses[{i}]"),
                class,
                "PriorityClass",
            )?;
        }
        super::teams::validate_settings(self)
    }
}

impl Settings {
    /// What to do when cluster state cannot be read (`unreadableCluster`, or its old
    /// spelling `failOpen`): `warn` or `deny`.
    pub fn on_unreadable_cluster(&self) -> Action {
        UnreadableCluster::of(self.unreadable_cluster, self.fail_open).action()
    }

    /// What every pool, of the gate or of the autoscaler policy, must be: named (a label
    /// value, unique), with a node selector of its own or a declared `capacity`, a threshold
    /// in 1..=100, and a `capacity` of whole GPUs the policies count.
    pub(crate) fn validate_pool(&self, i: usize, pool: &Pool) -> Result<(), FieldError> {
        let field = format!("pools[{i}]");
        if pool.name.is_empty() {
            return Err(FieldError::new(
                format!("{field}.name"),
                format!(
                    "must not be empty; it is the value of the {} label on the pool's pods",
                    self.pool_label_key
                ),
            ));
        }
        validate_label_value(&format!("{field}.name"), &pool.name)?;
        if let Some((j, _)) = self.pool_named(&pool.name).filter(|(j, _)| *j != i) {
            return Err(FieldError::new(
                format!("{field}.name"),
                format!(
                    "'{}' is already the name of pools[{j}]; pool names must be unique",
                    pool.name
                ),
            ));
        }
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
        if !(1..=100).contains(&pool.threshold_percent) {
            return Err(FieldError::new(
                format!("{field}.thresholdPercent"),
                format!("must be between 1 and 100 (got {})", pool.threshold_percent),
            ));
        }
        self.validate_capacity(&field, pool)
    }

    /// `capacity`: at least one entry, each a GPU resource the gate counts with a whole
    /// number of GPUs.
    fn validate_capacity(&self, field: &str, pool: &Pool) -> Result<(), FieldError> {
        let Some(declared) = &pool.capacity else {
            return Ok(());
        };
        self.validate_gpu_map(
            &format!("{field}.capacity"),
            declared,
            "declare the pool's GPUs per resource, e.g. {nvidia.com/gpu: 512}, or remove capacity to measure them from the pool's nodes",
        )
    }

    /// A map of GPUs per resource name (`{nvidia.com/gpu: 64}`): at least one entry, each a
    /// GPU resource the gate counts with a whole number of GPUs.
    pub(super) fn validate_gpu_map(
        &self,
        field: &str,
        declared: &BTreeMap<String, DeclaredGpus>,
        if_empty: &str,
    ) -> Result<(), FieldError> {
        if declared.is_empty() {
            return Err(FieldError::new(field, if_empty));
        }
        let names = self.gpu_resources();
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
    fn validate_ceiling(&self, field: &str, pool: &Pool) -> Result<(), FieldError> {
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
                format!(
                    "the pool already has a ceiling in {field}.{first}; give one ceiling per pool"
                ),
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
        if let Some(max) = &pool.max_allocatable {
            self.validate_gpu_map(
                &format!("{field}.maxAllocatable"),
                max,
                "give the most GPUs per resource the pool can grow to, e.g. {nvidia.com/gpu: 64}",
            )?;
        }
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
            self.validate_gpu_map(
                &format!("{field}.clusterAutoscaler.gpusPerNode"),
                &ca.gpus_per_node,
                "give the GPUs one node of the pool has, e.g. {nvidia.com/gpu: 8}",
            )?;
        }
        Ok(())
    }

    /// `alternatives`: other pools of the gate, each once.
    fn validate_alternatives(&self, i: usize, field: &str, pool: &Pool) -> Result<(), FieldError> {
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

    /// `priorityClasses`: required with `usage: quotas` (the scope of the pool's
    /// ResourceQuotas), meaningless without it, and never shared by two pools (a quota
    /// scoped to a shared class would count both pools' pods).
    fn validate_priority_classes(
        &self,
        i: usize,
        field: &str,
        pool: &Pool,
    ) -> Result<(), FieldError> {
        let quotas = self.usage_of(pool) == Usage::Quotas;
        if !quotas {
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
        if pool.priority_classes.is_empty() {
            return Err(FieldError::new(
                format!("{field}.priorityClasses"),
                format!(
                    "usage: quotas counts the pool's pods through ResourceQuotas scoped to the pool's PriorityClasses; list them (the classes gpu-pool-routing-policy gives the pool's workloads, e.g. [{}-high])",
                    pool.name
                ),
            ));
        }
        for (k, class) in pool.priority_classes.iter().enumerate() {
            validate_object_name(
                &format!("{field}.priorityClasses[{k}]"),
                class,
                "PriorityClass",
            )?;
            if pool.priority_classes[..k].contains(class) {
                return Err(FieldError::new(
                    format!("{field}.priorityClasses[{k}]"),
                    format!("'{class}' is listed twice"),
                ));
            }
            if let Some((j, _)) = self.pools[..i].iter().enumerate().find(|(_, other)| {
                self.usage_of(other) == Usage::Quotas && other.priority_classes.contains(class)
            }) {
                return Err(FieldError::new(
                    format!("{field}.priorityClasses[{k}]"),
                    format!(
                        "'{class}' is also a class of pools[{j}]; a ResourceQuota scoped to it would count the pods of both pools"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The rule names `exceptions[].rules` may give.
pub const RULE_NAMES: [&str; 1] = ["capacity"];

crate::exceptions::impl_has_exceptions!(Settings);

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

    #[test]
    fn the_first_window_that_holds_now_sets_the_threshold() {
        let mut v = growth();
        v["schedules"]["always"] = json!({"timeZone": "UTC", "windows": [{"days": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"], "from": "00:00", "to": "24:00"}]});
        v["pools"][0]["thresholds"] = json!([
            {"window": "peak", "thresholdPercent": 80},
            {"window": "always", "thresholdPercent": 95}
        ]);
        let s = parse(v);
        s.validate().unwrap();
        // Tuesday 2026-12-01 10:00 Berlin (09:00 UTC): peak; 22:00 Berlin: always.
        let tuesday = 1_796_083_200;
        assert_eq!(
            s.pools[0].threshold_at(&s.schedules, tuesday + 9 * 3600),
            (80, Some("peak"))
        );
        assert_eq!(
            s.pools[0].threshold_at(&s.schedules, tuesday + 21 * 3600),
            (95, Some("always"))
        );
        assert_eq!(s.pools[1].threshold_at(&s.schedules, tuesday), (80, None));
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
        assert_eq!(s.unreadable_namespace_quotas, Action::Warn);
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
