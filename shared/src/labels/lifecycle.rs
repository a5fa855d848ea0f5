//! Serving and training hygiene, keyed on the workload-type label: the rules that make a
//! GPU workload safe to roll out and bounded in time. Each rule is off unless configured
//! in `workloadRules`, and applies to the workload types it names:
//!
//! - `readinessProbe`: every GPU container of a serving workload (Deployment,
//!   StatefulSet, LeaderWorkerSet, KServe InferenceService) has a readinessProbe;
//! - `startupProbe`: ... and a startupProbe whose `failureThreshold x periodSeconds`
//!   (Kubernetes' defaults 3 and 10) is at least `minFailureBudgetSeconds`;
//! - `maxUnavailable`: a GPU Deployment's rollout takes at most `max` pods down
//!   (Kubernetes' own arithmetic: the 25% defaults, percentages of `spec.replicas`
//!   rounded down for maxUnavailable and up for maxSurge, 1 when both are 0; all of them
//!   for `Recreate`);
//! - `activeDeadline`: a GPU Job (CronJob, PyTorchJob) sets its `activeDeadlineSeconds`,
//!   at most `maxSeconds`;
//! - `sharedMemory`: every GPU container of a pod with at least `minGpus` GPUs mounts a
//!   memory-backed volume (`emptyDir.medium: Memory`) at `/dev/shm` of at least `minSize`
//!   (`sizeLimit`; without one, the pod's memory limit bounds it).
//!
//! The PodSpec fields these rules read (probes, volumes, mounts) are read here from the
//! object's JSON, at the template's pointer.

use super::problems::Problem;
use super::settings::Settings;
use crate::gpu::{ContainerRole, PodGpus};
use crate::podspec::PodSpec;
use crate::quantity::Quantity;
use crate::settings::FieldError;
use crate::workload::At;
use crate::workload::{PodTemplate, Workload};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Kubernetes' probe defaults.
pub const DEFAULT_FAILURE_THRESHOLD: u64 = 3;
pub const DEFAULT_PERIOD_SECONDS: u64 = 10;
/// A Deployment's rolling-update defaults.
pub const DEFAULT_MAX_UNAVAILABLE: &str = "25%";
pub const DEFAULT_MAX_SURGE: &str = "25%";
/// Where `/dev/shm` must be mounted.
pub const SHM_PATH: &str = "/dev/shm";

/// The kinds the probe rules apply to: long-running serving workloads.
pub const SERVING_KINDS: &[(&str, &str)] = &[
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
    ("serving.kserve.io", "InferenceService"),
];

/// The kinds the deadline rule applies to, and where each keeps its deadline.
pub const JOB_DEADLINES: &[(&str, &str, &str)] = &[
    ("batch", "Job", "/spec/activeDeadlineSeconds"),
    (
        "batch",
        "CronJob",
        "/spec/jobTemplate/spec/activeDeadlineSeconds",
    ),
    (
        "kubeflow.org",
        "PyTorchJob",
        "/spec/runPolicy/activeDeadlineSeconds",
    ),
];

/// The rules of `workloadRules` (each `None`: off).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct WorkloadRules {
    /// The pod label whose value is the workload type.
    pub label_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<Rule>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_probe: Option<Rule>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<Rule>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_deadline: Option<Rule>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_memory: Option<Rule>,
}

impl Default for WorkloadRules {
    fn default() -> Self {
        WorkloadRules {
            label_key: super::settings::WORKLOAD_TYPE_LABEL.to_string(),
            readiness_probe: None,
            startup_probe: None,
            max_unavailable: None,
            active_deadline: None,
            shared_memory: None,
        }
    }
}

/// One rule: the workload types it applies to, and its parameters. One type for every
/// rule (each deserializer costs module size); [`WorkloadRules::validate`] refuses a
/// parameter given to a rule that does not take it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Rule {
    pub workload_types: Vec<String>,
    /// `startupProbe`: the least `failureThreshold x periodSeconds`, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_failure_budget_seconds: Option<u64>,
    /// `maxUnavailable`: the most pods a rollout may take down at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
    /// `activeDeadline`: the longest deadline allowed, in seconds (unset: any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_seconds: Option<u64>,
    /// `sharedMemory`: the least size of the memory-backed `/dev/shm` (`16Gi`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_size: Option<String>,
    /// `sharedMemory`: pods with at least this many GPUs are multi-GPU pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_gpus: Option<u64>,
}

/// `startupProbe.minFailureBudgetSeconds` when unset.
pub const DEFAULT_FAILURE_BUDGET_SECONDS: u64 = 300;
/// `sharedMemory.minSize` when unset.
pub const DEFAULT_SHM_SIZE: &str = "1Gi";
/// `sharedMemory.minGpus` when unset.
pub const DEFAULT_SHM_MIN_GPUS: u64 = 2;

impl Rule {
    pub fn failure_budget(&self) -> u64 {
        self.min_failure_budget_seconds
            .unwrap_or(DEFAULT_FAILURE_BUDGET_SECONDS)
    }

    pub fn shm_size(&self) -> &str {
        self.min_size.as_deref().unwrap_or(DEFAULT_SHM_SIZE)
    }

    pub fn shm_min_gpus(&self) -> u64 {
        self.min_gpus.unwrap_or(DEFAULT_SHM_MIN_GPUS)
    }

    /// The parameters given, by their field names.
    fn given(&self) -> [(&'static str, bool); 5] {
        [
            (
                "minFailureBudgetSeconds",
                self.min_failure_budget_seconds.is_some(),
            ),
            ("max", self.max.is_some()),
            ("maxSeconds", self.max_seconds.is_some()),
            ("minSize", self.min_size.is_some()),
            ("minGpus", self.min_gpus.is_some()),
        ]
    }
}

impl WorkloadRules {
    /// True for the defaults (nothing configured), left out when settings are written.
    pub fn is_default(&self) -> bool {
        *self == WorkloadRules::default()
    }

    /// [`WorkloadRules::is_default`] of boxed rules (serde's `skip_serializing_if`).
    #[allow(clippy::borrowed_box)]
    pub fn is_boxed_default(rules: &Box<WorkloadRules>) -> bool {
        rules.is_default()
    }

    /// True when no rule is configured.
    pub fn is_empty(&self) -> bool {
        self.readiness_probe.is_none()
            && self.startup_probe.is_none()
            && self.max_unavailable.is_none()
            && self.active_deadline.is_none()
            && self.shared_memory.is_none()
    }

    /// Errors name the field (`workloadRules.startupProbe.workloadTypes[0]: ...`).
    /// `allowed`: the values the required label `labelKey` may take, when constrained.
    pub fn validate(&self, allowed: Option<&[String]>) -> Result<(), FieldError> {
        let field = "workloadRules";
        crate::settings::validate_label_key(&format!("{field}.labelKey"), &self.label_key)?;
        // Each rule and the parameters it takes.
        let rules: [(&str, Option<&Rule>, &[&str]); 5] = [
            ("readinessProbe", self.readiness_probe.as_ref(), &[]),
            (
                "startupProbe",
                self.startup_probe.as_ref(),
                &["minFailureBudgetSeconds"],
            ),
            ("maxUnavailable", self.max_unavailable.as_ref(), &["max"]),
            (
                "activeDeadline",
                self.active_deadline.as_ref(),
                &["maxSeconds"],
            ),
            (
                "sharedMemory",
                self.shared_memory.as_ref(),
                &["minSize", "minGpus"],
            ),
        ];
        for (rule, r, takes) in rules {
            let Some(r) = r else { continue };
            if let Some((param, _)) = r
                .given()
                .into_iter()
                .find(|(p, given)| *given && !takes.contains(p))
            {
                let takes = std::iter::once("workloadTypes")
                    .chain(takes.iter().copied())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(FieldError::new(
                    format!("{field}.{rule}.{param}"),
                    format!("not a parameter of this rule (it takes {takes})"),
                ));
            }
            let list = &r.workload_types;
            let f = format!("{field}.{rule}.workloadTypes");
            if list.is_empty() {
                return Err(FieldError::new(
                    f,
                    format!(
                        "name the values of {} this rule applies to (e.g. [interactive]), or remove {field}.{rule} to turn it off",
                        self.label_key
                    ),
                ));
            }
            for (i, t) in list.iter().enumerate() {
                let fi = format!("{f}[{i}]");
                if t.is_empty() {
                    return Err(FieldError::new(fi, "must not be empty"));
                }
                crate::settings::validate_label_value(&fi, t)?;
                if list[..i].contains(t) {
                    return Err(FieldError::new(fi, format!("'{t}' is listed twice")));
                }
                if let Some(allowed) = allowed.filter(|a| !a.iter().any(|v| v == t)) {
                    return Err(FieldError::new(
                        fi,
                        format!(
                            "'{t}' is not a value the {} label may take (requiredLabels allows {}), so the rule would never apply",
                            self.label_key,
                            allowed.join(", ")
                        ),
                    ));
                }
            }
        }
        if let Some(r) = &self.startup_probe
            && r.failure_budget() == 0
        {
            return Err(FieldError::new(
                format!("{field}.startupProbe.minFailureBudgetSeconds"),
                "must be at least 1 (seconds the startupProbe lets the model load)",
            ));
        }
        if let Some(r) = &self.active_deadline
            && r.max_seconds == Some(0)
        {
            return Err(FieldError::new(
                format!("{field}.activeDeadline.maxSeconds"),
                "must be at least 1, or left out to accept any deadline",
            ));
        }
        if let Some(r) = &self.shared_memory {
            let f = format!("{field}.sharedMemory");
            match Quantity::parse(r.shm_size()) {
                Ok(q) if !q.is_negative() && !q.is_zero() => {}
                Ok(_) => {
                    return Err(FieldError::new(
                        format!("{f}.minSize"),
                        "must be more than 0 (e.g. 16Gi)",
                    ));
                }
                Err(e) => {
                    return Err(FieldError::new(
                        format!("{f}.minSize"),
                        format!(
                            "'{}' is not a quantity ({e}); give a size such as 16Gi",
                            r.shm_size()
                        ),
                    ));
                }
            }
            if r.shm_min_gpus() == 0 {
                return Err(FieldError::new(
                    format!("{f}.minGpus"),
                    "must be at least 1 (pods with at least this many GPUs need /dev/shm)",
                ));
            }
        }
        Ok(())
    }

    /// Pointers outside the pod templates that these rules read (`spec.strategy`, a Job's
    /// deadline): an UPDATE changing them is judged, even with unchanged templates.
    pub fn judged_pointers(&self, workload: &Workload) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.max_unavailable.is_some() && is_kind(workload, "apps", "Deployment") {
            out.push("/spec/strategy");
        }
        if self.active_deadline.is_some()
            && let Some(pointer) = deadline_pointer(workload)
        {
            out.push(pointer);
        }
        out
    }
}

fn is_kind(workload: &Workload, group: &str, kind: &str) -> bool {
    workload.group == group && workload.kind == kind
}

fn deadline_pointer(workload: &Workload) -> Option<&'static str> {
    JOB_DEADLINES
        .iter()
        .find(|(g, k, _)| is_kind(workload, g, k))
        .map(|(_, _, p)| *p)
}

/// `spec.activeDeadlineSeconds` for `/spec/activeDeadlineSeconds`.
fn field_of(pointer: &str) -> String {
    pointer.trim_start_matches('/').replace('/', ".")
}

fn applies(types: &[String], workload_type: Option<&str>) -> bool {
    workload_type.is_some_and(|t| types.iter().any(|x| x == t))
}

/// The problems of one GPU pod template of `workload` (in `object`).
pub fn check(
    template: &PodTemplate,
    workload: &Workload,
    object: &Value,
    gpus: &PodGpus,
    settings: &Settings,
) -> Vec<Problem> {
    let rules = &settings.workload_rules;
    if rules.is_empty() {
        return Vec::new();
    }
    let workload_type = template
        .meta
        .labels
        .get(&rules.label_key)
        .map(String::as_str);
    let Some(workload_type) = workload_type else {
        return Vec::new();
    };
    let typed = |types: &[String]| applies(types, Some(workload_type));
    let spec = object.at(&template.spec_pointer).unwrap_or(&Value::Null);
    let gpu_containers: Vec<&str> = gpus
        .containers
        .iter()
        .filter(|c| c.role == ContainerRole::App)
        .map(|c| c.name.as_str())
        .collect();
    let label = format!("{}: {workload_type}", rules.label_key);
    let mut out = Vec::new();
    let serving = SERVING_KINDS.iter().any(|(g, k)| is_kind(workload, g, k));

    if serving
        && rules
            .readiness_probe
            .as_ref()
            .is_some_and(|r| typed(&r.workload_types))
    {
        for name in &gpu_containers {
            if probe(spec, name, "readinessProbe").is_none() {
                out.push(Problem::NoReadinessProbe {
                    who: who(&template.spec, name),
                    label: label.clone(),
                });
            }
        }
    }
    if serving
        && let Some(rule) = rules
            .startup_probe
            .as_ref()
            .filter(|r| typed(&r.workload_types))
    {
        for name in &gpu_containers {
            let who = who(&template.spec, name);
            match probe(spec, name, "startupProbe") {
                None => out.push(Problem::NoStartupProbe {
                    who,
                    label: label.clone(),
                    min: rule.failure_budget(),
                }),
                Some(p) => {
                    let threshold = p.failure_threshold.unwrap_or(DEFAULT_FAILURE_THRESHOLD);
                    let period = p.period_seconds.unwrap_or(DEFAULT_PERIOD_SECONDS);
                    let budget = threshold.saturating_mul(period);
                    if budget < rule.failure_budget() {
                        out.push(Problem::ShortStartupProbe {
                            who,
                            threshold,
                            period,
                            budget,
                            min: rule.failure_budget(),
                            raise_to: rule.failure_budget().div_ceil(period.max(1)),
                        });
                    }
                }
            }
        }
    }
    if is_kind(workload, "apps", "Deployment")
        && let Some(rule) = rules
            .max_unavailable
            .as_ref()
            .filter(|r| typed(&r.workload_types))
    {
        out.extend(rollout_problem(object, rule.max.unwrap_or(0), &label));
    }
    if let Some(pointer) = deadline_pointer(workload)
        && let Some(rule) = rules
            .active_deadline
            .as_ref()
            .filter(|r| typed(&r.workload_types))
    {
        let field = field_of(pointer);
        match object.at(pointer) {
            None | Some(Value::Null) => out.push(Problem::NoActiveDeadline {
                field,
                kind: workload.kind.clone(),
                label: label.clone(),
                max: rule.max_seconds,
            }),
            Some(v) => match v.as_u64() {
                Some(seconds) => {
                    if let Some(max) = rule.max_seconds.filter(|m| seconds > *m) {
                        out.push(Problem::ActiveDeadlineTooLong {
                            field,
                            seconds,
                            max,
                            label: label.clone(),
                        });
                    }
                }
                None => out.push(Problem::NoActiveDeadline {
                    field,
                    kind: workload.kind.clone(),
                    label: label.clone(),
                    max: rule.max_seconds,
                }),
            },
        }
    }
    if let Some(rule) = rules
        .shared_memory
        .as_ref()
        .filter(|r| typed(&r.workload_types))
        && gpus.total() >= rule.shm_min_gpus()
    {
        out.extend(shared_memory_problems(
            spec,
            &template.spec,
            &gpu_containers,
            gpus.total(),
            rule,
        ));
    }
    out
}

/// How a container is named in messages.
fn who(spec: &PodSpec, name: &str) -> String {
    super::hygiene::who(spec, name)
}

/// The raw JSON of the container `name` of the PodSpec `spec`: in `containers`, or one of
/// the single containers a custom kind keeps beside them (KServe's `model`, ...), named
/// or keyed `name`.
fn container<'a>(spec: &'a Value, name: &str) -> Option<&'a Value> {
    let named = |c: &&Value| c.get("name").and_then(Value::as_str) == Some(name);
    if let Some(c) = spec
        .get("containers")
        .and_then(Value::as_array)
        .and_then(|list| list.iter().find(named))
    {
        return Some(c);
    }
    spec.as_object()?.iter().find_map(|(key, value)| {
        (value.is_object() && (named(&value) || key == name && value.get("name").is_none()))
            .then_some(value)
    })
}

/// The fields of a probe the rules read.
#[derive(Debug, Default)]
struct Probe {
    failure_threshold: Option<u64>,
    period_seconds: Option<u64>,
}

/// Container `name`'s probe `kind` (`readinessProbe`), when set to an object.
fn probe(spec: &Value, name: &str, kind: &str) -> Option<Probe> {
    let value = container(spec, name)?.get(kind)?;
    if !value.is_object() {
        return None;
    }
    // A field of the wrong type reads as unset: the API server refuses such a probe anyway.
    let number = |key: &str| value.get(key).and_then(Value::as_u64);
    Some(Probe {
        failure_threshold: number("failureThreshold"),
        period_seconds: number("periodSeconds"),
    })
}

/// An int-or-percent of a rolling update, resolved against `replicas` (percentages
/// rounded up or down as Kubernetes does).
fn resolve(value: &Value, replicas: u64, round_up: bool) -> Result<u64, String> {
    match value {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| format!("must be a non-negative integer or a percentage, got {n}")),
        Value::String(s) => {
            let Some(percent) = s.strip_suffix('%').and_then(|p| p.parse::<u64>().ok()) else {
                return s.parse::<u64>().map_err(|_| {
                    format!("must be an integer or a percentage like 25%, got '{s}'")
                });
            };
            let scaled = percent.saturating_mul(replicas);
            Ok(if round_up {
                scaled.div_ceil(100)
            } else {
                scaled / 100
            })
        }
        other => Err(format!("must be an integer or a percentage, got {other}")),
    }
}

/// How many pods a rollout of the Deployment `object` takes down, by Kubernetes' rules,
/// against `max`.
fn rollout_problem(object: &Value, max: u64, label: &str) -> Option<Problem> {
    let replicas = object
        .at("/spec/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(1);
    let strategy = object.at("/spec/strategy").unwrap_or(&Value::Null);
    if strategy.get("type").and_then(Value::as_str) == Some("Recreate") {
        return (replicas > max).then(|| Problem::RecreateStrategy {
            replicas,
            label: label.to_string(),
        });
    }
    let rolling = strategy.get("rollingUpdate").unwrap_or(&Value::Null);
    let unavailable_value = rolling
        .get("maxUnavailable")
        .filter(|v| !v.is_null())
        .cloned()
        .unwrap_or_else(|| Value::from(DEFAULT_MAX_UNAVAILABLE));
    let surge_value = rolling
        .get("maxSurge")
        .filter(|v| !v.is_null())
        .cloned()
        .unwrap_or_else(|| Value::from(DEFAULT_MAX_SURGE));
    let field = "spec.strategy.rollingUpdate.maxUnavailable";
    let unavailable = match resolve(&unavailable_value, replicas, false) {
        Ok(n) => n,
        Err(e) => {
            return Some(Problem::BadRollout {
                field: field.into(),
                error: e,
            });
        }
    };
    let surge = match resolve(&surge_value, replicas, true) {
        Ok(n) => n,
        Err(e) => {
            return Some(Problem::BadRollout {
                field: "spec.strategy.rollingUpdate.maxSurge".into(),
                error: e,
            });
        }
    };
    // The Deployment controller cannot make progress with neither: it takes one down.
    let down = if unavailable == 0 && surge == 0 {
        1
    } else {
        unavailable
    };
    (down > max).then(|| Problem::RolloutTakesPodsDown {
        value: match &unavailable_value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        },
        unset: rolling.get("maxUnavailable").is_none_or(Value::is_null),
        down,
        replicas,
        forced: unavailable == 0 && surge == 0,
        max,
        label: label.to_string(),
    })
}

fn shared_memory_problems(
    spec: &Value,
    pod: &PodSpec,
    gpu_containers: &[&str],
    gpus: u64,
    rule: &Rule,
) -> Vec<Problem> {
    let min = Quantity::parse(rule.shm_size()).ok();
    let volumes: &[Value] = spec
        .get("volumes")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let memory_limit = pod_memory_limit(spec);
    let mut out = Vec::new();
    for name in gpu_containers {
        let who = who(pod, name);
        let mount = container(spec, name)
            .and_then(|c| c.get("volumeMounts"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|m| {
                m.get("mountPath")
                    .and_then(Value::as_str)
                    .is_some_and(|p| p.trim_end_matches('/') == SHM_PATH)
            });
        let Some(volume_name) = mount.and_then(|m| m.get("name")).and_then(Value::as_str) else {
            out.push(Problem::NoSharedMemory {
                who,
                gpus,
                min: rule.shm_size().to_string(),
            });
            continue;
        };
        // Only an emptyDir in memory: any other source (hostPath, a disk emptyDir...) is not.
        let empty_dir = volumes
            .iter()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(volume_name))
            .and_then(|v| v.get("emptyDir"))
            .filter(|e| e.get("medium").and_then(Value::as_str) == Some("Memory"));
        let Some(empty_dir) = empty_dir else {
            out.push(Problem::SharedMemoryNotInMemory {
                who,
                volume: volume_name.to_string(),
                min: rule.shm_size().to_string(),
            });
            continue;
        };
        // Without sizeLimit, a memory-backed emptyDir is bounded by the pod's memory limit.
        let (size_text, size) = match quantity_text(empty_dir.get("sizeLimit")) {
            Some(q) => (
                Some(q.clone()),
                Quantity::parse(&q).ok().map(Quantity::nanos),
            ),
            None => (None, memory_limit),
        };
        if let (Some(size), Some(min)) = (size, min)
            && size < min.nanos()
        {
            out.push(Problem::SharedMemoryTooSmall {
                who,
                volume: volume_name.to_string(),
                size: size_text.unwrap_or_else(|| "the pod's memory limit".into()),
                min: rule.shm_size().to_string(),
            });
        }
    }
    out
}

/// The pod's memory limit (in nano-bytes), when every app container sets one: the sum.
fn pod_memory_limit(spec: &Value) -> Option<i128> {
    let containers = spec.get("containers").and_then(Value::as_array)?;
    let mut total: i128 = 0;
    for c in containers {
        let text = quantity_text(c.at("/resources/limits/memory"))?;
        total = total.saturating_add(Quantity::parse(&text).ok()?.nanos());
    }
    Some(total)
}

/// A quantity as JSON holds it: a string, or a bare number.
fn quantity_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
