//! The autoscalers the policy reads: what they scale, how far, and on what signal.
//!
//! - `autoscaling` HorizontalPodAutoscaler (v2, and v1's `targetCPUUtilizationPercentage`):
//!   `spec.scaleTargetRef`, `spec.maxReplicas`, `spec.metrics` (none means the default,
//!   80% average cpu utilisation).
//! - KEDA `keda.sh` ScaledObject: `spec.scaleTargetRef` (apiVersion `apps/v1` and kind
//!   `Deployment` by default), `spec.maxReplicaCount` (default 100, and
//!   `spec.fallback.replicas` when larger: KEDA scales to it when its scalers fail),
//!   `spec.triggers`.
//! - KEDA ScaledJob: its Job is inline (`spec.jobTargetRef`, a JobSpec), at most
//!   `spec.maxReplicaCount` (default 100) Jobs at once, `spec.triggers`.
//!
//! Only the fields the rules need are read, each checked for its type, so a malformed
//! autoscaler is a rejection that names the field.

use crate::workload::At;
use serde_json::Value;

/// KEDA's default `maxReplicaCount` (ScaledObject and ScaledJob).
pub const KEDA_DEFAULT_MAX_REPLICAS: u64 = 100;

/// The kinds of autoscaler the policy knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoscalerKind {
    HorizontalPodAutoscaler,
    ScaledObject,
    ScaledJob,
}

impl AutoscalerKind {
    /// The kind of `object` (by its apiVersion group and kind), `None` for anything else.
    pub fn of(object: &Value) -> Option<AutoscalerKind> {
        let kind = object.get("kind").and_then(Value::as_str)?;
        let api_version = object.get("apiVersion").and_then(Value::as_str)?;
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        Some(match (group, kind) {
            ("autoscaling", "HorizontalPodAutoscaler") => AutoscalerKind::HorizontalPodAutoscaler,
            ("keda.sh", "ScaledObject") => AutoscalerKind::ScaledObject,
            ("keda.sh", "ScaledJob") => AutoscalerKind::ScaledJob,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AutoscalerKind::HorizontalPodAutoscaler => "HorizontalPodAutoscaler",
            AutoscalerKind::ScaledObject => "ScaledObject",
            AutoscalerKind::ScaledJob => "ScaledJob",
        }
    }

    /// The field holding the most replicas, for messages.
    pub fn max_field(self) -> &'static str {
        match self {
            AutoscalerKind::HorizontalPodAutoscaler => "maxReplicas",
            AutoscalerKind::ScaledObject | AutoscalerKind::ScaledJob => "maxReplicaCount",
        }
    }

    /// The field holding the fewest replicas, for messages.
    pub fn min_field(self) -> &'static str {
        match self {
            AutoscalerKind::HorizontalPodAutoscaler => "minReplicas",
            AutoscalerKind::ScaledObject | AutoscalerKind::ScaledJob => "minReplicaCount",
        }
    }

    /// What one replica is: a pod of the target, or one Job of a ScaledJob.
    pub fn unit(self) -> &'static str {
        match self {
            AutoscalerKind::ScaledJob => "job",
            _ => "replica",
        }
    }

    pub fn is_keda(self) -> bool {
        self != AutoscalerKind::HorizontalPodAutoscaler
    }
}

/// `scaleTargetRef`: the workload an autoscaler scales.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
}

impl TargetRef {
    /// The API group (`apps`; `""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }
}

/// What the autoscaler scales on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// CPU or memory of the pods (HPA `Resource` / `ContainerResource` metrics, KEDA
    /// `cpu` / `memory` triggers): `cpu` or `memory`.
    PodResource(String),
    /// Anything else (Pods, Object and External metrics, every other KEDA scaler), with a
    /// short description for audit annotations.
    Load(String),
}

/// The fields of an autoscaler the rules read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Autoscaler {
    pub kind: AutoscalerKind,
    pub name: String,
    pub namespace: String,
    /// The workload it scales; `None` for a ScaledJob, whose Job is inline.
    pub target: Option<TargetRef>,
    /// A ScaledJob's Job, as a `batch/v1` Job object built from `spec.jobTargetRef`.
    pub inline_job: Option<Value>,
    /// The most replicas (HPA, ScaledObject) or Jobs (ScaledJob) it can set.
    pub max_replicas: u64,
    /// Where `max_replicas` comes from when it is not the max field itself
    /// (`spec.fallback.replicas`, or KEDA's default).
    pub max_from: MaxFrom,
    pub min_replicas: u64,
    /// Its metrics or triggers, in order. Empty for an HPA means its default (cpu).
    pub signals: Vec<Signal>,
    /// True when an HPA lists no metrics (its default is 80% average cpu utilisation).
    pub default_metrics: bool,
    /// The ScaledObject that created this HPA (KEDA makes one `keda-hpa-<name>` per
    /// ScaledObject), from its controller ownerReference.
    pub keda_owner: Option<String>,
}

/// Where an autoscaler's most replicas come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxFrom {
    /// The max field as written.
    Field,
    /// KEDA's default (the field is absent).
    KedaDefault,
    /// `spec.fallback.replicas`, above `maxReplicaCount`.
    Fallback,
}

impl Autoscaler {
    /// `HorizontalPodAutoscaler ml/llm`, for messages.
    pub fn display(&self) -> String {
        format!("{} {}/{}", self.kind.as_str(), self.namespace, self.name)
    }

    /// `maxReplicas 40`, `maxReplicaCount 100 (KEDA's default)`, `fallback.replicas 12
    /// (above maxReplicaCount 8)`.
    pub fn max_text(&self) -> String {
        match self.max_from {
            MaxFrom::Field => format!("{} {}", self.kind.max_field(), self.max_replicas),
            MaxFrom::KedaDefault => format!(
                "{} {} (KEDA's default)",
                self.kind.max_field(),
                self.max_replicas
            ),
            MaxFrom::Fallback => format!("fallback.replicas {}", self.max_replicas),
        }
    }

    /// True when every metric or trigger is the pods' cpu or memory.
    pub fn resource_only(&self) -> bool {
        self.signals
            .iter()
            .all(|s| matches!(s, Signal::PodResource(_)))
    }

    /// `cpu`, `cpu and memory`, `memory`: the resources a resource-only autoscaler uses.
    pub fn resources_used(&self) -> String {
        let mut names: Vec<&str> = self
            .signals
            .iter()
            .filter_map(|s| match s {
                Signal::PodResource(r) => Some(r.as_str()),
                Signal::Load(_) => None,
            })
            .collect();
        if names.is_empty() {
            // An HPA without metrics scales on cpu.
            names.push("cpu");
        }
        names.sort_unstable();
        names.dedup();
        names.join(" and ")
    }
}

/// Reads an autoscaler from an admitted object of a kind [`AutoscalerKind::of`] knows.
/// Errors name the field (`spec.maxReplicas: must be a positive integer, got "ten"`).
pub fn read(object: &Value, kind: AutoscalerKind) -> Result<Autoscaler, String> {
    let name = str_at(object, "/metadata/name", "metadata.name")?.unwrap_or_default();
    let namespace =
        str_at(object, "/metadata/namespace", "metadata.namespace")?.unwrap_or_default();
    let spec = match object.get("spec") {
        Some(Value::Object(_)) => &object["spec"],
        None | Some(Value::Null) => return Err("spec: is missing".into()),
        Some(other) => return Err(format!("spec: must be an object, got {}", short(other))),
    };
    let mut autoscaler = Autoscaler {
        kind,
        name,
        namespace,
        target: None,
        inline_job: None,
        max_replicas: 0,
        max_from: MaxFrom::Field,
        min_replicas: 0,
        signals: Vec::new(),
        default_metrics: false,
        keda_owner: None,
    };
    match kind {
        AutoscalerKind::HorizontalPodAutoscaler => read_hpa(object, spec, &mut autoscaler)?,
        AutoscalerKind::ScaledObject | AutoscalerKind::ScaledJob => {
            read_keda(spec, &mut autoscaler)?
        }
    }
    Ok(autoscaler)
}

fn read_hpa(object: &Value, spec: &Value, a: &mut Autoscaler) -> Result<(), String> {
    a.target = Some(target_ref(spec, None)?);
    a.max_replicas = match u64_at(spec, "/maxReplicas", "spec.maxReplicas")? {
        Some(n) if n > 0 => n,
        Some(n) => return Err(format!("spec.maxReplicas: must be at least 1, got {n}")),
        None => return Err("spec.maxReplicas: is missing".into()),
    };
    a.min_replicas = u64_at(spec, "/minReplicas", "spec.minReplicas")?.unwrap_or(1);
    // autoscaling/v1 has a single cpu target; v2 a list of metrics.
    if spec.get("metrics").is_none_or(Value::is_null) {
        a.default_metrics = spec
            .get("targetCPUUtilizationPercentage")
            .is_none_or(Value::is_null);
        a.signals.push(Signal::PodResource("cpu".into()));
    } else {
        let metrics = array_at(spec, "/metrics", "spec.metrics")?;
        if metrics.is_empty() {
            a.default_metrics = true;
            a.signals.push(Signal::PodResource("cpu".into()));
        }
        for (i, metric) in metrics.iter().enumerate() {
            a.signals.push(hpa_signal(metric, i)?);
        }
    }
    a.keda_owner = object
        .at("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|o| {
            o.get("controller").and_then(Value::as_bool) == Some(true)
                && o.get("kind").and_then(Value::as_str) == Some("ScaledObject")
                && o.get("apiVersion")
                    .and_then(Value::as_str)
                    .is_some_and(|v| v.starts_with("keda.sh/"))
        })
        .and_then(|o| o.get("name").and_then(Value::as_str))
        .map(str::to_string);
    Ok(())
}

/// One entry of an HPA's `spec.metrics`.
fn hpa_signal(metric: &Value, i: usize) -> Result<Signal, String> {
    let field = format!("spec.metrics[{i}]");
    if !metric.is_object() {
        return Err(format!("{field}: must be an object, got {}", short(metric)));
    }
    let kind = str_at(metric, "/type", &format!("{field}.type"))?.unwrap_or_default();
    let resource = |key: &str| -> Result<Signal, String> {
        let name = str_at(
            metric,
            &format!("/{key}/name"),
            &format!("{field}.{key}.name"),
        )?
        .ok_or_else(|| {
            format!("{field}.{key}.name: is missing (the resource a {kind} metric scales on)")
        })?;
        Ok(if matches!(name.as_str(), "cpu" | "memory") {
            Signal::PodResource(name)
        } else {
            Signal::Load(format!("{kind} {name}"))
        })
    };
    let metric_name = |key: &str| -> Result<String, String> {
        Ok(str_at(
            metric,
            &format!("/{key}/metric/name"),
            &format!("{field}.{key}.metric.name"),
        )?
        .unwrap_or_default())
    };
    match kind.as_str() {
        "Resource" => resource("resource"),
        "ContainerResource" => resource("containerResource"),
        "Pods" => Ok(Signal::Load(format!("Pods {}", metric_name("pods")?))),
        "Object" => Ok(Signal::Load(format!("Object {}", metric_name("object")?))),
        "External" => Ok(Signal::Load(format!(
            "External {}",
            metric_name("external")?
        ))),
        "" => Err(format!(
            "{field}.type: is missing (Resource, ContainerResource, Pods, Object or External)"
        )),
        other => Err(format!(
            "{field}.type: '{other}' is not Resource, ContainerResource, Pods, Object or External"
        )),
    }
}

fn read_keda(spec: &Value, a: &mut Autoscaler) -> Result<(), String> {
    if a.kind == AutoscalerKind::ScaledJob {
        let job = match spec.get("jobTargetRef") {
            Some(Value::Object(_)) => spec["jobTargetRef"].clone(),
            None | Some(Value::Null) => return Err("spec.jobTargetRef: is missing".into()),
            Some(other) => {
                return Err(format!(
                    "spec.jobTargetRef: must be an object (a JobSpec), got {}",
                    short(other)
                ));
            }
        };
        a.inline_job = Some(serde_json::json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": a.name, "namespace": a.namespace},
            "spec": job,
        }));
    } else {
        a.target = Some(target_ref(spec, Some(("apps/v1", "Deployment")))?);
    }
    let max = u64_at(spec, "/maxReplicaCount", "spec.maxReplicaCount")?;
    a.max_replicas = max.unwrap_or(KEDA_DEFAULT_MAX_REPLICAS);
    a.max_from = if max.is_some() {
        MaxFrom::Field
    } else {
        MaxFrom::KedaDefault
    };
    a.min_replicas = u64_at(spec, "/minReplicaCount", "spec.minReplicaCount")?.unwrap_or(0);
    if a.kind == AutoscalerKind::ScaledObject
        && let Some(fallback) = u64_at(spec, "/fallback/replicas", "spec.fallback.replicas")?
        && fallback > a.max_replicas
    {
        a.max_replicas = fallback;
        a.max_from = MaxFrom::Fallback;
    }
    let triggers = array_at(spec, "/triggers", "spec.triggers")?;
    if triggers.is_empty() {
        return Err("spec.triggers: give at least one trigger (KEDA requires one)".into());
    }
    for (i, trigger) in triggers.iter().enumerate() {
        let kind = str_at(trigger, "/type", &format!("spec.triggers[{i}].type"))?
            .ok_or_else(|| format!("spec.triggers[{i}].type: is missing"))?;
        a.signals
            .push(if matches!(kind.as_str(), "cpu" | "memory") {
                Signal::PodResource(kind)
            } else {
                Signal::Load(kind)
            });
    }
    Ok(())
}

fn target_ref(spec: &Value, default: Option<(&str, &str)>) -> Result<TargetRef, String> {
    let field = "spec.scaleTargetRef";
    match spec.get("scaleTargetRef") {
        Some(Value::Object(_)) => {}
        None | Some(Value::Null) => return Err(format!("{field}: is missing")),
        Some(other) => return Err(format!("{field}: must be an object, got {}", short(other))),
    }
    let r = &spec["scaleTargetRef"];
    let name = str_at(r, "/name", "spec.scaleTargetRef.name")?
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("{field}.name: is missing"))?;
    let kind = match (
        str_at(r, "/kind", "spec.scaleTargetRef.kind")?.filter(|k| !k.is_empty()),
        default,
    ) {
        (Some(k), _) => k,
        (None, Some((_, k))) => k.to_string(),
        (None, None) => return Err(format!("{field}.kind: is missing")),
    };
    let api_version = match (
        str_at(r, "/apiVersion", "spec.scaleTargetRef.apiVersion")?.filter(|v| !v.is_empty()),
        default,
    ) {
        (Some(v), _) => v,
        (None, Some((v, _))) => v.to_string(),
        // An HPA may leave apiVersion out; the built-in scalable kinds have one group each.
        (None, None) => match kind.as_str() {
            "Deployment" | "StatefulSet" | "ReplicaSet" => "apps/v1".into(),
            "ReplicationController" => "v1".into(),
            _ => {
                return Err(format!(
                    "{field}.apiVersion: is missing (the group/version of {kind})"
                ));
            }
        },
    };
    Ok(TargetRef {
        api_version,
        kind,
        name,
    })
}

/// A string at `pointer`; `None` when absent or null; an error naming `field` for
/// another type.
fn str_at(value: &Value, pointer: &str, field: &str) -> Result<Option<String>, String> {
    match value.at(pointer) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("{field}: must be a string, got {}", short(other))),
    }
}

/// A non-negative integer at `pointer` (`field` names it in errors).
fn u64_at(value: &Value, pointer: &str, field: &str) -> Result<Option<u64>, String> {
    match value.at(pointer) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("{field}: must be a non-negative integer, got {}", short(v))),
    }
}

fn array_at<'a>(value: &'a Value, pointer: &str, field: &str) -> Result<&'a [Value], String> {
    match value.at(pointer) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(other) => Err(format!("{field}: must be a list, got {}", short(other))),
    }
}

/// A value for a message, cut to a readable length.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.len() <= 60 {
        return text;
    }
    let mut end = 57;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn hpa(spec: Value) -> Value {
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
               "metadata": {"name": "llm", "namespace": "ml"}, "spec": spec})
    }

    fn keda(kind: &str, spec: Value) -> Value {
        json!({"apiVersion": "keda.sh/v1alpha1", "kind": kind,
               "metadata": {"name": "llm", "namespace": "ml"}, "spec": spec})
    }

    fn target() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm"})
    }

    fn read_any(object: &Value) -> Result<Autoscaler, String> {
        read(object, AutoscalerKind::of(object).unwrap())
    }

    #[test]
    fn kinds() {
        assert_eq!(
            AutoscalerKind::of(&hpa(json!({}))),
            Some(AutoscalerKind::HorizontalPodAutoscaler)
        );
        assert_eq!(
            AutoscalerKind::of(&keda("ScaledJob", json!({}))),
            Some(AutoscalerKind::ScaledJob)
        );
        assert_eq!(
            AutoscalerKind::of(&json!({"apiVersion": "apps/v1", "kind": "Deployment"})),
            None
        );
        assert_eq!(
            AutoscalerKind::of(&json!({"apiVersion": "example.com/v1", "kind": "ScaledObject"})),
            None
        );
    }

    #[test]
    fn hpa_with_cpu_and_external_metrics() {
        let a = read_any(&hpa(json!({
            "scaleTargetRef": target(), "minReplicas": 2, "maxReplicas": 10,
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
                {"type": "External", "external": {"metric": {"name": "vllm:num_requests_waiting"}, "target": {"type": "AverageValue", "averageValue": "5"}}}
            ]
        })))
        .unwrap();
        assert_eq!(a.display(), "HorizontalPodAutoscaler ml/llm");
        assert_eq!(
            a.target,
            Some(TargetRef {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: "llm".into()
            })
        );
        assert_eq!((a.min_replicas, a.max_replicas), (2, 10));
        assert_eq!(a.max_text(), "maxReplicas 10");
        assert_eq!(
            a.signals,
            vec![
                Signal::PodResource("cpu".into()),
                Signal::Load("External vllm:num_requests_waiting".into())
            ]
        );
        assert!(!a.resource_only() && !a.default_metrics);
    }

    #[rstest]
    #[case::no_metrics(json!(null), true, "cpu")]
    #[case::empty_metrics(json!([]), true, "cpu")]
    #[case::memory(json!([{"type": "Resource", "resource": {"name": "memory"}}]), false, "memory")]
    #[case::container_cpu_and_memory(json!([
        {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "server"}},
        {"type": "Resource", "resource": {"name": "memory"}},
        {"type": "Resource", "resource": {"name": "cpu"}}
    ]), false, "cpu and memory")]
    fn hpa_resource_only(#[case] metrics: Value, #[case] default: bool, #[case] used: &str) {
        let a = read_any(&hpa(
            json!({"scaleTargetRef": target(), "maxReplicas": 4, "metrics": metrics}),
        ))
        .unwrap();
        assert!(a.resource_only());
        assert_eq!(a.default_metrics, default);
        assert_eq!(a.resources_used(), used);
        assert_eq!(a.min_replicas, 1);
    }

    #[test]
    fn hpa_v1_has_a_cpu_target() {
        let a = read_any(
            &json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "llm", "namespace": "ml"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "llm"}, "maxReplicas": 3,
                     "targetCPUUtilizationPercentage": 70}}),
        )
        .unwrap();
        assert!(a.resource_only() && !a.default_metrics);
        // apiVersion left out: the built-in kind's group.
        assert_eq!(a.target.unwrap().api_version, "apps/v1");
    }

    #[test]
    fn hpa_created_by_keda() {
        let mut object = hpa(json!({"scaleTargetRef": target(), "maxReplicas": 4}));
        object["metadata"]["ownerReferences"] = json!([
            {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "name": "llm", "controller": true}
        ]);
        assert_eq!(
            read_any(&object).unwrap().keda_owner.as_deref(),
            Some("llm")
        );
        object["metadata"]["ownerReferences"][0]["controller"] = json!(false);
        assert_eq!(read_any(&object).unwrap().keda_owner, None);
    }

    #[test]
    fn scaled_object_defaults_and_fallback() {
        let a = read_any(&keda(
            "ScaledObject",
            json!({"scaleTargetRef": {"name": "llm"}, "triggers": [{"type": "prometheus", "metadata": {}}]}),
        ))
        .unwrap();
        assert_eq!(a.target.as_ref().unwrap().kind, "Deployment");
        assert_eq!(a.target.as_ref().unwrap().group(), "apps");
        assert_eq!((a.min_replicas, a.max_replicas), (0, 100));
        assert_eq!(a.max_text(), "maxReplicaCount 100 (KEDA's default)");
        assert_eq!(a.signals, vec![Signal::Load("prometheus".into())]);

        let a = read_any(&keda(
            "ScaledObject",
            json!({"scaleTargetRef": {"name": "llm"}, "maxReplicaCount": 8,
                   "fallback": {"failureThreshold": 3, "replicas": 12},
                   "triggers": [{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}]}),
        ))
        .unwrap();
        assert_eq!(a.max_replicas, 12);
        assert_eq!(a.max_text(), "fallback.replicas 12");
        assert!(a.resource_only());
        assert_eq!(a.resources_used(), "cpu");
    }

    #[test]
    fn scaled_job_carries_its_job() {
        let a = read_any(&keda(
            "ScaledJob",
            json!({"jobTargetRef": {"parallelism": 2, "template": {"spec": {"containers": []}}},
                   "maxReplicaCount": 5, "triggers": [{"type": "rabbitmq"}]}),
        ))
        .unwrap();
        assert_eq!(a.target, None);
        assert_eq!(a.kind.unit(), "job");
        let job = a.inline_job.unwrap();
        assert_eq!(job["kind"], "Job");
        assert_eq!(job["spec"]["parallelism"], 2);
        assert_eq!(a.max_replicas, 5);
    }

    #[rstest]
    #[case::no_spec(hpa(json!(null)), "spec: is missing")]
    #[case::spec_list(hpa(json!([])), "spec: must be an object, got []")]
    #[case::no_target(hpa(json!({"maxReplicas": 3})), "spec.scaleTargetRef: is missing")]
    #[case::no_target_name(hpa(json!({"scaleTargetRef": {"kind": "Deployment"}, "maxReplicas": 3})), "spec.scaleTargetRef.name: is missing")]
    #[case::target_name_number(hpa(json!({"scaleTargetRef": {"kind": "Deployment", "name": 3}, "maxReplicas": 3})), "scaleTargetRef.name: must be a string, got 3")]
    #[case::custom_without_version(hpa(json!({"scaleTargetRef": {"kind": "LeaderWorkerSet", "name": "x"}, "maxReplicas": 3})), "spec.scaleTargetRef.apiVersion: is missing")]
    #[case::no_max(hpa(json!({"scaleTargetRef": target()})), "spec.maxReplicas: is missing")]
    #[case::max_text(hpa(json!({"scaleTargetRef": target(), "maxReplicas": "ten"})), "spec.maxReplicas: must be a non-negative integer, got \"ten\"")]
    #[case::max_zero(hpa(json!({"scaleTargetRef": target(), "maxReplicas": 0})), "spec.maxReplicas: must be at least 1, got 0")]
    #[case::metrics_map(hpa(json!({"scaleTargetRef": target(), "maxReplicas": 2, "metrics": {}})), "spec.metrics: must be a list, got {}")]
    #[case::metric_type(hpa(json!({"scaleTargetRef": target(), "maxReplicas": 2, "metrics": [{"type": "Custom"}]})), "spec.metrics[0].type: 'Custom' is not Resource")]
    #[case::metric_no_resource(hpa(json!({"scaleTargetRef": target(), "maxReplicas": 2, "metrics": [{"type": "Resource"}]})), "spec.metrics[0].resource.name: is missing")]
    #[case::keda_no_triggers(keda("ScaledObject", json!({"scaleTargetRef": {"name": "x"}})), "spec.triggers: give at least one trigger")]
    #[case::keda_trigger_type(keda("ScaledObject", json!({"scaleTargetRef": {"name": "x"}, "triggers": [{}]})), "spec.triggers[0].type: is missing")]
    #[case::keda_max(keda("ScaledObject", json!({"scaleTargetRef": {"name": "x"}, "maxReplicaCount": -1, "triggers": [{"type": "cpu"}]})), "spec.maxReplicaCount: must be a non-negative integer, got -1")]
    #[case::scaled_job_no_job(keda("ScaledJob", json!({"triggers": [{"type": "cpu"}]})), "spec.jobTargetRef: is missing")]
    fn malformed_autoscalers_name_the_field(#[case] object: Value, #[case] start: &str) {
        let err = read_any(&object).unwrap_err();
        assert!(err.contains(start), "{err}");
    }
}
