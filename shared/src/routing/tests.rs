//! The policy end to end on admission requests: routing, denials, UPDATE rules, kinds.

use super::policy::Routing as Policy_;
use super::*;
use crate::admission::ValidateSettings;
use crate::policy::{Policy, checked};
use crate::testing::{ends_saying, says, starts_saying};
use rstest::rstest;
use serde_json::json;

/// The rules without a cluster: these requests name no DRA claim. Every request is also
/// handed over as the waPC glue hands it ([`Policy::evaluate_owned`], the object changed in
/// place), which must give the same verdict.
fn evaluate(request: &AdmissionRequest, settings: &Settings) -> Verdict {
    let settings = checked::<Policy_>(settings);
    let verdict = Policy_::evaluate(request, &settings, &crate::cluster::NoCluster);
    let owned = Policy_::evaluate_owned(request.clone(), &settings, &crate::cluster::NoCluster);
    assert_eq!(owned, verdict, "handed over and borrowed");
    verdict
}

/// Three pools: batch, interactive (with required affinity on the GPU product), and
/// training (only in namespaces ml-*, tolerating the standard GPU taint).
fn settings() -> Settings {
    let s: Settings = serde_json::from_value(json!({
        "pools": [
            {"name": "batch",
             "selector": {"matchLabels": {"workload-type": "batch"}},
             "nodeSelector": {"gpu-admission/node-pool": "batch"},
             "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}],
             "priorityClassName": "batch-low",
             "allowedPriorityClasses": ["batch-high"]},
            {"name": "interactive",
             "selector": {"matchLabels": {"workload-type": "interactive"}},
             "nodeSelector": {"gpu-admission/node-pool": "interactive"},
             "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "interactive", "effect": "NoSchedule"}],
             "priorityClassName": "interactive-high",
             "requiredNodeAffinity": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-L4", "NVIDIA-A10G"]}]},
            {"name": "training",
             "selector": {"matchLabels": {"workload-type": "training"}},
             "namespaces": ["ml-*"],
             "nodeSelector": {"gpu-admission/node-pool": "training"},
             "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                             {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]}
        ],
        "extraGpuResources": ["example.com/tpu"],
        "customKinds": crate::workload::presets::all(),
        "exemptNamespaces": ["gpu-operator"]
    }))
    .unwrap();
    s.validate().unwrap();
    s
}

fn gpu_container(resource: &str) -> Value {
    json!({"name": "main", "image": "vllm", "resources": {"limits": {resource: "1"}}})
}

fn pod_spec() -> Value {
    json!({"containers": [gpu_container("nvidia.com/gpu")]})
}

fn deployment(labels: Value, spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "llm", "namespace": "team-a"},
           "spec": {"replicas": 2, "template": {"metadata": {"labels": labels}, "spec": spec}}})
}

fn pod(labels: Value, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "team-a", "labels": labels}, "spec": spec})
}

fn request(operation: &str, namespace: &str, object: Value, old: Value) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u", "operation": operation, "namespace": namespace,
        "kind": {"group": "", "version": "v1", "kind": object.get("kind").cloned().unwrap_or(json!(""))},
        "object": object, "oldObject": old
    }))
    .unwrap()
}

fn create(object: Value) -> Verdict {
    let ns = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("team-a")
        .to_string();
    evaluate(&request("CREATE", &ns, object, Value::Null), &settings())
}

/// Routes `object`, then routes the result again: the second pass must change nothing.
fn route(object: Value) -> Value {
    let v = create(object.clone());
    assert!(v.allowed, "{:?}", v.message);
    let mutated = v.mutated_object.clone().expect("a mutation");
    let again = create(mutated.clone());
    assert!(again.allowed, "{:?}", again.message);
    assert_eq!(
        again.mutated_object, None,
        "routing the routed object changes nothing"
    );
    mutated
}

fn denial(object: Value) -> String {
    let v = create(object);
    assert!(!v.allowed, "expected a denial");
    assert_eq!(v.mutated_object, None);
    v.message.unwrap()
}

#[test]
fn deployment_is_routed_with_priority_class() {
    let out = route(deployment(json!({"workload-type": "batch"}), pod_spec()));
    let t = &out["spec"]["template"];
    assert_eq!(
        t["metadata"]["labels"],
        json!({"workload-type": "batch", "gpu-admission/pool": "batch"})
    );
    assert_eq!(
        t["spec"]["nodeSelector"],
        json!({"gpu-admission/node-pool": "batch"})
    );
    assert_eq!(
        t["spec"]["tolerations"],
        json!([{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}])
    );
    assert_eq!(t["spec"]["priorityClassName"], "batch-low");
    assert_eq!(out["spec"]["replicas"], 2, "other fields are kept");
}

#[test]
fn bare_pod_is_routed_without_priority_class_and_warned() {
    let v = create(pod(json!({"workload-type": "batch"}), pod_spec()));
    let out = v.mutated_object.unwrap();
    assert_eq!(out["metadata"]["labels"]["gpu-admission/pool"], "batch");
    assert_eq!(
        out["spec"]["nodeSelector"]["gpu-admission/node-pool"],
        "batch"
    );
    assert!(out["spec"].get("priorityClassName").is_none());
    assert_eq!(v.warnings.len(), 1);
    assert!(
        v.warnings[0].starts_with(
            "spec.priorityClassName: pool batch runs its workloads with priority class batch-low"
        ),
        "{}",
        v.warnings[0]
    );
}

#[test]
fn required_affinity_becomes_a_term() {
    let out = route(deployment(
        json!({"workload-type": "interactive"}),
        pod_spec(),
    ));
    assert_eq!(
        out["spec"]["template"]["spec"]["affinity"],
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-L4", "NVIDIA-A10G"]}]}]}}})
    );
}

/// A batch workload's pod template.
fn batch_template() -> Value {
    json!({"metadata": {"labels": {"workload-type": "batch"}}, "spec": pod_spec()})
}

/// An object of `kind` whose pod template is at `spec.template`.
fn with_template(api_version: &str, kind: &str, name: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name},
        "spec": {"template": batch_template()}})
}

#[rstest]
#[case::job(with_template("batch/v1", "Job", "j"), "/spec/template")]
#[case::cronjob(json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
    "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": batch_template()}}}}),
    "/spec/jobTemplate/spec/template")]
#[case::statefulset(with_template("apps/v1", "StatefulSet", "s"), "/spec/template")]
#[case::daemonset(with_template("apps/v1", "DaemonSet", "d"), "/spec/template")]
#[case::replication_controller(with_template("v1", "ReplicationController", "r"), "/spec/template")]
#[case::bare_replicaset(with_template("apps/v1", "ReplicaSet", "r"), "/spec/template")]
#[case::pytorchjob(json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "t"},
    "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": batch_template()}}}}),
    "/spec/pytorchReplicaSpecs/Worker/template")]
#[case::leaderworkerset(json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "l"},
    "spec": {"leaderWorkerTemplate": {"size": 2, "workerTemplate": batch_template()}}}),
    "/spec/leaderWorkerTemplate/workerTemplate")]
fn every_kind_is_routed(#[case] object: Value, #[case] template: &str) {
    let out = route(object);
    let t = out.pointer(template).unwrap();
    assert_eq!(t["metadata"]["labels"]["gpu-admission/pool"], "batch");
    assert_eq!(
        t["spec"]["nodeSelector"]["gpu-admission/node-pool"],
        "batch"
    );
    assert_eq!(t["spec"]["priorityClassName"], "batch-low");
}

#[test]
fn kserve_pool_label_goes_on_the_inference_service() {
    let out = route(
        json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "llm", "labels": {"workload-type": "interactive"}},
        "spec": {"predictor": {"minReplicas": 1, "model": {"modelFormat": {"name": "huggingface"}},
                 "containers": [gpu_container("nvidia.com/gpu")]}}}),
    );
    assert_eq!(
        out["metadata"]["labels"]["gpu-admission/pool"],
        "interactive"
    );
    assert_eq!(
        out["spec"]["predictor"]["nodeSelector"],
        json!({"gpu-admission/node-pool": "interactive"})
    );
    assert_eq!(
        out["spec"]["predictor"]["priorityClassName"],
        "interactive-high"
    );
}

#[test]
fn kserve_model_container_counts() {
    let out = route(
        json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "llm", "labels": {"workload-type": "batch"}},
        "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"},
                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}}}}),
    );
    assert_eq!(
        out["spec"]["predictor"]["nodeSelector"],
        json!({"gpu-admission/node-pool": "batch"})
    );
    let bad = create(
        json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "llm"}, "spec": {"predictor": {"huggingface": {"resources": "lots"}}}}),
    );
    assert!(!bad.allowed);
    starts_saying(
        &bad,
        "InferenceService team-a/llm cannot be read, so it is denied: spec.predictor.huggingface:",
    );
}

#[test]
fn ray_head_without_gpu_is_left_alone() {
    let out = route(
        json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"},
        "spec": {"headGroupSpec": {"template": {"metadata": {"labels": {"workload-type": "batch"}},
                                                "spec": {"containers": [{"name": "head"}]}}},
                 "workerGroupSpecs": [
                    {"replicas": 1, "template": {"metadata": {"labels": {"workload-type": "batch"}}, "spec": pod_spec()}},
                    {"replicas": 1, "template": {"metadata": {"labels": {"workload-type": "interactive"}}, "spec": pod_spec()}}]}}),
    );
    let head = &out["spec"]["headGroupSpec"]["template"];
    assert!(head["spec"].get("nodeSelector").is_none());
    assert!(
        head["metadata"]["labels"]
            .get("gpu-admission/pool")
            .is_none()
    );
    let worker_pool = |i: usize| {
        &out["spec"]["workerGroupSpecs"][i]["template"]["metadata"]["labels"]["gpu-admission/pool"]
    };
    assert_eq!(worker_pool(0), "batch");
    assert_eq!(
        worker_pool(1),
        "interactive",
        "each template joins the pool its own labels select"
    );
}

#[rstest]
#[case::init_container(json!({"containers": [{"name": "c"}], "initContainers": [gpu_container("nvidia.com/gpu")]}))]
#[case::request_without_limit(json!({"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}))]
#[case::mig(json!({"containers": [gpu_container("nvidia.com/mig-1g.10gb")]}))]
#[case::amd(json!({"containers": [gpu_container("amd.com/gpu")]}))]
#[case::extra_resource(json!({"containers": [gpu_container("example.com/tpu")]}))]
#[case::pod_level(json!({"containers": [{"name": "c"}], "resources": {"limits": {"nvidia.com/gpu": "1"}}}))]
fn hidden_gpus_are_routed(#[case] spec: Value) {
    let out = route(deployment(json!({"workload-type": "batch"}), spec));
    assert_eq!(
        out["spec"]["template"]["metadata"]["labels"]["gpu-admission/pool"],
        "batch"
    );
}

#[rstest]
#[case::no_gpu(deployment(json!({"workload-type": "nonsense"}), json!({"containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}}}]})))]
#[case::no_templates(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {}}))]
#[case::unconfigured_crd(json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"template": {"spec": pod_spec()}}}))]
fn untouched(#[case] object: Value) {
    let v = create(object);
    assert_eq!(v, Verdict::accept());
}

#[test]
fn exempt_namespace_is_untouched_with_an_audit_annotation() {
    let v = create(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "validator", "namespace": "gpu-operator"}, "spec": pod_spec()}),
    );
    assert_eq!(
        v,
        Verdict::accept().with_audit(
            crate::policy::AUDIT_EXEMPT,
            "namespace gpu-operator is in exemptNamespaces: not checked"
        )
    );
}

#[test]
fn already_routed_is_accepted_without_patch() {
    let routed = route(deployment(json!({"workload-type": "batch"}), pod_spec()));
    assert_eq!(create(routed), Verdict::accept());
    // A toleration that covers the pool's (all effects) and the allowed alternative
    // priority class count too.
    let v = create(deployment(
        json!({"workload-type": "batch", "gpu-admission/pool": "batch"}),
        json!({"containers": [gpu_container("nvidia.com/gpu")],
               "nodeSelector": {"gpu-admission/node-pool": "batch"},
               "tolerations": [{"key": "dedicated", "value": "batch"}],
               "priorityClassName": "batch-high"}),
    ));
    assert_eq!(v, Verdict::accept());
}

#[test]
fn no_pool_is_denied_with_the_pools_listed() {
    let message = denial(deployment(json!({"app": "llm"}), pod_spec()));
    assert_eq!(
        message,
        "spec.template.metadata.labels: the GPU pod template at spec.template.spec (labels app=llm) in namespace team-a matches no GPU pool; pool batch takes workload-type=batch; pool interactive takes workload-type=interactive; pool training takes workload-type=training in namespaces ml-*. Label the pod template so that it matches one of them, or ask the cluster admins to set defaultPool"
    );
}

#[test]
fn no_pool_lists_ten_labels_and_counts_the_rest() {
    let labels: serde_json::Map<String, Value> = (0..10_000)
        .map(|i| (format!("l{i:05}"), json!("v")))
        .collect();
    let message = denial(deployment(Value::Object(labels), pod_spec()));
    assert!(
        message.contains("(labels l00000=v, l00001=v, l00002=v, l00003=v, l00004=v, l00005=v, l00006=v, l00007=v, l00008=v, l00009=v, and 9990 more) in namespace team-a matches no GPU pool"),
        "{message}"
    );
}

#[test]
fn namespace_restricted_pool_does_not_match_elsewhere() {
    let message = denial(deployment(json!({"workload-type": "training"}), pod_spec()));
    assert!(message.contains("matches no GPU pool"), "{message}");
    let mut object = deployment(json!({"workload-type": "training"}), pod_spec());
    object["metadata"]["namespace"] = json!("ml-research");
    let out = route(object);
    assert_eq!(
        out["spec"]["template"]["metadata"]["labels"]["gpu-admission/pool"],
        "training"
    );
}

#[test]
fn default_pool_takes_the_rest_with_a_warning() {
    let mut s = settings();
    s.default_pool = Some("batch".into());
    let v = evaluate(
        &request(
            "CREATE",
            "team-a",
            deployment(json!({}), pod_spec()),
            Value::Null,
        ),
        &s,
    );
    assert!(v.allowed);
    assert_eq!(
        v.mutated_object.unwrap()["spec"]["template"]["metadata"]["labels"]["gpu-admission/pool"],
        "batch"
    );
    assert_eq!(
        v.warnings,
        vec![
            "spec.template.spec: the pod template's labels match no pool, so it runs in the default pool batch"
        ]
    );
}

#[rstest]
#[case::node_selector_other_pool(
    json!({"containers": [gpu_container("nvidia.com/gpu")], "nodeSelector": {"gpu-admission/node-pool": "interactive"}}),
    "spec.template.spec.nodeSelector.gpu-admission/node-pool: 'interactive' points at the nodes of pool interactive, but the workload belongs to pool batch, whose nodes have gpu-admission/node-pool=batch. Remove this nodeSelector entry (the policy sets the pool's own)")]
#[case::node_selector_no_pool(
    json!({"containers": [gpu_container("nvidia.com/gpu")], "nodeSelector": {"gpu-admission/node-pool": "h100"}}),
    "spec.template.spec.nodeSelector.gpu-admission/node-pool: 'h100' points at nodes outside the pool, but the workload belongs to pool batch")]
#[case::affinity_other_pool(
    json!({"containers": [gpu_container("nvidia.com/gpu")], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu-admission/node-pool", "operator": "In", "values": ["interactive", "training"]}]}]}}}}),
    "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]: gpu-admission/node-pool In (interactive, training) points at the nodes of pool interactive, but the workload belongs to pool batch, whose nodes have gpu-admission/node-pool batch. Remove the requirement on gpu-admission/node-pool (the policy adds the pool's own)")]
#[case::affinity_excludes_pool(
    json!({"containers": [gpu_container("nvidia.com/gpu")], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu-admission/node-pool", "operator": "NotIn", "values": ["batch"]}]}]}}}}),
    "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]: gpu-admission/node-pool NotIn (batch) points at the nodes of pool interactive")]
#[case::pool_label_other_pool(
    json!({"containers": [gpu_container("nvidia.com/gpu")]}),
    "")]
#[case::wildcard_toleration(
    json!({"containers": [gpu_container("nvidia.com/gpu")], "tolerations": [{"operator": "Exists"}]}),
    "spec.template.spec.tolerations[0]: operator Exists without a key (tolerates every taint) tolerates the taint of pool interactive (dedicated=interactive:NoSchedule), which the nodes of pool batch do not have. Remove it (the policy adds what pool batch needs: dedicated=batch:NoSchedule)")]
#[case::broad_toleration(
    json!({"containers": [gpu_container("nvidia.com/gpu")], "tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
    "spec.template.spec.tolerations[0]: dedicated Exists tolerates the taint of pool interactive (dedicated=interactive:NoSchedule)")]
#[case::other_pool_toleration(
    json!({"containers": [gpu_container("nvidia.com/gpu")], "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]}),
    "spec.template.spec.tolerations[0]: dedicated=training:NoSchedule tolerates the taint of pool training (dedicated=training:NoSchedule)")]
#[case::priority_not_allowed(
    json!({"containers": [gpu_container("nvidia.com/gpu")], "priorityClassName": "system-cluster-critical"}),
    "spec.template.spec.priorityClassName: 'system-cluster-critical' is not allowed: pool batch allows batch-low, batch-high; use one of them or remove it (the policy sets batch-low)")]
fn contradictions_are_denied(#[case] spec: Value, #[case] expected_prefix: &str) {
    let labels = if expected_prefix.is_empty() {
        json!({"workload-type": "batch", "gpu-admission/pool": "interactive"})
    } else {
        json!({"workload-type": "batch"})
    };
    let message = denial(deployment(labels, spec));
    let expected = if expected_prefix.is_empty() {
        "spec.template.metadata.labels.gpu-admission/pool: names pool interactive, but the workload's labels place it in pool batch. The pool is chosen from the workload's labels, not set by hand: remove the label (the policy sets it to batch)"
    } else {
        expected_prefix
    };
    assert!(
        message.starts_with(expected),
        "{message}\n  expected: {expected}"
    );
}

#[test]
fn unknown_pool_label_and_several_conflicts_in_one_message() {
    let message = denial(deployment(
        json!({"workload-type": "batch", "gpu-admission/pool": "vip"}),
        json!({"containers": [gpu_container("nvidia.com/gpu")], "priorityClassName": "vip"}),
    ));
    assert_eq!(
        message,
        "spec.template.metadata.labels.gpu-admission/pool: 'vip' names no configured pool, but the workload's labels place it in pool batch. The pool is chosen from the workload's labels, not set by hand: remove the label (the policy sets it to batch); spec.template.spec.priorityClassName: 'vip' is not allowed: pool batch allows batch-low, batch-high; use one of them or remove it (the policy sets batch-low)"
    );
}

#[test]
fn a_flood_of_conflicts_is_summarised() {
    let tolerations: Vec<Value> = (0..5000)
        .map(|i| json!({"key": "dedicated", "operator": "Equal", "value": "interactive", "tolerationSeconds": i}))
        .collect();
    let message = denial(deployment(
        json!({"workload-type": "batch"}),
        json!({"containers": [gpu_container("nvidia.com/gpu")], "tolerations": tolerations}),
    ));
    assert!(
        message.ends_with("; and 4990 more"),
        "{}",
        &message[message.len() - 40..]
    );
    assert_eq!(
        message
            .matches("tolerates the taint of pool interactive")
            .count(),
        10
    );
}

#[test]
fn pool_without_priority_class_allows_none() {
    let mut o = deployment(json!({"workload-type": "training"}), pod_spec());
    o["metadata"]["namespace"] = json!("ml-a");
    o["spec"]["template"]["spec"]["priorityClassName"] = json!("high");
    let v = create(o);
    assert_eq!(
        v.message.as_deref(),
        Some(
            "spec.template.spec.priorityClassName: 'high' is not allowed: pool training allows no priority class of the workload's own; remove it"
        )
    );
}

#[test]
fn extended_resource_toleration_added_by_the_api_server_is_fine() {
    // ExtendedResourceToleration adds this to every Pod that requests nvidia.com/gpu; only
    // pool training tolerates that taint, but batch Pods must not be denied for it.
    let spec = json!({"containers": [gpu_container("nvidia.com/gpu")],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]});
    route(pod(json!({"workload-type": "batch"}), spec.clone()));
    // On a template asking for amd.com/gpu it is not the API server's, so it counts.
    let mut amd = spec;
    amd["containers"] = json!([gpu_container("amd.com/gpu")]);
    let message = denial(pod(json!({"workload-type": "batch"}), amd));
    assert!(
        message.starts_with("spec.tolerations[0]: nvidia.com/gpu Exists:NoSchedule tolerates the taint of pool training"),
        "{message}"
    );
}

#[test]
fn malformed_objects_are_rejected_not_panics() {
    for object in [
        json!({"kind": "Deployment"}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"metadata": {}}}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": {"containers": "x"}}}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": ["x"]}, "spec": {}}),
    ] {
        let v = create(object.clone());
        assert!(!v.allowed, "{object}");
        assert_eq!(v.code, Some(400));
        says(&v, " cannot be read, so it is denied: ");
    }
}

#[rstest]
#[case::delete("DELETE")]
#[case::connect("CONNECT")]
fn other_operations_are_accepted(#[case] op: &str) {
    let v = evaluate(
        &request(
            op,
            "team-a",
            deployment(json!({"app": "x"}), pod_spec()),
            Value::Null,
        ),
        &settings(),
    );
    assert_eq!(v, Verdict::accept());
}

fn update(object: Value, old: Value) -> Verdict {
    evaluate(&request("UPDATE", "team-a", object, old), &settings())
}

#[test]
fn update_of_a_deployment_is_evaluated_like_create() {
    let old = deployment(json!({"workload-type": "batch"}), pod_spec());
    let mut new = old.clone();
    new["spec"]["replicas"] = json!(3);
    let v = update(new, old);
    let out = v.mutated_object.expect("routed on update");
    assert_eq!(
        out["spec"]["template"]["metadata"]["labels"]["gpu-admission/pool"],
        "batch"
    );
    let spoofed = deployment(
        json!({"workload-type": "batch", "gpu-admission/pool": "interactive"}),
        pod_spec(),
    );
    assert!(!update(spoofed, out).allowed);
}

#[test]
fn update_of_an_old_pod_that_does_not_touch_routing_is_let_through() {
    // A GPU Pod created before the policy; the Job controller removes its finalizer.
    let mut old = pod(json!({"workload-type": "batch"}), pod_spec());
    old["metadata"]["finalizers"] = json!(["batch.kubernetes.io/job-tracking"]);
    let mut new = old.clone();
    new["metadata"]["finalizers"] = json!([]);
    let v = update(new, old);
    assert!(v.allowed);
    assert_eq!(v.mutated_object, None);
    assert_eq!(v.warnings.len(), 1);
    assert!(
        v.warnings[0].starts_with("Pod/p is not routed as its pool requires (spec: pool batch: label gpu-admission/pool=batch, nodeSelector"),
        "{}",
        v.warnings[0]
    );
}

#[test]
fn update_of_a_pod_that_changes_routing_is_evaluated() {
    let old = route(pod(json!({"workload-type": "batch"}), pod_spec()));
    // Relabelled into another pool: its nodeSelector now contradicts it.
    let mut moved = old.clone();
    moved["metadata"]["labels"]["workload-type"] = json!("interactive");
    moved["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("gpu-admission/pool");
    let v = update(moved, old.clone());
    assert!(!v.allowed);
    assert!(
        v.message.unwrap().starts_with("spec.nodeSelector.gpu-admission/node-pool: 'batch' points at the nodes of pool batch, but the workload belongs to pool interactive"),
    );
    // The pool label removed: put back, nothing else changes.
    let mut unlabelled = old.clone();
    unlabelled["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("gpu-admission/pool");
    let v = update(unlabelled, old.clone());
    assert_eq!(v.mutated_object, Some(old.clone()));
    // A pre-existing unrouted Pod that gains a toleration must not change spec silently.
    let unrouted = pod(json!({"workload-type": "batch"}), pod_spec());
    let mut tolerating = unrouted.clone();
    tolerating["spec"]["tolerations"] = json!([{"key": "x", "operator": "Exists"}]);
    let v = update(tolerating, unrouted);
    assert!(!v.allowed);
    assert!(
        v.message
            .unwrap()
            .starts_with("spec.nodeSelector: this running Pod would have to join pool batch"),
    );
}

#[test]
fn update_of_an_old_job_without_routing_changes_is_let_through() {
    let job = with_template("batch/v1", "Job", "j");
    let mut new = job.clone();
    new["metadata"]["annotations"] = json!({"note": "x"});
    let v = update(new, job);
    assert!(v.allowed);
    assert_eq!(v.mutated_object, None);
    assert_eq!(v.warnings.len(), 1);
}

#[test]
fn objects_being_deleted_are_let_through() {
    let mut o = deployment(json!({"app": "nothing"}), pod_spec());
    o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert_eq!(update(o.clone(), o), Verdict::accept());
}

#[test]
fn objects_managed_by_another_controller_are_not_mutated() {
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "llm-5d4f", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm", "uid": "1", "controller": true}]},
        "spec": {"template": batch_template()}});
    let v = create(rs.clone());
    assert!(v.allowed);
    assert_eq!(v.mutated_object, None);
    assert!(
        v.warnings[0].starts_with(
            "ReplicaSet/llm-5d4f is controlled by Deployment/llm, whose pod template is not routed"
        ),
        "{:?}",
        v.warnings
    );
    // Contradictions are still denied.
    let mut bad = rs;
    bad["spec"]["template"]["spec"]["nodeSelector"] =
        json!({"gpu-admission/node-pool": "training"});
    assert!(!create(bad).allowed);
}

#[test]
fn namespace_falls_back_to_the_object() {
    let mut o = deployment(json!({"workload-type": "training"}), pod_spec());
    o["metadata"]["namespace"] = json!("ml-x");
    let v = evaluate(&request("CREATE", "", o, Value::Null), &settings());
    assert!(v.mutated_object.is_some(), "{:?}", v.message);
}

#[test]
fn plan_is_data() {
    let object = deployment(json!({"workload-type": "interactive"}), pod_spec());
    let w = Workload::from_object(&object, &[]).unwrap();
    let p = plan(
        &checked::<Policy_>(&settings()),
        &w,
        &GpuResources::default(),
        &ClaimBook::default(),
        "team-a",
        When {
            now: 0,
            stay: super::lending::update::Stay::New,
        },
    );
    assert_eq!(p.templates.len(), 1);
    let Outcome::Route {
        routing,
        by_default,
    } = &p.templates[0].outcome
    else {
        panic!("{p:?}")
    };
    assert!(!by_default);
    assert_eq!(
        routing.to_string(),
        "pool interactive: label gpu-admission/pool=interactive, nodeSelector gpu-admission/node-pool=interactive, toleration dedicated=interactive:NoSchedule, priorityClassName interactive-high, required node affinity nvidia.com/gpu.product In (NVIDIA-L4, NVIDIA-A10G)"
    );
    assert!(!p.is_settled());
}

/// The mutated object is the user's object plus the routing: the numbers it carries come
/// back exactly. serde_json's default float parser is off by an ulp on some, which
/// policy-server would turn into a JSON patch of fields the policy never touches (found by
/// fuzz target routing_request); the rules crate enables serde_json's `float_roundtrip`.
#[test]
fn mutation_keeps_every_number_exactly() {
    let floats = [
        "2.5194700025415145e93",
        "3.6205727323048508e286",
        "5.981942013683965e-154",
        "0.1",
        "1e-300",
    ];
    let object = deployment(json!({"workload-type": "batch"}), pod_spec()).to_string();
    let object = object.replacen(
        r#""replicas":2"#,
        &format!(r#""replicas":2,"x":[{}]"#, floats.join(",")),
        1,
    );
    let request: AdmissionRequest = serde_json::from_str(&format!(
        r#"{{"uid":"u","operation":"CREATE","namespace":"team-a","object":{object}}}"#
    ))
    .unwrap();
    let v = evaluate(&request, &settings());
    let mutated = v.mutated_object.expect("routed");
    for (i, text) in floats.iter().enumerate() {
        let exact: f64 = text.parse().unwrap();
        assert_eq!(
            mutated["spec"]["x"][i].as_f64().map(f64::to_bits),
            Some(exact.to_bits()),
            "{text}"
        );
    }
}

/// A DRA pod template whose claim cannot be read is denied with the reason (it was routed
/// as a GPU pod of unknown size before); one that can be read is routed as its devices.
#[test]
fn dra_claim_that_cannot_be_read_is_denied_not_routed() {
    let spec = json!({"containers": [{"name": "main", "image": "vllm", "resources": {"claims": [{"name": "gpus"}]}}],
                      "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "four-gpus"}]});
    let object = deployment(json!({"workload-type": "batch"}), spec);
    let req = request("CREATE", "team-a", object, Value::Null);

    let missing = crate::cluster::fake::Objects::default();
    let v = Policy_::evaluate(&req, &checked::<Policy_>(&settings()), &missing);
    assert!(!v.allowed);
    assert_eq!(v.mutated_object, None);
    starts_saying(
        &v,
        "spec.template.spec: the GPUs of this pod template cannot be counted, so it cannot be routed to its pool: resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (",
    );
    ends_saying(
        &v,
        "cannot be read (not found); create it before the workload",
    );

    let template = |class: &str| {
        json!({"spec": {"spec": {"devices": {"requests": [
            {"name": "gpus", "exactly": {"deviceClassName": class, "count": 4}}]}}}})
    };
    let found = crate::cluster::fake::Objects::default().with(
        "ResourceClaimTemplate",
        "four-gpus",
        template("gpu.nvidia.com"),
    );
    let v = Policy_::evaluate(&req, &checked::<Policy_>(&settings()), &found);
    assert!(v.allowed, "{:?}", v.message);
    let routed = v.mutated_object.expect("routed as a GPU workload");
    assert_eq!(
        routed["spec"]["template"]["spec"]["nodeSelector"],
        json!({"gpu-admission/node-pool": "batch"})
    );
    // A class that is not a GPU: the template is not a GPU template (a documented pass).
    let nic = crate::cluster::fake::Objects::default().with(
        "ResourceClaimTemplate",
        "four-gpus",
        template("rdma.example.com"),
    );
    let v = Policy_::evaluate(&req, &checked::<Policy_>(&settings()), &nic);
    assert!(v.allowed);
    assert_eq!(v.mutated_object, None);
}

#[test]
fn an_object_that_cannot_take_the_change_is_denied_and_kept() {
    let object = deployment(json!({"workload-type": "batch"}), pod_spec());
    let mut req = request("CREATE", "team-a", object, Value::Null);
    let admission = crate::policy::Admission {
        request: &req,
        settings: &*checked::<Policy_>(&settings()),
        cluster: &crate::cluster::NoCluster,
        clock: &crate::clock::SystemClock,
    };
    let Ok(change) = prepare(admission) else {
        panic!("the Deployment is routed");
    };
    // The object changed after the decision: its nodeSelector is no longer a map.
    req.object["spec"]["template"]["spec"]["nodeSelector"] = json!(1);
    let v = change.apply(&mut req);
    assert!(!v.allowed);
    assert_eq!(v.code, Some(400));
    assert_eq!(v.mutated_object, None);
    let message = v.message.unwrap();
    assert!(
        message.starts_with("Deployment team-a/llm cannot be read")
            && message.contains("spec.template.spec.nodeSelector: is not an object"),
        "{message}"
    );
    // The request has its object back (partly written) for the message.
    assert_eq!(req.object["spec"]["template"]["spec"]["nodeSelector"], 1);
}
