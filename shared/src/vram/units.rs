//! Serving units: the pods that hold one copy of a model together.
//!
//! A model must fit in the GPUs of one unit. How each kind is counted:
//!
//! | kind | one unit | copies |
//! |---|---|---|
//! | Pod, Deployment, StatefulSet, ReplicaSet, ReplicationController, DaemonSet, Job, CronJob | one pod of the template | `replicas` / `parallelism` / one per node: each must fit alone |
//! | LeaderWorkerSet | a group: the leader pod + `size - 1` worker pods (`size` pods of the worker template when there is no leader template) | `replicas` groups |
//! | KServe InferenceService | the predictor pod, plus `pipelineParallelSize - 1` pods of `workerSpec` (multi-node) | `minReplicas` |
//! | RayCluster | the whole cluster: the head pod + `replicas` pods of every worker group (vLLM places a model's tensor- and pipeline-parallel ranks over the cluster's GPUs) | one |
//! | PyTorchJob and other custom kinds | one pod of each template | each must fit alone |
//!
//! The number of copies does not matter here (a Deployment scaled to 0 is checked too: it
//! will be scaled up without passing admission again).

use crate::podspec::{Container, PodSpec};
use crate::workload::At;
use crate::workload::presets::KSERVE_MODEL_CONTAINERS;
use crate::workload::{CustomKind, PodTemplate, Workload, value_at};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;

const KSERVE_GROUP: &str = "serving.kserve.io";
const LWS_GROUP: &str = "leaderworkerset.x-k8s.io";
const RAY_GROUP: &str = "ray.io";

/// How a unit is made up, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitKind {
    /// One pod of a template.
    Pod,
    /// Pods of several templates (or several pods of one) serving one copy together.
    Group {
        /// `LeaderWorkerSet group`, `KServe multi-node predictor`, `RayCluster`.
        name: String,
    },
}

/// One template's part of a unit.
#[derive(Debug, Clone)]
pub struct Member<'w> {
    pub template: &'w PodTemplate,
    /// `leader`, `worker`, `head`, `pod`.
    pub role: &'static str,
    /// Pods of this template in one unit.
    pub pods: u64,
    /// The template's pod spec; a copy with KServe's model container added for an
    /// InferenceService predictor.
    pub spec: Cow<'w, PodSpec>,
    /// The model URI the template loads (KServe `storageUri`), with where it was found.
    pub storage_uri: Option<(String, String)>,
}

/// The pods that serve one copy of a model.
#[derive(Debug, Clone)]
pub struct Unit<'w> {
    pub kind: UnitKind,
    pub members: Vec<Member<'w>>,
}

impl Unit<'_> {
    /// Pods in the unit.
    pub fn pods(&self) -> u64 {
        self.members
            .iter()
            .fold(0u64, |a, m| a.saturating_add(m.pods))
    }

    /// Where the unit is, for messages: the template location, or the group's name.
    pub fn location(&self) -> String {
        match (&self.kind, self.members.first()) {
            (UnitKind::Pod, Some(m)) => m.template.location.clone(),
            (UnitKind::Group { name }, _) => name.clone(),
            (UnitKind::Pod, None) => "(no template)".into(),
        }
    }

    /// `1 leader + 3 workers`.
    pub fn composition(&self) -> String {
        let mut parts: Vec<(u64, &str)> = Vec::new();
        for m in self.members.iter().filter(|m| m.pods > 0) {
            match parts.iter_mut().find(|(_, r)| *r == m.role) {
                Some((n, _)) => *n = n.saturating_add(m.pods),
                None => parts.push((m.pods, m.role)),
            }
        }
        parts
            .iter()
            .map(|(n, role)| {
                if *n == 1 {
                    format!("1 {role}")
                } else {
                    format!("{n} {role}s")
                }
            })
            .collect::<Vec<_>>()
            .join(" + ")
    }
}

/// The units of `workload` (read from `object`, described by `custom`). Errors are messages
/// to deny with.
pub fn units<'w>(
    workload: &'w Workload,
    object: &Value,
    custom: &[CustomKind],
) -> Result<Vec<Unit<'w>>, String> {
    let mut singles = Vec::new();
    let mut group: Vec<Member<'w>> = Vec::new();
    let group_name = match (workload.group.as_str(), workload.kind.as_str()) {
        (LWS_GROUP, "LeaderWorkerSet") => {
            let size = object
                .at("/spec/leaderWorkerTemplate/size")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1);
            let has_leader = workload
                .templates
                .iter()
                .any(|t| t.spec_pointer == "/spec/leaderWorkerTemplate/leaderTemplate/spec");
            for t in &workload.templates {
                match t.spec_pointer.as_str() {
                    "/spec/leaderWorkerTemplate/leaderTemplate/spec" => {
                        group.push(member(t, "leader", 1, object, None)?)
                    }
                    "/spec/leaderWorkerTemplate/workerTemplate/spec" if has_leader => {
                        group.push(member(t, "worker", size - 1, object, None)?)
                    }
                    "/spec/leaderWorkerTemplate/workerTemplate/spec" => {
                        group.push(member(t, "pod", size, object, None)?)
                    }
                    _ => singles.push(member(t, "pod", 1, object, None)?),
                }
            }
            Some("the LeaderWorkerSet group".into())
        }
        (KSERVE_GROUP, "InferenceService") => {
            let pipeline = object
                .at("/spec/predictor/workerSpec/pipelineParallelSize")
                .and_then(Value::as_u64)
                .unwrap_or(2);
            // The model-server shortcuts (`model`, `huggingface`...) that the settings'
            // description already reads as containers (the preset reads them all); any other is
            // added here, so a hand-written description cannot hide `spec.predictor.model`'s GPUs.
            let read_by_workload: Vec<String> = custom
                .iter()
                .filter(|c| c.group == KSERVE_GROUP && c.kind == "InferenceService")
                .flat_map(CustomKind::locations)
                .filter(|l| l.path == "$.spec.predictor")
                .flat_map(|l| l.containers)
                .collect();
            for t in &workload.templates {
                match t.spec_pointer.as_str() {
                    "/spec/predictor" => {
                        group.push(member(t, "head", 1, object, Some(&read_by_workload))?)
                    }
                    "/spec/predictor/workerSpec" => group.push(member(
                        t,
                        "worker",
                        pipeline.saturating_sub(1).max(1),
                        object,
                        None,
                    )?),
                    _ => singles.push(member(t, "pod", 1, object, None)?),
                }
            }
            Some("the multi-node predictor".into())
        }
        (RAY_GROUP, "RayCluster") => {
            for t in &workload.templates {
                let role = if t.spec_pointer.starts_with("/spec/headGroupSpec") {
                    "head"
                } else {
                    "worker"
                };
                group.push(member(t, role, t.pods, object, None)?);
            }
            Some("the RayCluster".into())
        }
        _ => {
            for t in &workload.templates {
                singles.push(member(t, "pod", 1, object, None)?);
            }
            None
        }
    };
    let mut out = Vec::new();
    // A group of one pod is a pod (a KServe predictor without workerSpec, an LWS of size 1).
    if group.iter().filter(|m| m.pods > 0).count() == 1
        && group.iter().fold(0u64, |a, m| a.saturating_add(m.pods)) == 1
    {
        group.retain(|m| m.pods > 0);
        out.push(Unit {
            kind: UnitKind::Pod,
            members: group,
        });
    } else if !group.is_empty() {
        out.push(Unit {
            kind: UnitKind::Group {
                name: group_name.unwrap_or_else(|| "the group".into()),
            },
            members: group,
        });
    }
    out.extend(singles.into_iter().map(|m| Unit {
        kind: UnitKind::Pod,
        members: vec![m],
    }));
    Ok(out)
}

/// One template's part of a unit. For a KServe predictor, `kserve` lists the model-server
/// fields the workload reader already turned into containers; the others present are added,
/// and the first `storageUri` is read.
fn member<'w>(
    template: &'w PodTemplate,
    role: &'static str,
    pods: u64,
    object: &Value,
    kserve: Option<&[String]>,
) -> Result<Member<'w>, String> {
    let mut spec = Cow::Borrowed(&template.spec);
    let mut storage_uri = None;
    if let Some(read_by_workload) = kserve {
        let template_spec = value_at(object, &template.spec_pointer);
        for field in KSERVE_MODEL_CONTAINERS {
            let Some(value) = template_spec
                .and_then(|s| s.get(field))
                .filter(|v| !v.is_null())
            else {
                continue;
            };
            let location = format!("{}.{field}", template.location);
            if !read_by_workload.iter().any(|f| f == field) {
                let mut container =
                    Container::deserialize(value).map_err(|e| format!("{location}: {e}"))?;
                if container.name.is_empty() {
                    container.name = (*field).to_string();
                }
                spec.to_mut().containers.push(container);
            }
            if storage_uri.is_none()
                && let Some(uri) = value.get("storageUri").and_then(Value::as_str)
                && !uri.trim().is_empty()
            {
                storage_uri = Some((uri.trim().to_string(), format!("{location}.storageUri")));
            }
        }
    }
    Ok(Member {
        template,
        role,
        pods,
        spec,
        storage_uri,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::presets;
    use serde_json::json;

    fn gpu(n: u32) -> Value {
        json!({"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": n.to_string()}}}]})
    }

    type Summary = (UnitKind, String, u64, Vec<(&'static str, u64)>);

    fn plan(object: &Value) -> Vec<Summary> {
        let w = Workload::from_object(object, &presets::all()).unwrap();
        units(&w, object, &presets::all())
            .unwrap()
            .iter()
            .map(|u| {
                (
                    u.kind.clone(),
                    u.composition(),
                    u.pods(),
                    u.members.iter().map(|m| (m.role, m.pods)).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn a_deployment_is_one_pod_whatever_its_replicas() {
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "spec": {"replicas": 5, "template": {"spec": gpu(2)}}});
        assert_eq!(
            plan(&d),
            vec![(UnitKind::Pod, "1 pod".to_string(), 1, vec![("pod", 1)])]
        );
    }

    #[test]
    fn leader_worker_set_group_is_leader_plus_workers() {
        let lws = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "spec": {"replicas": 3, "leaderWorkerTemplate": {"size": 4,
                "leaderTemplate": {"spec": gpu(2)}, "workerTemplate": {"spec": gpu(2)}}}});
        let p = plan(&lws);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].1, "1 leader + 3 workers");
        assert_eq!(p[0].2, 4);
        assert!(matches!(p[0].0, UnitKind::Group { .. }));
    }

    #[test]
    fn leader_worker_set_without_leader_template_is_size_pods() {
        let lws = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "spec": {"leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": gpu(8)}}}});
        assert_eq!(plan(&lws)[0].1, "2 pods");
        let single = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": gpu(8)}}}});
        assert_eq!(plan(&single)[0].0, UnitKind::Pod, "size 1 is a single pod");
    }

    #[test]
    fn kserve_multi_node_is_head_plus_workers_and_reads_the_model_container() {
        let isvc = json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "llama"},
            "spec": {"predictor": {
                "model": {"modelFormat": {"name": "huggingface"}, "storageUri": "hf://meta-llama/Llama-3.1-70B",
                          "resources": {"limits": {"nvidia.com/gpu": "4"}}},
                "workerSpec": {"pipelineParallelSize": 3, "containers": [{"name": "w", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}}});
        let w = Workload::from_object(&isvc, &presets::all()).unwrap();
        let u = units(&w, &isvc, &presets::all()).unwrap();
        assert_eq!(u.len(), 1);
        assert_eq!(u[0].composition(), "1 head + 2 workers");
        let head = &u[0].members[0];
        assert_eq!(head.spec.containers[0].name, "model");
        assert_eq!(
            head.storage_uri,
            Some((
                "hf://meta-llama/Llama-3.1-70B".to_string(),
                "spec.predictor.model.storageUri".to_string()
            ))
        );
    }

    #[test]
    fn kserve_single_node_is_a_pod() {
        let isvc = json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "spec": {"predictor": {"model": {"resources": {"limits": {"nvidia.com/gpu": "1"}}}}}});
        let p = plan(&isvc);
        assert_eq!(
            p,
            vec![(UnitKind::Pod, "1 head".to_string(), 1, vec![("head", 1)])]
        );
    }

    /// A description of InferenceService written without `containers`.
    fn hand_written_kserve() -> Vec<CustomKind> {
        let mut kserve = presets::kserve_inference_service();
        for t in &mut kserve.templates {
            t.containers.clear();
        }
        vec![kserve]
    }

    #[test]
    fn the_model_container_is_counted_once_whatever_the_description() {
        let isvc = json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "spec": {"predictor": {"model": {"resources": {"limits": {"nvidia.com/gpu": "2"}}}}}});
        for custom in [presets::all(), hand_written_kserve()] {
            let w = Workload::from_object(&isvc, &custom).unwrap();
            let u = units(&w, &isvc, &custom).unwrap();
            let names: Vec<&str> = u[0].members[0]
                .spec
                .containers
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            assert_eq!(names, vec!["model"]);
        }
    }

    #[test]
    fn malformed_kserve_model_is_an_error() {
        let isvc = json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "spec": {"predictor": {"model": {"resources": "lots"}}}});
        // The workload reader refuses it before the units are formed...
        let err = Workload::from_object(&isvc, &presets::all()).unwrap_err();
        assert!(
            err.to_string().starts_with("spec.predictor.model:"),
            "{err}"
        );
        // ... and so do the units, when the description does not read it.
        let custom = hand_written_kserve();
        let w = Workload::from_object(&isvc, &custom).unwrap();
        let err = units(&w, &isvc, &custom).unwrap_err();
        assert!(err.starts_with("spec.predictor.model:"), "{err}");
    }

    #[test]
    fn ray_cluster_is_one_group_of_head_and_all_workers() {
        let ray = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "spec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "h"}]}}},
                     "workerGroupSpecs": [
                        {"replicas": 2, "template": {"spec": gpu(4)}},
                        {"replicas": 1, "template": {"spec": gpu(1)}}]}});
        let p = plan(&ray);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].1, "1 head + 3 workers");
        assert_eq!(p[0].3, vec![("head", 1), ("worker", 2), ("worker", 1)]);
    }

    #[test]
    fn pytorch_job_templates_are_each_alone() {
        let job = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "spec": {"pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": gpu(1)}},
                "Worker": {"replicas": 4, "template": {"spec": gpu(1)}}}}});
        let p = plan(&job);
        assert_eq!(p.len(), 2);
        assert!(p.iter().all(|u| u.0 == UnitKind::Pod && u.2 == 1));
    }
}
