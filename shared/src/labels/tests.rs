use super::*;
use crate::testing::{message, says, starts_saying};
use crate::workload::presets;
use rstest::rstest;
use serde_json::{Value, json};

/// The rules without a cluster: these requests name no DRA claim.
pub(super) fn evaluate(request: &AdmissionRequest, settings: &Settings) -> Verdict {
    use crate::policy::{Policy, checked};
    super::policy::Labels::evaluate(
        request,
        &checked::<super::policy::Labels>(settings),
        &crate::cluster::NoCluster,
    )
}

const LABELS: &str = r#"{"workload-type": "training", "team": "ml"}"#;

fn good_labels() -> Value {
    serde_json::from_str(LABELS).unwrap()
}

fn gpu_container(n: &str) -> Value {
    json!({"name": "main", "resources": {
        "limits": {"nvidia.com/gpu": n, "cpu": "4", "memory": "16Gi"}}})
}

fn pod(labels: Value, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml", "labels": labels}, "spec": spec})
}

fn deployment(object_labels: Value, template_labels: Value, spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": "ml", "labels": object_labels},
        "spec": {"replicas": 2, "template": {"metadata": {"labels": template_labels}, "spec": spec}}})
}

fn gpu_spec() -> Value {
    json!({"containers": [gpu_container("1")]})
}

fn request(operation: &str, object: Value, old: Value) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u", "operation": operation, "namespace": "ml",
        "kind": {"group": "", "version": "v1", "kind": object.get("kind").cloned().unwrap_or(json!(""))},
        "userInfo": {"username": "alice"},
        "object": object, "oldObject": old
    }))
    .unwrap()
}

fn create(object: Value) -> AdmissionRequest {
    request("CREATE", object, Value::Null)
}

fn decide(object: Value) -> Verdict {
    evaluate(&create(object), &Settings::default())
}

/// Settings read from `v` and checked, or the error's text.
pub(super) fn parse(v: Value) -> Result<Settings, String> {
    use crate::settings::ValidateSettings;
    let s: Settings = serde_json::from_value(v).map_err(|e| e.to_string())?;
    s.validate().map_err(|e| e.to_string())?;
    Ok(s)
}

#[test]
fn labelled_well_formed_gpu_pod_is_accepted() {
    let v = decide(pod(good_labels(), gpu_spec()));
    assert_eq!(v, Verdict::accept());
}

#[test]
fn unlabelled_gpu_pod_gets_one_message_with_every_problem() {
    let v = decide(pod(
        json!({}),
        json!({"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}),
    ));
    assert!(!v.allowed);
    assert_eq!(
        message(&v),
        "Pod 'p' breaks the GPU admission rules (3 problems): \
         1) label 'workload-type' is missing (GPU pods must carry it): add workload-type: <one of interactive, batch, training> to metadata.labels; \
         2) label 'team' is missing (GPU pods must carry it): add team: <a non-empty value> to metadata.labels; \
         3) container 'main' holds GPUs but requests no cpu and no memory: set resources.requests.cpu and resources.requests.memory to what it uses, so it is not packed onto a GPU node without room for it"
    );
}

#[test]
fn controller_label_on_the_object_only_is_told_to_move_it() {
    let v = decide(deployment(
        json!({"team": "ml", "workload-type": "training"}),
        json!({"team": "ml"}),
        gpu_spec(),
    ));
    assert_eq!(
        message(&v),
        "Deployment 'llm' breaks the GPU admission rules (1 problem): \
         1) label 'workload-type' is on the Deployment's own metadata.labels but not on its pod template, and pods only get the template's labels: put workload-type: training on spec.template.metadata.labels"
    );
}

#[rstest]
#[case::deployment(deployment(json!({}), json!({}), json!({"containers": [{"name": "web"}]})))]
#[case::pod(pod(json!({}), json!({"containers": [{"name": "web", "resources": {"limits": {"cpu": "1"}}}]})))]
#[case::zero_gpus_no_tolerations(pod(json!({}), json!({"containers": [{"name": "web", "resources": {"limits": {"nvidia.com/gpu": "0"}}}]})))]
#[case::service(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {}}))]
#[case::unconfigured_custom_kind(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {},
    "spec": {"workerGroupSpecs": [{"template": {"spec": {"containers": [gpu_container("8")]}}}]}}))]
fn objects_without_gpu_demand_pass_untouched(#[case] object: Value) {
    assert_eq!(decide(object), Verdict::accept());
}

#[rstest]
#[case::init_container(json!({"containers": [{"name": "app", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
    "initContainers": [{"name": "warmup", "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}}}]}))]
#[case::sidecar(json!({"containers": [{"name": "app"}],
    "initContainers": [{"name": "side", "restartPolicy": "Always", "resources": {"limits": {"amd.com/gpu": "1", "cpu": "1", "memory": "1Gi"}}}]}))]
#[case::request_only(json!({"containers": [{"name": "app", "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}}}]}))]
#[case::mig(json!({"containers": [{"name": "app", "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1", "cpu": "1", "memory": "1Gi"}}}]}))]
#[case::intel(json!({"containers": [{"name": "app", "resources": {"limits": {"gpu.intel.com/xe": "1", "cpu": "1", "memory": "1Gi"}}}]}))]
#[case::pod_level(json!({"containers": [{"name": "app"}], "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}}}))]
#[case::invalid_quantity(json!({"containers": [{"name": "app", "resources": {"limits": {"nvidia.com/gpu": "half", "cpu": "1", "memory": "1Gi"}}}]}))]
fn hidden_or_unusual_gpu_requests_still_need_labels(#[case] spec: Value) {
    let v = decide(pod(json!({}), spec));
    assert!(!v.allowed);
    says(&v, "1) label 'workload-type' is missing");
}

#[test]
fn extra_gpu_resources_from_settings_count() {
    let settings = Settings {
        extra_gpu_resources: vec!["habana.ai/gaudi".into()],
        ..Settings::default()
    };
    let object = pod(
        json!({}),
        json!({"containers": [{"name": "app", "resources": {"limits": {"habana.ai/gaudi": "1", "cpu": "1", "memory": "1Gi"}}}]}),
    );
    assert!(
        decide(object.clone()).allowed,
        "unknown to the default settings"
    );
    assert!(!evaluate(&create(object), &settings).allowed);
}

#[rstest]
#[case::delete("DELETE")]
#[case::connect("CONNECT")]
fn other_operations_are_accepted(#[case] op: &str) {
    let r = request(op, pod(json!({}), gpu_spec()), Value::Null);
    assert_eq!(evaluate(&r, &Settings::default()), Verdict::accept());
}

#[test]
fn exempt_namespaces_pass_with_an_audit_annotation() {
    let settings = Settings {
        exempt_namespaces: crate::settings::NamespaceList(vec!["m*".into()]),
        ..Settings::default()
    };
    let v = evaluate(&create(pod(json!({}), gpu_spec())), &settings);
    assert!(v.allowed);
    assert_eq!(
        v.audit_annotations[crate::policy::AUDIT_EXEMPT],
        "namespace ml is in exemptNamespaces: not checked"
    );
}

#[rstest]
#[case::gpu_pod(pod(json!({}), json!({"containers": [gpu_container("1")], "tolerations": "all"})), "Pod ml/p cannot be read, so it is denied: spec: invalid type: string \"all\"")]
#[case::non_gpu_deployment(deployment(json!({}), json!({}), json!({"containers": {"name": "x"}})), "Deployment ml/llm cannot be read, so it is denied: spec.template.spec: invalid type: map")]
#[case::no_kind(json!({"metadata": {"generateName": "x-"}}), "Pod ml/x-* cannot be read, so it is denied: the object has no kind or apiVersion")]
fn unreadable_objects_are_denied_whatever_their_gpus(#[case] object: Value, #[case] start: &str) {
    let mut r = create(object);
    r.kind.kind = "Pod".into();
    let v = evaluate(&r, &Settings::default());
    assert!(!v.allowed);
    starts_saying(&v, start);
}

/// The default settings with every preset custom kind.
fn with_presets() -> Settings {
    Settings {
        custom_kinds: presets::all(),
        ..Settings::default()
    }
}

#[test]
fn custom_kind_with_a_bad_template_is_denied() {
    let settings = with_presets();
    let object = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"},
        "spec": {"headGroupSpec": {"template": {"spec": {"containers": []}}}, "workerGroupSpecs": [{"template": {}}]}});
    let v = evaluate(&create(object), &settings);
    starts_saying(
        &v,
        "RayCluster ml/rc cannot be read, so it is denied: spec.workerGroupSpecs[0]: no pod spec at spec.workerGroupSpecs[0].template.spec.",
    );
}

#[test]
fn ray_head_without_gpus_needs_no_labels_but_workers_do() {
    let settings = with_presets();
    let object = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"},
    "spec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "head"}]}}},
             "workerGroupSpecs": [
                {"replicas": 2, "template": {"metadata": {"labels": good_labels()}, "spec": {"containers": [gpu_container("1")]}}},
                {"replicas": 2, "template": {"metadata": {"labels": {"team": "ml"}}, "spec": {"containers": [gpu_container("2")]}}}
             ]}});
    let v = evaluate(&create(object), &settings);
    assert_eq!(
        message(&v),
        "RayCluster 'rc' breaks the GPU admission rules (1 problem): \
         1) spec.workerGroupSpecs[1].template.spec: label 'workload-type' is missing (GPU pods must carry it): add workload-type: <one of interactive, batch, training> to spec.workerGroupSpecs[1].template.metadata.labels"
    );
}

#[test]
fn kserve_predictor_and_workers_share_the_object_labels_and_are_reported_once() {
    let settings = with_presets();
    let object = json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "llama", "labels": {"workload-type": "interactive"}},
        "spec": {"predictor": {"containers": [gpu_container("1")],
                               "workerSpec": {"pipelineParallelSize": 2, "containers": [gpu_container("1")]}}}});
    let v = evaluate(&create(object), &settings);
    assert_eq!(
        message(&v),
        "InferenceService 'llama' breaks the GPU admission rules (1 problem): \
         1) spec.predictor: label 'team' is missing (GPU pods must carry it): add team: <a non-empty value> to metadata.labels"
    );
}

#[test]
fn leader_worker_set_checks_leader_and_worker_templates() {
    let settings = with_presets();
    let object = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm", "labels": good_labels()},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2,
            "leaderTemplate": {"metadata": {"labels": good_labels()}, "spec": {"containers": [gpu_container("1")]}},
            "workerTemplate": {"spec": {"containers": [gpu_container("1")]}}}}});
    let v = evaluate(&create(object), &settings);
    let m = message(&v);
    assert!(m.starts_with("LeaderWorkerSet 'vllm' breaks the GPU admission rules (2 problems): 1) spec.leaderWorkerTemplate.workerTemplate.spec: label 'workload-type' is on the LeaderWorkerSet's own metadata.labels but not on its pod template"), "{m}");
    assert!(
        m.contains("put team: ml on spec.leaderWorkerTemplate.workerTemplate.metadata.labels"),
        "{m}"
    );
}

#[test]
fn cronjob_labels_are_checked_in_the_job_template() {
    let object = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 2 * * *", "jobTemplate": {"spec": {"template": {
            "metadata": {"labels": {"workload-type": "Batch", "team": "ml"}},
            "spec": {"containers": [gpu_container("1")]}}}}}});
    assert_eq!(
        message(&decide(object)),
        "CronJob 'nightly' breaks the GPU admission rules (1 problem): \
         1) label workload-type=Batch is not allowed: set workload-type to one of interactive, batch, training in spec.jobTemplate.spec.template.metadata.labels (values are case-sensitive: did you mean batch?)"
    );
}

mod gpu_nodes_rule {
    use super::*;

    fn tolerating_pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "ml", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "1", "controller": true}]},
            "spec": {"containers": [{"name": "web"}],
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}})
    }

    #[test]
    fn non_gpu_pod_tolerating_the_gpu_taint_is_denied() {
        let mut object = tolerating_pod();
        object["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("ownerReferences");
        assert_eq!(
            message(&decide(object)),
            "Pod 'web' breaks the GPU admission rules (1 problem): \
             1) the pod requests no GPU but tolerates the GPU taint nvidia.com/gpu with tolerations[0] (key: nvidia.com/gpu, operator: Exists, effect: NoSchedule): GPU nodes are for GPU work, so remove the toleration, or, if it needs a GPU, request one (e.g. nvidia.com/gpu: 1 in resources.limits)"
        );
    }

    #[test]
    fn zero_gpus_do_not_make_a_gpu_pod() {
        let mut object = tolerating_pod();
        object["spec"]["containers"][0]["resources"] = json!({"limits": {"nvidia.com/gpu": "0"}});
        let v = decide(object);
        says(&v, "requests no GPU but tolerates");
    }

    #[test]
    fn a_spoofed_daemon_set_owner_does_not_help() {
        let v = decide(tolerating_pod());
        assert!(!v.allowed, "alice is not the DaemonSet controller");
    }

    #[rstest]
    #[case::service_account("system:serviceaccount:kube-system:daemon-set-controller")]
    #[case::controller_manager("system:kube-controller-manager")]
    fn daemon_set_pods_from_the_controller_are_node_agents(#[case] user: &str) {
        let mut r = create(tolerating_pod());
        r.user_info.username = user.into();
        assert!(evaluate(&r, &Settings::default()).allowed);
        let strict = Settings {
            allow_daemon_sets_on_gpu_nodes: false,
            ..Settings::default()
        };
        assert!(!evaluate(&r, &strict).allowed);
    }

    #[test]
    fn daemon_sets_may_run_on_gpu_nodes_unless_configured_otherwise() {
        let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "node-exporter"},
            "spec": {"template": {"spec": {"containers": [{"name": "e"}], "tolerations": [{"operator": "Exists"}]}}}});
        assert!(decide(ds.clone()).allowed);
        let strict = Settings {
            allow_daemon_sets_on_gpu_nodes: false,
            ..Settings::default()
        };
        let v = evaluate(&create(ds), &strict);
        says(
            &v,
            "the pod template requests no GPU but tolerates the GPU taint nvidia.com/gpu with tolerations[0] (operator: Exists), which tolerates every taint",
        );
    }

    #[test]
    fn daemon_sets_with_gpus_still_need_labels() {
        let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"},
            "spec": {"template": {"spec": {"containers": [gpu_container("1")]}}}});
        assert!(!decide(ds).allowed);
    }

    #[test]
    fn the_rule_can_be_turned_off() {
        let off = Settings {
            deny_non_gpu_pods_on_gpu_nodes: false,
            ..Settings::default()
        };
        assert!(evaluate(&create(tolerating_pod()), &off).allowed);
    }

    #[test]
    fn selecting_gpu_nodes_in_a_deployment_is_denied() {
        let object = deployment(
            json!({}),
            json!({}),
            json!({"containers": [{"name": "web"}], "nodeSelector": {"nvidia.com/gpu.present": "true"}}),
        );
        assert!(
            message(&decide(object)).contains(
                "1) the pod template requests no GPU but selects GPU nodes with nodeSelector nvidia.com/gpu.present: true:"
            )
        );
    }
}

mod updates {
    use super::*;

    fn update(old: Value, new: Value) -> Verdict {
        evaluate(&request("UPDATE", new, old), &Settings::default())
    }

    fn compliant() -> Value {
        deployment(json!({}), good_labels(), gpu_spec())
    }

    fn legacy() -> Value {
        deployment(json!({}), json!({}), gpu_spec())
    }

    #[test]
    fn a_compliant_update_is_accepted() {
        let mut new = compliant();
        new["spec"]["replicas"] = json!(5);
        assert_eq!(update(compliant(), new), Verdict::accept());
    }

    #[test]
    fn removing_a_label_is_denied() {
        let mut new = compliant();
        new["spec"]["template"]["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("team");
        let v = update(compliant(), new);
        assert!(!v.allowed);
        says(&v, "label 'team' is missing");
    }

    #[test]
    fn adding_gpus_to_an_unlabelled_workload_is_denied() {
        let old = deployment(
            json!({}),
            json!({}),
            json!({"containers": [{"name": "main"}]}),
        );
        let v = update(old, legacy());
        assert!(!v.allowed);
        says(&v, "label 'workload-type' is missing");
    }

    #[test]
    fn raising_gpus_of_a_legacy_workload_is_judged_in_full() {
        let mut new = legacy();
        new["spec"]["template"]["spec"] = json!({"containers": [gpu_container("8")]});
        assert!(!update(legacy(), new).allowed);
    }

    #[test]
    fn an_update_that_changes_no_template_or_label_is_let_through_with_a_warning() {
        let mut new = legacy();
        new["spec"]["replicas"] = json!(0);
        new["metadata"]["annotations"] = json!({"note": "scaled down"});
        let v = update(legacy(), new);
        assert!(v.allowed);
        assert_eq!(
            v.warnings,
            vec![
                "Deployment 'llm' breaks the GPU admission rules (2 problems); this update is allowed because it changes no pod template and no label, but the next change to them must fix:",
                "1) label 'workload-type' is missing (GPU pods must carry it): add workload-type: <one of interactive, batch, training> to spec.template.metadata.labels",
                "2) label 'team' is missing (GPU pods must carry it): add team: <a non-empty value> to spec.template.metadata.labels",
            ]
        );
        assert!(v.audit_annotations[AUDIT_UNCHANGED].contains("label 'team' is missing"));
    }

    #[test]
    fn an_unreadable_old_object_means_a_full_judgement() {
        let v = evaluate(
            &request("UPDATE", legacy(), json!("garbage")),
            &Settings::default(),
        );
        assert!(!v.allowed);
    }

    #[test]
    fn an_object_label_change_is_judged() {
        let mut new = legacy();
        new["metadata"]["labels"] = json!({"team": "ml"});
        assert!(!update(legacy(), new).allowed);
    }
}

#[test]
fn generated_names_appear_in_messages() {
    let mut object = pod(json!({}), gpu_spec());
    object["metadata"] = json!({"generateName": "llm-5d8f9c7b4-", "labels": {"team": "ml"}});
    assert!(
        message(&decide(object)).starts_with("Pod 'llm-5d8f9c7b4-*' breaks the GPU admission rules (1 problem): 1) label 'workload-type' is missing"),
    );
}

#[test]
fn pathological_objects_do_not_panic() {
    for object in [
        json!(null),
        json!([]),
        json!({"apiVersion": "v1", "kind": "Pod"}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": null, "spec": null}),
        json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1e30"}}}]}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": null}}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "-5"}}}]}}}}}}),
    ] {
        let v = decide(object.clone());
        assert!(
            v.allowed || v.message.is_some(),
            "{object}: a denial must say why"
        );
    }
}
