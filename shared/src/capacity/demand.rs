//! What a request charges to which pool: the pool each pod template targets, GPUs per
//! pool for the object, the increase over the old object on UPDATE, and which objects
//! are not charged because their controller already was.

use super::settings::Settings;
use crate::dra::ClaimBook;
use crate::fractional::{KAI_DEVICE_RESOURCE, Scheduler};
use crate::gpu::{GpuCounts, GpuProblem, GpuResources, describe, scale, template_gpus};
use crate::podspec::PodSpec;
use crate::workload::At;
use crate::workload::Workload;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// GPUs per pool (index into `settings.pools`, so pools are visited in settings order).
pub type PoolDemand = BTreeMap<usize, GpuCounts>;

/// The GPU demand of one admitted object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Demand {
    pub per_pool: PoolDemand,
    /// Templates that hold GPUs but target no configured pool: `location (gpus)`.
    pub no_pool: Vec<String>,
    /// Templates not charged because of their priority class: `location (class)`.
    pub exempt: Vec<String>,
    /// Per pool, the charged templates' locations and `priorityClassName`s (a pool whose
    /// usage comes from ResourceQuotas counts only pods of its own classes).
    pub classes: PoolClasses,
    /// Templates whose GPUs cannot be counted (an unreadable DRA claim, a malformed
    /// fractional share): `location: reason`. The gate denies them.
    pub uncountable: Vec<String>,
    /// Per pool, the GPUs one pod of each charged template holds (templates with a
    /// fractional-GPU share are left out: their pods share devices), for the per-node checks.
    pub shapes: PoolShapes,
    /// Per pool, the workload type (`workload-type` label) of each charged template, for
    /// the pool's reserves.
    pub types: PoolTypes,
    /// Every template that holds GPUs, whatever its pool (exempt and pool-less ones too):
    /// what namespace ResourceQuotas and team budgets count.
    pub templates: Vec<TemplateDemand>,
}

/// What the pods of one pod template hold, for the checks that count every GPU pod of a
/// namespace or team, whatever its pool ([`super::quotas`], [`super::teams`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateDemand {
    /// The template's location (`spec.template.spec`).
    pub location: String,
    /// Its index in the workload's templates.
    pub index: usize,
    /// Pods it stands for.
    pub pods: u64,
    /// GPUs of one pod (effective requests); empty for a fractional-GPU share, whose pods
    /// share devices.
    pub per_pod: GpuCounts,
    /// GPUs of all its pods (as charged to pools).
    pub gpus: GpuCounts,
    /// The pools it targets (indexes into `settings.pools`), exempt or not.
    pub pools: Vec<usize>,
    /// What ResourceQuota scopes see of its pods.
    pub scope: ScopeFacts,
}

/// What decides whether a ResourceQuota's scopes count a template's pods. `None` where
/// the template alone cannot tell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeFacts {
    pub priority_class: Option<String>,
    /// `spec.activeDeadlineSeconds` set (>= 0): the `Terminating` scope.
    pub terminating: bool,
    /// `Some(false)` when a container or the pod sets a cpu or memory request or limit (the
    /// pod is not BestEffort); `None` when none does: a LimitRange's defaults, applied when
    /// the pods are created, may still make it Burstable.
    pub best_effort: Option<bool>,
    /// Pod (anti-)affinity terms naming other namespaces (`namespaces` or
    /// `namespaceSelector`): the `CrossNamespacePodAffinity` scope. `None` when the terms
    /// were not read (a scaled workload is read masked to its resources).
    pub cross_namespace_affinity: Option<bool>,
}

/// The GPUs one pod of a template holds, per resource name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodShape {
    /// The template's location (`spec.template.spec`).
    pub location: String,
    pub per_pod: GpuCounts,
    /// What one pod selects of its node's GPUs (product, MIG profile, least driver or
    /// CUDA version), or why its version label cannot be read; `None` when it selects none
    /// of them, or with `nodeOffers: allow` ([`super::offers`]).
    pub selects: Option<Result<super::offers::Selection, String>>,
}

/// Per pool: the pod shapes of the templates charged to it.
pub type PoolShapes = BTreeMap<usize, Vec<PodShape>>;

/// Per pool: the `workload-type` label of each template charged to it (`None`: absent).
pub type PoolTypes = BTreeMap<usize, Vec<Option<String>>>;

/// The workload type of the templates charged to a pool: their common `workload-type`,
/// `None` when one has none or they differ (then every reserve keeps its GPUs from them).
pub fn workload_type(types: Option<&Vec<Option<String>>>) -> Option<&str> {
    let mut types = types?.iter();
    let first = types.next()?.as_deref()?;
    types.all(|t| t.as_deref() == Some(first)).then_some(first)
}

/// Per pool: (template location, its `priorityClassName`) of every template charged to it.
pub type PoolClasses = BTreeMap<usize, Vec<(String, Option<String>)>>;

impl Demand {
    /// True when some template holds a GPU (charged, exempt or without pool).
    pub fn uses_gpu(&self) -> bool {
        !self.per_pool.is_empty()
            || !self.no_pool.is_empty()
            || !self.exempt.is_empty()
            || !self.uncountable.is_empty()
    }
}

/// GPUs per pool of every pod template of `workload` (pods x effective GPUs per pod; a
/// fractional-GPU template is charged the devices its pods share together, rounded up:
/// [`crate::fractional::Share::charge`]).
pub fn workload_demand(
    workload: &Workload,
    settings: &Settings,
    names: &GpuResources,
    claims: &ClaimBook,
) -> Demand {
    let mut demand = Demand::default();
    for (index, t) in workload.templates.iter().enumerate() {
        let pod = template_gpus(t, names, claims);
        let uncountable: Vec<String> = pod
            .problems
            .iter()
            .filter(|p| matches!(p, GpuProblem::Claim { .. } | GpuProblem::Share(_)))
            .map(ToString::to_string)
            .collect();
        if !uncountable.is_empty() {
            demand
                .uncountable
                .push(format!("{}: {}", t.location, uncountable.join("; ")));
            continue;
        }
        if pod.effective.is_empty() {
            continue;
        }
        let mut gpus = scale(&pod.effective, t.pods);
        if let Some(share) = pod.share.as_ref().filter(|s| s.scheduler == Scheduler::Kai) {
            gpus.insert(KAI_DEVICE_RESOURCE.into(), share.charge(t.pods));
        }
        let pools = settings.pool_set().targeted_by(&t.meta.labels, &t.spec);
        if gpus.values().any(|n| *n > 0) {
            demand.templates.push(TemplateDemand {
                location: t.location.clone(),
                index,
                pods: t.pods,
                per_pod: if pod.share.is_none() {
                    pod.effective.clone()
                } else {
                    GpuCounts::new()
                },
                gpus: {
                    let mut nonzero = gpus.clone();
                    nonzero.retain(|_, n| *n > 0);
                    nonzero
                },
                pools: pools.clone(),
                scope: ScopeFacts {
                    priority_class: t.spec.priority_class_name.clone().filter(|c| !c.is_empty()),
                    terminating: false,
                    best_effort: sets_cpu_or_memory(&t.spec).then_some(false),
                    cross_namespace_affinity: None,
                },
            });
        }
        if let Some(class) = t
            .spec
            .priority_class_name
            .as_deref()
            .filter(|c| settings.exempt_priority_classes.iter().any(|e| e == c))
        {
            demand
                .exempt
                .push(format!("{} (priorityClassName {class})", t.location));
            continue;
        }
        if pools.is_empty() {
            if gpus.values().any(|n| *n > 0) {
                demand
                    .no_pool
                    .push(format!("{} ({})", t.location, describe(&gpus)));
            }
            continue;
        }
        let charged = gpus.values().any(|n| *n > 0);
        let selects = (settings.node_offers != crate::settings::Action::Allow)
            .then(|| super::offers::selection(&t.spec, &t.meta, &t.location, &pod.effective))
            .flatten();
        for i in pools {
            crate::gpu::add_into(demand.per_pool.entry(i).or_default(), &gpus);
            if charged {
                demand
                    .classes
                    .entry(i)
                    .or_default()
                    .push((t.location.clone(), t.spec.priority_class_name.clone()));
                demand.types.entry(i).or_default().push(
                    t.meta
                        .labels
                        .get(crate::labels::settings::WORKLOAD_TYPE_LABEL)
                        .cloned(),
                );
                if pod.share.is_none() {
                    demand.shapes.entry(i).or_default().push(PodShape {
                        location: t.location.clone(),
                        per_pod: pod.effective.clone(),
                        selects: selects.clone(),
                    });
                }
            }
        }
    }
    for counts in demand.per_pool.values_mut() {
        counts.retain(|_, n| *n > 0);
    }
    demand.per_pool.retain(|_, c| !c.is_empty());
    demand
}

/// True when a container (app or init) or the pod sets a cpu or memory request or limit
/// other than zero: such a pod is Burstable or Guaranteed, never BestEffort (Kubernetes'
/// QoS rule reads only cpu and memory).
fn sets_cpu_or_memory(spec: &PodSpec) -> bool {
    let sets = |r: &crate::podspec::Resources| {
        [&r.requests, &r.limits].into_iter().any(|list| {
            ["cpu", "memory"].iter().any(|k| {
                list.get(*k).is_some_and(|q| {
                    crate::quantity::Quantity::parse(&q.0).map_or(true, |q| !q.is_zero())
                })
            })
        })
    };
    spec.containers
        .iter()
        .chain(&spec.init_containers)
        .any(|c| sets(&c.resources))
        || spec.resources.as_ref().is_some_and(sets)
}

/// Fills in the scope facts only the object's JSON has (`activeDeadlineSeconds`, pod
/// affinity terms) for `templates` of `workload`, read from `object`. With
/// `affinity_read: false` (the object was read masked) cross-namespace affinity stays
/// unknown.
pub fn read_scopes(
    templates: &mut [TemplateDemand],
    workload: &Workload,
    object: &Value,
    affinity_read: bool,
) {
    for t in templates {
        let Some(spec) = workload
            .templates
            .get(t.index)
            .and_then(|w| crate::workload::value_at(object, &w.spec_pointer))
        else {
            continue;
        };
        t.scope.terminating = spec
            .get("activeDeadlineSeconds")
            .and_then(Value::as_i64)
            .is_some_and(|s| s >= 0);
        if affinity_read {
            t.scope.cross_namespace_affinity = Some(cross_namespace_affinity(spec));
        }
    }
}

/// Kubernetes' `usesCrossNamespacePodAffinity`: a required or preferred pod affinity or
/// anti-affinity term with `namespaces` or a `namespaceSelector`.
fn cross_namespace_affinity(spec: &Value) -> bool {
    let crosses = |term: &Value| {
        term.get("namespaces")
            .and_then(Value::as_array)
            .is_some_and(|n| !n.is_empty())
            || term.get("namespaceSelector").is_some_and(|s| !s.is_null())
    };
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let Some(affinity) = spec.at(&format!("/affinity/{kind}")) else {
            return false;
        };
        let terms = |key: &str| {
            affinity
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        };
        terms("requiredDuringSchedulingIgnoredDuringExecution").any(crosses)
            || terms("preferredDuringSchedulingIgnoredDuringExecution")
                .filter_map(|w| w.get("podAffinityTerm"))
                .any(crosses)
    })
}

/// What a request adds, template by template, for the checks that count every GPU pod of
/// a namespace or a team: the new object's templates, the old object's (an UPDATE is
/// charged the increase) and the extra pods of a rollout.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Incoming {
    pub new: Vec<TemplateDemand>,
    pub old: Vec<TemplateDemand>,
    pub surge: Vec<TemplateDemand>,
}

impl Incoming {
    /// The GPUs added by the templates `counted` selects: per resource, what the new
    /// object's asks beyond the old one's (as for pools: decreases are not credits), plus
    /// the rollout's extra pods.
    pub fn gpus(&self, counted: &dyn Fn(&TemplateDemand) -> bool) -> GpuCounts {
        let total = |templates: &[TemplateDemand]| {
            let mut sum = GpuCounts::new();
            for t in templates.iter().filter(|t| counted(t)) {
                crate::gpu::add_into(&mut sum, &t.gpus);
            }
            sum
        };
        // Built by insertion: collecting into a map sorts, and each collect is a sort
        // of its own in the module.
        let (mut grown, old) = (total(&self.new), total(&self.old));
        for (r, n) in grown.iter_mut() {
            *n = n.saturating_sub(old.get(r).copied().unwrap_or(0));
        }
        crate::gpu::add_into(&mut grown, &total(&self.surge));
        grown.retain(|_, n| *n > 0);
        grown
    }

    /// The GPUs one incoming pod of the templates `counted` selects holds, when they all
    /// hold the same (then room can be told in pods).
    pub fn pod_shape(&self, counted: &dyn Fn(&TemplateDemand) -> bool) -> Option<GpuCounts> {
        let mut shapes = self
            .new
            .iter()
            .chain(&self.surge)
            .filter(|t| counted(t))
            .map(|t| &t.per_pod);
        let first = shapes.next()?;
        (!first.is_empty() && shapes.all(|s| s == first)).then(|| first.clone())
    }

    /// True when nothing is added.
    pub fn is_empty(&self) -> bool {
        self.gpus(&|_| true).is_empty()
    }
}

/// How many pods of `shape` GPUs `incoming` GPUs stand for, and how many of them fit in
/// `room` (per resource: the fewest).
pub fn pods_fitting(incoming: &GpuCounts, room: &GpuCounts, shape: &GpuCounts) -> (u64, u64) {
    let mut pods = 0;
    let mut fit = u64::MAX;
    for (resource, per_pod) in shape.iter().filter(|(_, n)| **n > 0) {
        pods = pods.max(
            incoming
                .get(resource)
                .copied()
                .unwrap_or(0)
                .div_ceil(*per_pod),
        );
        fit = fit.min(room.get(resource).copied().unwrap_or(0) / per_pod);
    }
    (pods, fit.min(pods))
}

/// Per pool and resource, how much `new` asks beyond `old` (decreases are not credits).
pub fn increase(new: &PoolDemand, old: &PoolDemand) -> PoolDemand {
    let mut out = PoolDemand::new();
    for (pool, counts) in new {
        let before = old.get(pool);
        let grown: GpuCounts = counts
            .iter()
            .filter_map(|(resource, n)| {
                let was = before.and_then(|b| b.get(resource)).copied().unwrap_or(0);
                (*n > was).then(|| (resource.clone(), n - was))
            })
            .collect();
        if !grown.is_empty() {
            out.insert(*pool, grown);
        }
    }
    out
}

/// Per pool and resource, `a + b`.
pub fn sum(a: &PoolDemand, b: &PoolDemand) -> PoolDemand {
    let mut out = a.clone();
    for (pool, counts) in b {
        crate::gpu::add_into(out.entry(*pool).or_default(), counts);
    }
    out
}

/// The value at a dot path (`spec.runPolicy.suspend`).
fn at_dot_path<'v>(object: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(object, |v, key| v.get(key))
}

/// The dot path of the suspend field of kind `group`/`kind`, if it has one.
pub fn suspend_path<'s>(group: &str, kind: &str, settings: &'s Settings) -> Option<&'s str> {
    super::settings::BUILTIN_SUSPENDABLE
        .iter()
        .find(|(g, k, _)| *g == group && *k == kind)
        .map(|(_, _, path)| *path)
        .or_else(|| {
            settings
                .suspendable_kinds
                .iter()
                .find(|s| s.group == group && s.kind == kind)
                .map(|s| s.path.as_str())
        })
}

/// True when `object` (of kind `group`/`kind`) is suspended: its suspend field is `true`.
pub fn is_suspended(group: &str, kind: &str, object: &Value, settings: &Settings) -> bool {
    suspend_path(group, kind, settings)
        .and_then(|path| at_dot_path(object, path))
        .and_then(Value::as_bool)
        == Some(true)
}

/// Kubernetes' default `maxSurge` of a RollingUpdate Deployment.
pub const DEFAULT_MAX_SURGE: &str = "25%";

/// The extra pods a Deployment's rollout creates: `maxSurge` of `spec.replicas`, a
/// percentage rounded up as Kubernetes does (`intstr.GetScaledValueFromIntOrPercent` with
/// round up); 0 for the `Recreate` strategy. Returns (pods, how they were found).
pub fn rollout_surge(deployment: &Value) -> (u64, String) {
    let spec = deployment.get("spec");
    let replicas = spec
        .and_then(|s| s.get("replicas"))
        .map_or(Some(1), Value::as_u64)
        .unwrap_or(1);
    let strategy = spec.and_then(|s| s.get("strategy"));
    if strategy.and_then(|s| s.get("type")).and_then(Value::as_str) == Some("Recreate") {
        return (0, "strategy Recreate".into());
    }
    let given = strategy
        .and_then(|s| s.at("/rollingUpdate/maxSurge"))
        .filter(|v| !v.is_null());
    let (text, default) = match given {
        Some(Value::Number(n)) => (n.to_string(), false),
        Some(Value::String(t)) => (t.clone(), false),
        _ => (DEFAULT_MAX_SURGE.to_string(), true),
    };
    let pods = match text.strip_suffix('%') {
        Some(p) => match p.parse::<u64>() {
            Ok(percent) => (u128::from(replicas) * u128::from(percent)).div_ceil(100),
            // The API server validates maxSurge first; unreadable is charged as the default.
            Err(_) => u128::from(replicas).div_ceil(4),
        },
        None => u128::from(text.parse::<u64>().unwrap_or_else(|_| replicas.div_ceil(4))),
    };
    let pods = u64::try_from(pods).unwrap_or(u64::MAX);
    let how = if text.ends_with('%') {
        format!(
            "maxSurge {text}{} of {replicas} replicas, rounded up",
            if default { " (the default)" } else { "" }
        )
    } else {
        format!("maxSurge {text}")
    };
    (pods, how)
}

/// True when an UPDATE of a Deployment starts (or changes) a rollout: its pod template or
/// its strategy changed, or it was resumed (`spec.paused` true -> false: the gate cannot
/// tell whether template changes were waiting). A paused Deployment rolls nothing out.
pub fn starts_rollout(new: &Value, old: &Value) -> bool {
    let at = |v: &Value, p: &str| v.at(p).cloned().unwrap_or(Value::Null);
    let paused = |v: &Value| at(v, "/spec/paused").as_bool() == Some(true);
    if paused(new) {
        return false;
    }
    at(new, "/spec/template") != at(old, "/spec/template")
        || at(new, "/spec/strategy") != at(old, "/spec/strategy")
        || paused(old)
}

/// An object's controller, from its `ownerReferences`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub controller: Option<bool>,
}

/// The ownerReference with `controller: true`, if any (malformed entries are skipped).
pub fn controller_of(object: &Value) -> Option<OwnerRef> {
    object
        .at("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .filter_map(|o| OwnerRef::deserialize(o).ok())
        .find(|o| o.controller == Some(true))
}

/// True when objects of the owner's kind are charged for the pods they stand for, so
/// what they create must not be charged again: Deployment, StatefulSet, ReplicaSet,
/// ReplicationController, Job, CronJob and the configured custom kinds. Not DaemonSet:
/// it is counted as one pod when admitted, so its pods are charged one by one.
pub fn is_gated_controller(owner: &OwnerRef, settings: &Settings) -> bool {
    let group = owner
        .api_version
        .rsplit_once('/')
        .map(|(g, _)| g)
        .unwrap_or("");
    matches!(
        (group, owner.kind.as_str()),
        ("apps", "Deployment" | "StatefulSet" | "ReplicaSet")
            | ("", "ReplicationController")
            | ("batch", "Job" | "CronJob")
    ) || settings
        .custom_kinds
        .iter()
        .any(|c| c.group == group && c.kind == owner.kind)
}

/// The built-in workload behind a `<resource>/scale` request: (apiVersion, kind).
pub fn scale_parent(group: &str, resource: &str) -> Option<(&'static str, &'static str)> {
    Some(match (group, resource) {
        ("apps", "deployments") => ("apps/v1", "Deployment"),
        ("apps", "statefulsets") => ("apps/v1", "StatefulSet"),
        ("apps", "replicasets") => ("apps/v1", "ReplicaSet"),
        ("", "replicationcontrollers") => ("v1", "ReplicationController"),
        _ => return None,
    })
}

/// `spec.replicas` of an `autoscaling/v1` Scale: absent or null is 0; anything but a
/// non-negative integer is an error.
pub fn scale_replicas(scale: &Value) -> Result<u64, String> {
    match scale.at("/spec/replicas") {
        None | Some(Value::Null) => Ok(0),
        Some(v) => v
            .as_u64()
            .ok_or_else(|| format!("spec.replicas must be a non-negative integer, got {v}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pools::Pool;
    use crate::selector::LabelSelector;
    use rstest::rstest;
    use serde_json::json;

    fn settings() -> Settings {
        let pool = |name: &str, selector: Value| Pool {
            name: name.into(),
            node_selector: serde_json::from_value::<LabelSelector>(selector).unwrap(),
            threshold_percent: 90,
            ..Pool::default()
        };
        Settings {
            pools: vec![
                pool(
                    "a100",
                    json!({"matchLabels": {"gpu-admission/pool": "a100"}}),
                ),
                pool(
                    "h100",
                    json!({"matchLabels": {"gpu-admission/pool": "h100"}}),
                ),
                pool(
                    "l4",
                    json!({"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-L4"]}]}),
                ),
                pool(
                    "spare",
                    json!({"matchExpressions": [{"key": "gpu-admission/pool", "operator": "DoesNotExist"}]}),
                ),
            ],
            custom_kinds: crate::workload::presets::all(),
            exempt_priority_classes: vec!["system-node-critical".into()],
            ..Settings::default()
        }
    }

    fn spec(v: Value) -> PodSpec {
        serde_json::from_value(v).unwrap()
    }

    fn labels(v: Value) -> BTreeMap<String, String> {
        serde_json::from_value(v).unwrap()
    }

    #[rstest]
    #[case::pool_label(json!({"gpu-admission/pool": "h100"}), json!({}), vec![1])]
    #[case::node_selector(json!({}), json!({"nodeSelector": {"gpu-admission/pool": "a100", "zone": "x"}}), vec![0])]
    #[case::label_and_other_selector(json!({"gpu-admission/pool": "h100"}), json!({"nodeSelector": {"gpu-admission/pool": "a100"}}), vec![1, 0])]
    #[case::label_and_same_selector(json!({"gpu-admission/pool": "a100"}), json!({"nodeSelector": {"gpu-admission/pool": "a100"}}), vec![0])]
    #[case::unknown_pool_label(json!({"gpu-admission/pool": "made-up"}), json!({"nodeSelector": {"gpu-admission/pool": "a100"}}), vec![0])]
    #[case::expression_pool(json!({}), json!({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"}}), vec![2])]
    #[case::affinity_single_value(json!({}), json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu-admission/pool", "operator": "In", "values": ["h100"]}]}]}}}}), vec![1])]
    #[case::affinity_two_values(json!({}), json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu-admission/pool", "operator": "In", "values": ["h100", "a100"]}]}]}}}}), vec![])]
    #[case::nothing(json!({"team": "x"}), json!({}), vec![])]
    #[case::other_label_key(json!({"pool": "a100"}), json!({}), vec![])]
    fn pools_of_a_template(#[case] l: Value, #[case] s: Value, #[case] expected: Vec<usize>) {
        assert_eq!(
            settings().pool_set().targeted_by(&labels(l), &spec(s)),
            expected
        );
    }

    fn demand(object: Value) -> Demand {
        let w = Workload::from_object(&object, &crate::workload::presets::all()).unwrap();
        workload_demand(
            &w,
            &settings(),
            &GpuResources::default(),
            &ClaimBook::default(),
        )
    }

    fn deployment(replicas: u64, pool: &str, gpus: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
               "spec": {"replicas": replicas, "template": {
                   "metadata": {"labels": {"gpu-admission/pool": pool}},
                   "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}}})
    }

    fn counts(pairs: &[(&str, u64)]) -> GpuCounts {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn deployment_is_replicas_times_gpus() {
        let d = demand(deployment(4, "a100", "2"));
        assert_eq!(
            d.per_pool,
            PoolDemand::from([(0, counts(&[("nvidia.com/gpu", 8)]))])
        );
        assert!(d.no_pool.is_empty() && d.uses_gpu());
    }

    #[test]
    fn templates_of_one_object_go_to_their_own_pools() {
        let d = demand(
            json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"},
            "spec": {
                "headGroupSpec": {"template": {"metadata": {"labels": {"gpu-admission/pool": "l4"}},
                    "spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"}, "containers": [{"name": "h", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
                "workerGroupSpecs": [
                    {"replicas": 3, "template": {"metadata": {"labels": {"gpu-admission/pool": "h100"}},
                        "spec": {"containers": [{"name": "w", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}},
                    {"replicas": 2, "template": {"spec": {"containers": [{"name": "w", "resources": {"limits": {"amd.com/gpu": "1"}}}]}}}
                ]}}),
        );
        assert_eq!(
            d.per_pool,
            PoolDemand::from([
                (1, counts(&[("nvidia.com/gpu", 24)])),
                (2, counts(&[("nvidia.com/gpu", 1)]))
            ])
        );
        assert_eq!(
            d.no_pool,
            vec!["spec.workerGroupSpecs[1].template.spec (amd.com/gpu: 2)"]
        );
    }

    #[test]
    fn exempt_priority_class_is_not_charged() {
        let mut object = deployment(2, "a100", "1");
        object["spec"]["template"]["spec"]["priorityClassName"] = json!("system-node-critical");
        let d = demand(object);
        assert!(d.per_pool.is_empty());
        assert_eq!(
            d.exempt,
            vec!["spec.template.spec (priorityClassName system-node-critical)"]
        );
        assert!(d.uses_gpu());
    }

    #[test]
    fn non_gpu_and_zero_replicas_demand_nothing() {
        let mut cpu = deployment(3, "a100", "1");
        cpu["spec"]["template"]["spec"]["containers"][0]["resources"] =
            json!({"limits": {"cpu": "2"}});
        assert!(!demand(cpu).uses_gpu());
        let zero = demand(deployment(0, "a100", "4"));
        assert!(zero.per_pool.is_empty());
        assert!(zero.no_pool.is_empty());
    }

    #[test]
    fn gpus_in_init_containers_count() {
        let d = demand(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"gpu-admission/pool": "a100"}},
            "spec": {"containers": [{"name": "app"}],
                     "initContainers": [{"name": "warm", "resources": {"requests": {"nvidia.com/gpu": "4"}}}]}}));
        assert_eq!(d.per_pool[&0], counts(&[("nvidia.com/gpu", 4)]));
    }

    #[rstest]
    #[case::grow(&[(0, "nvidia.com/gpu", 8)], &[(0, "nvidia.com/gpu", 4)], &[(0, "nvidia.com/gpu", 4)])]
    #[case::same(&[(0, "nvidia.com/gpu", 8)], &[(0, "nvidia.com/gpu", 8)], &[])]
    #[case::shrink(&[(0, "nvidia.com/gpu", 2)], &[(0, "nvidia.com/gpu", 8)], &[])]
    #[case::moved_pool(&[(1, "nvidia.com/gpu", 8)], &[(0, "nvidia.com/gpu", 8)], &[(1, "nvidia.com/gpu", 8)])]
    #[case::other_resource(&[(0, "nvidia.com/mig-1g.10gb", 2)], &[(0, "nvidia.com/gpu", 8)], &[(0, "nvidia.com/mig-1g.10gb", 2)])]
    #[case::from_nothing(&[(0, "nvidia.com/gpu", 1)], &[], &[(0, "nvidia.com/gpu", 1)])]
    fn increase_over_the_old_object(
        #[case] new: &[(usize, &str, u64)],
        #[case] old: &[(usize, &str, u64)],
        #[case] expected: &[(usize, &str, u64)],
    ) {
        let build = |v: &[(usize, &str, u64)]| {
            let mut d = PoolDemand::new();
            for (p, r, n) in v {
                d.entry(*p).or_default().insert(r.to_string(), *n);
            }
            d
        };
        assert_eq!(increase(&build(new), &build(old)), build(expected));
    }

    #[rstest]
    #[case::replicaset(json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "1", "controller": true}]), true)]
    #[case::job(json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "controller": true}]), true)]
    #[case::statefulset(json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s", "controller": true}]), true)]
    #[case::custom_kind(json!([{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "r", "controller": true}]), true)]
    #[case::daemonset(json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "controller": true}]), false)]
    #[case::unconfigured_kind(json!([{"apiVersion": "example.com/v1", "kind": "Trainer", "name": "t", "controller": true}]), false)]
    #[case::not_controller(json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs"}]), false)]
    #[case::controller_false(json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "controller": false}]), false)]
    #[case::wrong_group(json!([{"apiVersion": "example.com/v1", "kind": "ReplicaSet", "name": "rs", "controller": true}]), false)]
    #[case::malformed(json!([{"kind": 5, "controller": true}]), false)]
    #[case::not_a_list(json!({"kind": "ReplicaSet"}), false)]
    fn gated_controllers(#[case] owners: Value, #[case] gated: bool) {
        let object = json!({"metadata": {"ownerReferences": owners}});
        let found = controller_of(&object).is_some_and(|o| is_gated_controller(&o, &settings()));
        assert_eq!(found, gated);
    }

    #[rstest]
    #[case::deployments("apps", "deployments", Some(("apps/v1", "Deployment")))]
    #[case::statefulsets("apps", "statefulsets", Some(("apps/v1", "StatefulSet")))]
    #[case::replicasets("apps", "replicasets", Some(("apps/v1", "ReplicaSet")))]
    #[case::rc("", "replicationcontrollers", Some(("v1", "ReplicationController")))]
    #[case::crd("leaderworkerset.x-k8s.io", "leaderworkersets", None)]
    fn scale_parents(
        #[case] group: &str,
        #[case] resource: &str,
        #[case] expected: Option<(&str, &str)>,
    ) {
        assert_eq!(scale_parent(group, resource), expected);
    }

    #[rstest]
    #[case::default(json!({"spec": {"replicas": 10}}), 3)]
    #[case::default_rounds_up(json!({"spec": {"replicas": 5}}), 2)]
    #[case::no_replicas_is_one(json!({"spec": {}}), 1)]
    #[case::percent(json!({"spec": {"replicas": 10, "strategy": {"rollingUpdate": {"maxSurge": "33%"}}}}), 4)]
    #[case::hundred_percent(json!({"spec": {"replicas": 7, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "100%"}}}}), 7)]
    #[case::count(json!({"spec": {"replicas": 10, "strategy": {"rollingUpdate": {"maxSurge": 4}}}}), 4)]
    #[case::zero(json!({"spec": {"replicas": 10, "strategy": {"rollingUpdate": {"maxSurge": 0}}}}), 0)]
    #[case::recreate(json!({"spec": {"replicas": 10, "strategy": {"type": "Recreate"}}}), 0)]
    #[case::zero_replicas(json!({"spec": {"replicas": 0}}), 0)]
    #[case::unreadable_is_the_default(json!({"spec": {"replicas": 10, "strategy": {"rollingUpdate": {"maxSurge": "lots"}}}}), 3)]
    fn surge_of_a_deployment(#[case] deployment: Value, #[case] pods: u64) {
        assert_eq!(rollout_surge(&deployment).0, pods);
    }

    #[rstest]
    #[case::template(json!({"spec": {"template": {"a": 1}}}), json!({"spec": {"template": {"a": 2}}}), true)]
    #[case::strategy(json!({"spec": {"template": {}, "strategy": {"type": "Recreate"}}}), json!({"spec": {"template": {}}}), true)]
    #[case::replicas_only(json!({"spec": {"template": {}, "replicas": 3}}), json!({"spec": {"template": {}, "replicas": 2}}), false)]
    #[case::paused(json!({"spec": {"template": {"a": 1}, "paused": true}}), json!({"spec": {"template": {"a": 2}}}), false)]
    #[case::resumed(json!({"spec": {"template": {}}}), json!({"spec": {"template": {}, "paused": true}}), true)]
    fn rollouts(#[case] new: Value, #[case] old: Value, #[case] starts: bool) {
        assert_eq!(starts_rollout(&new, &old), starts);
    }

    #[rstest]
    #[case::job("batch", "Job", json!({"spec": {"suspend": true}}), true)]
    #[case::job_running("batch", "Job", json!({"spec": {"suspend": false}}), false)]
    #[case::job_unset("batch", "Job", json!({"spec": {}}), false)]
    #[case::job_not_a_bool("batch", "Job", json!({"spec": {"suspend": "true"}}), false)]
    #[case::jobset("jobset.x-k8s.io", "JobSet", json!({"spec": {"suspend": true}}), true)]
    #[case::rayjob("ray.io", "RayJob", json!({"spec": {"suspend": true}}), true)]
    #[case::pytorch("kubeflow.org", "PyTorchJob", json!({"spec": {"runPolicy": {"suspend": true}}}), true)]
    #[case::cronjob("batch", "CronJob", json!({"spec": {"suspend": true}}), false)]
    #[case::deployment("apps", "Deployment", json!({"spec": {"suspend": true}}), false)]
    fn suspended_kinds(
        #[case] group: &str,
        #[case] kind: &str,
        #[case] object: Value,
        #[case] suspended: bool,
    ) {
        assert_eq!(is_suspended(group, kind, &object, &settings()), suspended);
    }

    #[rstest]
    #[case::set(json!({"spec": {"replicas": 5}}), Ok(5))]
    #[case::absent(json!({"spec": {}}), Ok(0))]
    #[case::null(json!(null), Ok(0))]
    #[case::negative(json!({"spec": {"replicas": -1}}), Err(()))]
    #[case::text(json!({"spec": {"replicas": "5"}}), Err(()))]
    fn replicas_of_a_scale(#[case] scale: Value, #[case] expected: Result<u64, ()>) {
        assert_eq!(scale_replicas(&scale).map_err(|_| ()), expected);
    }
}
