use super::*;
use rstest::rstest;
use serde_json::json;
use serde_json::{Map, Value};

fn gpu_spec(n: u32) -> Value {
    json!({"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": n.to_string()}}}]})
}

fn template(labels: Value, n: u32) -> Value {
    json!({"metadata": {"labels": labels}, "spec": gpu_spec(n)})
}

fn workload(object: Value) -> Workload {
    Workload::from_object(&object, &presets::all()).unwrap()
}

/// Each template's location and how many pods it stands for.
fn pods_per_template(w: &Workload) -> Vec<(String, u64)> {
    w.templates
        .iter()
        .map(|t| (t.location.clone(), t.pods))
        .collect()
}

#[rstest]
#[case::deployment("apps/v1", "Deployment", json!({"replicas": 3, "template": template(json!({"a": "1"}), 1)}), "spec.template.spec", 3)]
#[case::statefulset("apps/v1", "StatefulSet", json!({"replicas": 2, "template": template(json!({"a": "1"}), 1)}), "spec.template.spec", 2)]
#[case::replicaset("apps/v1", "ReplicaSet", json!({"template": template(json!({"a": "1"}), 1)}), "spec.template.spec", 1)]
#[case::daemonset("apps/v1", "DaemonSet", json!({"template": template(json!({"a": "1"}), 1)}), "spec.template.spec", 1)]
#[case::replication_controller("v1", "ReplicationController", json!({"replicas": 5, "template": template(json!({"a": "1"}), 1)}), "spec.template.spec", 5)]
#[case::job("batch/v1", "Job", json!({"parallelism": 4, "template": template(json!({"a": "1"}), 1)}), "spec.template.spec", 4)]
#[case::cronjob("batch/v1", "CronJob", json!({"schedule": "* * * * *", "jobTemplate": {"spec": {"parallelism": 2, "template": template(json!({"a": "1"}), 1)}}}), "spec.jobTemplate.spec.template.spec", 2)]
#[case::scaled_to_zero("apps/v1", "Deployment", json!({"replicas": 0, "template": template(json!({"a": "1"}), 1)}), "spec.template.spec", 0)]
fn builtin_controllers(
    #[case] api_version: &str,
    #[case] kind: &str,
    #[case] spec: Value,
    #[case] location: &str,
    #[case] pods: u64,
) {
    let w = workload(
        json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "spec": spec}),
    );
    assert_eq!(w.kind, kind);
    assert_eq!(w.templates.len(), 1);
    let t = &w.templates[0];
    assert_eq!(t.location, location);
    assert_eq!(t.pods, pods);
    assert_eq!(w.pods(), pods);
    assert_eq!(t.meta.labels["a"], "1");
    assert_eq!(t.spec.containers[0].name, "main");
}

#[test]
fn bare_pod_uses_its_own_metadata() {
    let w = workload(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"team": "x"}}, "spec": gpu_spec(1)}),
    );
    assert!(w.is_pod());
    let t = &w.templates[0];
    assert_eq!(t.location, "spec");
    assert_eq!(t.spec_pointer, "/spec");
    assert_eq!(t.metadata_pointer, "/metadata");
    assert_eq!(t.meta.labels["team"], "x");
    assert_eq!(w.meta.name, "p");
    assert_eq!(w.pods(), 1);
}

#[test]
fn kinds_without_templates_and_unconfigured_crds_have_none() {
    let svc = workload(json!({"apiVersion": "v1", "kind": "Service", "spec": {}}));
    assert!(svc.templates.is_empty());
    let unknown = Workload::from_object(
        &json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": {"headGroupSpec": {"template": template(json!({}), 1)}}}),
        &[],
    )
    .unwrap();
    assert!(unknown.templates.is_empty(), "not configured: no templates");
}

#[test]
fn controller_without_template_is_malformed() {
    let err = Workload::from_object(&json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"metadata": {}}}}), &[]).unwrap_err();
    assert!(matches!(err, WorkloadError::Malformed { .. }), "{err}");
    assert!(err.to_string().contains("spec.template.spec"), "{err}");
}

#[rstest]
#[case::no_kind(json!({"apiVersion": "v1"}))]
#[case::no_version(json!({"kind": "Pod"}))]
#[case::not_an_object(json!([1, 2]))]
#[case::kind_not_a_string(json!({"apiVersion": "v1", "kind": 5}))]
fn objects_without_kind_are_errors(#[case] object: Value) {
    assert_eq!(
        Workload::from_object(&object, &[]).unwrap_err(),
        WorkloadError::NoKind
    );
}

#[rstest]
#[case::replicas_string(json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": "3", "template": template(json!({}), 1)}}))]
#[case::replicas_negative(json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": -1, "template": template(json!({}), 1)}}))]
#[case::spec_wrong_type(json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": 7}}))]
#[case::labels_wrong_type(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": ["a"]}, "spec": {}}))]
fn malformed_fields_are_errors(#[case] object: Value) {
    let err = Workload::from_object(&object, &[]).unwrap_err();
    assert!(matches!(err, WorkloadError::Malformed { .. }), "{err:?}");
}

#[test]
fn kserve_predictor_is_an_inline_podspec_labelled_by_the_isvc() {
    let w = workload(json!({
        "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "llm", "labels": {"workload-type": "interactive"}},
        "spec": {"predictor": {"minReplicas": 2, "model": {"storageUri": "hf://meta-llama/Llama-3.1-8B"},
                               "containers": [{"name": "kserve-container", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    }));
    assert_eq!(w.templates.len(), 1);
    let t = &w.templates[0];
    assert_eq!(t.location, "spec.predictor");
    assert_eq!(t.metadata_pointer, "/metadata");
    assert_eq!(t.meta.labels["workload-type"], "interactive");
    assert_eq!(t.pods, 2);
}

#[test]
fn kserve_model_shortcut_containers_are_counted() {
    let w = workload(json!({
        "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "llm"},
        "spec": {"predictor": {
            "model": {"modelFormat": {"name": "huggingface"}, "storageUri": "hf://m/x",
                      "resources": {"limits": {"nvidia.com/gpu": "2"}}},
            "huggingface": {"name": "hf", "resources": {"limits": {"nvidia.com/gpu": "1"}}}}}
    }));
    let names: Vec<&str> = w.templates[0]
        .spec
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, vec!["model", "hf"]);
    let g = crate::gpu::workload_gpus(
        &w,
        &crate::gpu::GpuResources::default(),
        &crate::dra::ClaimBook::default(),
    );
    assert_eq!(g.total_gpus(), 3);
}

#[test]
fn kserve_malformed_model_container_is_an_error() {
    let err = Workload::from_object(
        &json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                "spec": {"predictor": {"model": {"resources": {"limits": {"nvidia.com/gpu": true}}}}}}),
        &presets::all(),
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with("spec.predictor.model:"),
        "{err}"
    );
}

#[test]
fn kserve_scale_to_zero_counts_one_replica_and_multinode_adds_workers() {
    let w = workload(json!({
        "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "llm"},
        "spec": {"predictor": {"minReplicas": 0, "containers": [],
                               "workerSpec": {"pipelineParallelSize": 3, "containers": []}}}
    }));
    assert_eq!(
        pods_per_template(&w),
        vec![
            ("spec.predictor".into(), 1),
            ("spec.predictor.workerSpec".into(), 2)
        ]
    );
}

#[test]
fn leader_worker_set_counts_leaders_and_workers() {
    let w = workload(json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "vllm"},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 4,
            "leaderTemplate": template(json!({"role": "leader"}), 1),
            "workerTemplate": template(json!({"role": "worker"}), 8)}}
    }));
    let pods: Vec<(String, u64, String)> = w
        .templates
        .iter()
        .map(|t| (t.location.clone(), t.pods, t.meta.labels["role"].clone()))
        .collect();
    assert_eq!(
        pods,
        vec![
            (
                "spec.leaderWorkerTemplate.leaderTemplate.spec".into(),
                2,
                "leader".into()
            ),
            (
                "spec.leaderWorkerTemplate.workerTemplate.spec".into(),
                6,
                "worker".into()
            ),
        ]
    );
    assert_eq!(w.pods(), 8);
}

#[test]
fn leader_worker_set_without_leader_template_uses_the_worker_template_for_all() {
    let w = workload(json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "vllm"},
        "spec": {"replicas": 3, "leaderWorkerTemplate": {"size": 2, "workerTemplate": template(json!({}), 8)}}
    }));
    assert_eq!(w.templates.len(), 1, "one template, reached twice");
    assert_eq!(w.templates[0].pods, 6, "3 groups x 2 pods");
}

#[test]
fn ray_cluster_head_and_every_worker_group() {
    let w = workload(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"},
        "spec": {"headGroupSpec": {"template": template(json!({}), 0)},
                 "workerGroupSpecs": [
                    {"groupName": "small", "replicas": 2, "template": template(json!({}), 1)},
                    {"groupName": "big", "replicas": 3, "template": template(json!({}), 8)}]}
    }));
    assert_eq!(
        pods_per_template(&w),
        vec![
            ("spec.headGroupSpec.template.spec".into(), 1),
            ("spec.workerGroupSpecs[0].template.spec".into(), 2),
            ("spec.workerGroupSpecs[1].template.spec".into(), 3),
        ]
    );
    assert_eq!(
        w.templates[2].spec_pointer,
        "/spec/workerGroupSpecs/1/template/spec"
    );
}

#[test]
fn ray_cluster_without_worker_groups_has_only_the_head() {
    let w = workload(
        json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {},
        "spec": {"headGroupSpec": {"template": template(json!({}), 1)}}}),
    );
    assert_eq!(w.templates.len(), 1);
}

#[test]
fn pytorch_job_every_replica_type() {
    let w = workload(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "t"},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": template(json!({}), 8)},
            "Worker": {"replicas": 3, "template": template(json!({}), 8)}}}
    }));
    let mut pods: Vec<(String, u64)> = w
        .templates
        .iter()
        .map(|t| (t.location.clone(), t.pods))
        .collect();
    pods.sort();
    assert_eq!(
        pods,
        vec![
            ("spec.pytorchReplicaSpecs.Master.template.spec".into(), 1),
            ("spec.pytorchReplicaSpecs.Worker.template.spec".into(), 3),
        ]
    );
}

#[test]
fn custom_kind_from_settings_json() {
    let kinds: Vec<CustomKind> = serde_json::from_value(json!([{
        "group": "example.com", "kind": "Trainer",
        "templates": [{"path": "$.spec.nodes[*]", "podSpec": "pod", "metadata": "$.metadata",
                       "replicas": [{"path": "count"}, {"path": "$.spec.multiplier", "default": 2}]}]
    }]))
    .unwrap();
    kinds[0].validate("customKinds[0]").unwrap();
    let w = Workload::from_object(
        &json!({"apiVersion": "example.com/v1", "kind": "Trainer", "metadata": {"labels": {"t": "1"}},
                "spec": {"nodes": [{"count": 3, "pod": gpu_spec(1)}, {"pod": gpu_spec(2)}]}}),
        &kinds,
    )
    .unwrap();
    assert_eq!(
        w.templates.iter().map(|t| t.pods).collect::<Vec<_>>(),
        vec![6, 2]
    );
    assert_eq!(w.templates[1].meta.labels["t"], "1");
}

#[rstest]
#[case::empty_group(json!({"group": "", "kind": "K", "templates": [{"path": "$.spec"}]}), "customKinds[0].group")]
#[case::empty_kind(json!({"group": "g", "kind": " ", "templates": [{"path": "$.spec"}]}), "customKinds[0].kind")]
#[case::builtin(json!({"group": "apps", "kind": "Deployment", "templates": [{"path": "$.spec"}]}), "built in")]
#[case::no_templates(json!({"group": "g", "kind": "K", "templates": []}), "customKinds[0].templates")]
#[case::not_rooted(json!({"group": "g", "kind": "K", "templates": [{"path": "spec"}]}), "customKinds[0].templates[0].path")]
#[case::bad_jsonpath(json!({"group": "g", "kind": "K", "templates": [{"path": "$.spec[?("}]}), "customKinds[0].templates[0].path: invalid JSONPath")]
#[case::bad_pod_spec(json!({"group": "g", "kind": "K", "templates": [{"path": "$.spec", "podSpec": "a..b"}]}), "customKinds[0].templates[0].podSpec")]
#[case::wildcard_metadata(json!({"group": "g", "kind": "K", "templates": [{"path": "$.spec", "metadata": "a.*"}]}), "customKinds[0].templates[0].metadata")]
#[case::bad_replicas(json!({"group": "g", "kind": "K", "templates": [{"path": "$.spec", "replicas": [{"path": ""}]}]}), "customKinds[0].templates[0].replicas[0].path")]
fn custom_kind_validation_names_the_field(#[case] kind: Value, #[case] expected: &str) {
    let kind: CustomKind = serde_json::from_value(kind).unwrap();
    let err = kind.validate("customKinds[0]").unwrap_err().to_string();
    assert!(err.contains(expected), "{err}");
}

#[test]
fn naming_a_preset_kind_is_enough() {
    let kinds: Vec<CustomKind> = serde_json::from_value(json!([
        {"group": "ray.io", "kind": "RayCluster"},
        {"group": "serving.kserve.io", "kind": "InferenceService"}
    ]))
    .unwrap();
    for (i, k) in kinds.iter().enumerate() {
        k.validate(&format!("customKinds[{i}]")).unwrap();
    }
    assert_eq!(kinds[0].locations(), presets::ray_cluster().templates);
    let w = Workload::from_object(
        &json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {},
                "spec": {"workerGroupSpecs": [{"replicas": 2, "template": template(json!({}), 1)}]}}),
        &kinds,
    )
    .unwrap();
    assert_eq!(w.pods(), 2);
    let unknown: CustomKind =
        serde_json::from_value(json!({"group": "example.com", "kind": "Trainer"})).unwrap();
    let err = unknown.validate("customKinds[0]").unwrap_err().to_string();
    assert!(
        err.contains("no built-in description") && err.contains("ray.io/RayCluster"),
        "{err}"
    );
}

#[test]
fn custom_kind_rejects_unknown_fields() {
    let err = serde_json::from_value::<CustomKind>(
        json!({"group": "g", "kind": "K", "templates": [], "typo": 1}),
    )
    .unwrap_err();
    assert!(err.to_string().contains("typo"), "{err}");
}

#[test]
fn presets_are_valid() {
    for (i, k) in presets::all().iter().enumerate() {
        k.validate(&format!("presets[{i}]")).unwrap();
    }
}

#[test]
fn every_preset_is_found_by_its_group_and_kind() {
    for k in presets::all() {
        assert_eq!(presets::find(&k.group, &k.kind).as_ref(), Some(&k));
        assert_eq!(presets::shared(&k.group, &k.kind), Some(&k));
        assert!(presets::exists(&k.group, &k.kind));
        let named = CustomKind {
            templates: Vec::new(),
            ..k.clone()
        };
        assert_eq!(named.template_locations(), k.templates.as_slice());
    }
    assert_eq!(presets::find("ray.io", "RayJob"), None);
    assert_eq!(presets::find("apps", "Deployment"), None);
    assert_eq!(presets::shared("ray.io", "RayJob"), None);
    assert_eq!(presets::shared("apps", "Deployment"), None);
    assert!(!presets::exists("ray.io", "RayJob"));
}

#[test]
fn writes_back_into_the_matched_template() {
    let mut object = json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {},
        "spec": {"headGroupSpec": {"template": {"spec": {"containers": []}}},
                 "workerGroupSpecs": [{"replicas": 1, "template": {"spec": {"containers": []}}}]}
    });
    let w = Workload::from_object(&object, &presets::all()).unwrap();
    let worker = &w.templates[1];
    spec_mut(&mut object, worker)
        .unwrap()
        .insert("nodeSelector".into(), json!({"pool": "batch"}));
    metadata_mut(&mut object, worker)
        .unwrap()
        .insert("labels".into(), json!({"gpu-admission/pool": "batch"}));
    let written = &object["spec"]["workerGroupSpecs"][0]["template"];
    assert_eq!(written["spec"]["nodeSelector"]["pool"], "batch");
    assert_eq!(
        written["metadata"]["labels"]["gpu-admission/pool"], "batch",
        "missing metadata is created"
    );
    assert!(
        object["spec"]["headGroupSpec"]["template"]["spec"]
            .get("nodeSelector")
            .is_none()
    );
}

#[test]
fn object_at_mut_refuses_non_objects() {
    let mut v = json!({"a": 5, "b": [{"c": {}}]});
    assert!(object_at_mut(&mut v, "/a").is_none());
    assert!(object_at_mut(&mut v, "/a/x").is_none());
    assert!(object_at_mut(&mut v, "/b/7").is_none());
    assert!(object_at_mut(&mut v, "/b/0/c").is_some());
    assert!(object_at_mut(&mut v, "/new/deep").is_some());
    assert!(v["new"]["deep"].is_object());
}

#[test]
fn too_many_templates_is_an_error() {
    let ray = |groups: usize| {
        let groups: Vec<Value> = (0..groups)
            .map(|_| json!({"template": {"spec": {}}}))
            .collect();
        json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": {"workerGroupSpecs": groups}})
    };
    let at_limit = Workload::from_object(&ray(MAX_TEMPLATES), &presets::all()).unwrap();
    assert_eq!(at_limit.templates.len(), MAX_TEMPLATES);
    let err = Workload::from_object(&ray(MAX_TEMPLATES + 1), &presets::all()).unwrap_err();
    assert_eq!(err, WorkloadError::TooManyTemplates);
}

fn containers(n: usize) -> Value {
    (0..n).map(|i| json!({"name": format!("c{i}")})).collect()
}

#[test]
fn containers_at_the_limit_are_read_one_more_is_an_error() {
    let deployment = |spec: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "spec": {"template": {"metadata": {}, "spec": spec}}})
    };
    // containers, initContainers and ephemeralContainers count together.
    let at_limit = deployment(json!({
        "containers": containers(MAX_CONTAINERS - 2),
        "initContainers": containers(1),
        "ephemeralContainers": containers(1)
    }));
    let w = Workload::from_object(&at_limit, &[]).unwrap();
    assert_eq!(w.templates[0].spec.containers.len(), MAX_CONTAINERS - 2);
    let over = deployment(json!({
        "containers": containers(MAX_CONTAINERS - 1),
        "initContainers": containers(1),
        "ephemeralContainers": containers(1)
    }));
    let err = Workload::from_object(&over, &[]).unwrap_err();
    assert_eq!(
        err,
        WorkloadError::TooManyContainers {
            location: "spec.template.spec".into(),
            count: MAX_CONTAINERS + 1
        }
    );
    assert_eq!(
        err.to_string(),
        "spec.template.spec has 257 containers (containers, initContainers and ephemeralContainers together); gpu-admission policies read at most 256 per pod template"
    );
    // Counted before reading: 10,000 containers of the wrong shape are still too many.
    let pod =
        json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": vec![json!(1); 10_000]}});
    assert_eq!(
        Workload::from_object(&pod, &[]).unwrap_err(),
        WorkloadError::TooManyContainers {
            location: "spec".into(),
            count: 10_000
        }
    );
}

#[test]
fn resource_lists_at_the_limit_are_read_one_more_name_is_an_error() {
    let resources = |n: usize| -> Value {
        let list: Map<String, Value> = (0..n)
            .map(|i| (format!("example.com/r{i}"), json!("1")))
            .collect();
        json!({"limits": list.clone(), "requests": list})
    };
    let pod = |spec: Value| json!({"apiVersion": "v1", "kind": "Pod", "spec": spec});
    let at_limit = pod(json!({
        "containers": [{"name": "a", "resources": resources(MAX_RESOURCES)}],
        "resources": resources(MAX_RESOURCES)
    }));
    Workload::from_object(&at_limit, &[]).unwrap();
    for (spec, location) in [
        (
            json!({"containers": [{"name": "a"}], "initContainers": [{"name": "b"}, {"name": "c", "resources": resources(MAX_RESOURCES + 1)}]}),
            "spec.initContainers[1].resources.limits",
        ),
        (
            json!({"containers": [{"name": "a"}], "resources": {"requests": resources(MAX_RESOURCES + 1)["requests"]}}),
            "spec.resources.requests",
        ),
    ] {
        let err = Workload::from_object(&pod(spec), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{location} has 65 resource names; gpu-admission policies read at most 64 per list"
            )
        );
    }
    let isvc = json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "spec": {"predictor": {"model": {"resources": resources(MAX_RESOURCES + 1)}}}});
    assert_eq!(
        Workload::from_object(&isvc, &presets::all()).unwrap_err(),
        WorkloadError::TooManyResources {
            location: "spec.predictor.model.resources.limits".into(),
            count: MAX_RESOURCES + 1
        }
    );
}

#[test]
fn kserve_shortcut_containers_count_toward_the_limit() {
    let isvc = |n: usize| {
        json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
               "spec": {"predictor": {"model": {"modelFormat": {"name": "x"}}, "containers": containers(n)}}})
    };
    Workload::from_object(&isvc(MAX_CONTAINERS - 1), &presets::all()).unwrap();
    let err = Workload::from_object(&isvc(MAX_CONTAINERS), &presets::all()).unwrap_err();
    assert!(
        matches!(err, WorkloadError::TooManyContainers { count, .. } if count == MAX_CONTAINERS + 1),
        "{err}"
    );
}

#[test]
fn pod_count_overflow_is_an_error() {
    let err = Workload::from_object(
        &json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                "spec": {"replicas": u64::MAX, "leaderWorkerTemplate": {"size": 3, "workerTemplate": {"spec": {}}}}}),
        &presets::all(),
    )
    .unwrap_err();
    assert!(matches!(err, WorkloadError::TooManyPods { .. }), "{err}");
}

#[rstest]
#[case::dotted("spec.template", "/spec/template")]
#[case::slash_and_tilde_escaped("a/b.c~d", "/a~1b/c~0d")]
#[case::tilde_before_slash("a~/b", "/a~0~1b")]
fn dotted_locations_become_pointers(#[case] dotted: &str, #[case] pointer: &str) {
    assert_eq!(dot_to_pointer(dotted), pointer);
}

#[rstest]
#[case::escapes_and_an_index("/spec/a~1b/12/c", "spec.a/b[12].c")]
#[case::a_ray_worker_template(
    "/spec/workerGroupSpecs/1/template",
    "spec.workerGroupSpecs[1].template"
)]
#[case::the_whole_object("", "(object)")]
fn pointers_become_locations(#[case] pointer: &str, #[case] location: &str) {
    assert_eq!(pointer_to_location(pointer), location);
}

#[test]
fn value_at_agrees_with_serde_json_pointer() {
    let doc = json!({"a": {"b/c": [10, {"d~e": true}], "": 1, "0": "zero"}, "list": [1, 2, 3]});
    for pointer in [
        "",
        "/",
        "/a",
        "/a/b~1c",
        "/a/b~1c/0",
        "/a/b~1c/1/d~0e",
        "/a/b~1c/01",
        "/a/b~1c/+1",
        "/a/b~1c/2",
        "/a/",
        "/a/0",
        "/list/2",
        "/list/3",
        "/list/-1",
        "a",
        "/missing/x",
        "/a/b~1c/1/d~0e/x",
        "/list/18446744073709551616",
    ] {
        assert_eq!(value_at(&doc, pointer), doc.pointer(pointer), "{pointer}");
    }
}

#[test]
fn value_at_dots_agrees_with_the_pointer_it_stands_for() {
    let doc =
        json!({"model": {"name": "m"}, "worker": {"containers": [{"a": 1}]}, "a/b": {"c~d": 2}});
    for path in [
        "model",
        "model.name",
        "worker.containers.0",
        "worker.containers.0.a",
        "worker.containers.1",
        "a/b.c~d",
        "missing",
        "model.name.x",
        "",
    ] {
        assert_eq!(
            value_at_dots(&doc, path),
            value_at(&doc, &dot_to_pointer(path)),
            "{path}"
        );
    }
}

/// The JSONPath dialect custom kinds may use (RFC 9535, serde_json_path), with the
/// pointer each match is written back to.
#[rstest]
#[case::member("$.spec.nodes", &["/spec/nodes"])]
#[case::bracket_member("$['spec']['nodes'][1]", &["/spec/nodes/1"])]
#[case::every_element("$.spec.nodes[*]", &["/spec/nodes/0", "/spec/nodes/1"])]
#[case::every_member("$.spec.roles.*", &["/spec/roles/a~1b", "/spec/roles/worker"])]
#[case::descendants("$..template", &["/spec/nodes/1/template"])]
#[case::filter("$.spec.nodes[?@.name == 'gpu']", &["/spec/nodes/1"])]
#[case::parenthesised_filter("$.spec.nodes[?(@.name == 'gpu')]", &["/spec/nodes/1"])]
#[case::length_function("$.spec.nodes[?length(@.name) > 3]", &["/spec/nodes/0"])]
#[case::absent("$.spec.missing[*]", &[])]
fn jsonpath_matches_become_pointers(#[case] path: &str, #[case] expected: &[&str]) {
    let object = json!({"spec": {
        "nodes": [{"name": "head0"}, {"name": "gpu", "template": {}}],
        "roles": {"worker": {}, "a/b": {}},
    }});
    assert_eq!(
        super::extract::element_pointers(&object, path, "K").unwrap(),
        expected
    );
}

#[rstest]
#[case::unclosed_filter("$.spec[?(")]
#[case::script_expression("$.spec.nodes[(@.length-1)]")]
#[case::regex_function("$.spec.nodes[?match(@.name, 'g.*')]")]
fn jsonpaths_outside_the_dialect_are_errors(#[case] path: &str) {
    let err = super::extract::element_pointers(&json!({}), path, "K").unwrap_err();
    assert!(err.to_string().contains(path), "{err}");
}
