//! `evaluate` end to end, with a scripted cluster that checks every host call.

use super::*;
use crate::capacity::queries::parent_query;
use crate::cluster::ClusterRequest;
use crate::policy::Policy;
use crate::pools::nodes::node_query;
use crate::settings::ValidateSettings;
use crate::testing::{denies, denies_saying, ends_saying, starts_saying};
use rstest::rstest;
use serde_json::{Value, json};

use crate::cluster::fake::Script;

fn settings() -> Settings {
    serde_json::from_value(json!({
        "pools": [
            {"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}}, "thresholdPercent": 90},
            {"name": "h100-burst", "capacity": {"nvidia.com/gpu": 128}}
        ],
        "namespaceMaxGpus": [{"namespaces": ["research"], "maxGpus": 16}],
        "customKinds": [{"group": "leaderworkerset.x-k8s.io", "kind": "LeaderWorkerSet"}],
        "exemptNamespaces": ["gpu-operator"]
    }))
    .unwrap()
}

fn with(mut s: Value, key: &str, value: Value) -> Settings {
    s[key] = value;
    serde_json::from_value(s).unwrap()
}

fn settings_json() -> Value {
    serde_json::to_value(settings()).unwrap()
}

/// A Deployment as the host answers it (masked: the template only).
fn deployment(pool: Option<&str>, gpus: &str) -> String {
    let labels = match pool {
        Some(p) => json!({"app": "llm", "gpu-admission/pool": p}),
        None => json!({"app": "llm"}),
    };
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llm", "namespace": "ml"},
           "spec": {"template": {"metadata": {"labels": labels},
             "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}}})
    .to_string()
}

fn nodes(gpus: &[u64]) -> String {
    let items: Vec<Value> = gpus
        .iter()
        .map(|n| json!({"metadata": {"name": "n"}, "status": {"allocatable": {"nvidia.com/gpu": n.to_string()}}}))
        .collect();
    json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": items}).to_string()
}

fn get_deployment() -> ClusterRequest {
    parent_query("apps/v1", "Deployment", "llm", "ml")
}

fn a100_nodes() -> ClusterRequest {
    node_query(&settings().pools[0])
}

fn hpa(max: u64, metrics: Value) -> Value {
    json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": "llm", "namespace": "ml"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm"},
                    "minReplicas": 1, "maxReplicas": max, "metrics": metrics}})
}

fn cpu() -> Value {
    json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}])
}

fn external() -> Value {
    json!([{"type": "External", "external": {"metric": {"name": "vllm:num_requests_waiting"},
            "target": {"type": "AverageValue", "averageValue": "5"}}}])
}

fn scaled_object(max: Option<u64>, triggers: Value) -> Value {
    let mut spec = json!({"scaleTargetRef": {"name": "llm"}, "triggers": triggers});
    if let Some(m) = max {
        spec["maxReplicaCount"] = json!(m);
    }
    json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
           "metadata": {"name": "llm", "namespace": "ml"}, "spec": spec})
}

fn request(operation: &str, object: Value, old: Value) -> AdmissionRequest {
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("")
        .to_string();
    serde_json::from_value(json!({
        "uid": "1", "operation": operation, "namespace": namespace,
        "name": object["metadata"]["name"], "object": object, "oldObject": old,
        "kind": {"group": "autoscaling", "version": "v2", "kind": object["kind"]},
    }))
    .unwrap()
}

fn create(object: Value) -> AdmissionRequest {
    request("CREATE", object, Value::Null)
}

/// [`run`] with `settings()` on the creation of `object`.
fn created(object: Value, script: &Script) -> Verdict {
    run(&create(object), &settings(), script)
}

fn run(r: &AdmissionRequest, s: &Settings, script: &Script) -> Verdict {
    let v =
        policy::Autoscaler::evaluate(r, &crate::policy::checked::<policy::Autoscaler>(s), script);
    assert!(script.done(), "host calls not made");
    v
}

/// The host's answers for Deployment llm (2 nvidia.com/gpu per replica) in pool a100 (8
/// nodes of 8 GPUs).
fn llm_on_a100() -> Script {
    Script::new(vec![
        (get_deployment(), Ok(deployment(Some("a100"), "2"))),
        (a100_nodes(), Ok(nodes(&[8; 8]))),
    ])
}

/// The host's answer for Deployment llm (`gpus` per replica, in `pool`) alone.
fn target_only(pool: Option<&str>, gpus: &str) -> Script {
    Script::new(vec![(get_deployment(), Ok(deployment(pool, gpus)))])
}

/// `hpa(10, external())` in namespace research, and the host's answer for its Deployment
/// (4 GPUs per replica, in no pool).
fn in_research() -> (Value, Script) {
    let mut object = hpa(10, external());
    object["metadata"]["namespace"] = json!("research");
    let script = Script::new(vec![(
        parent_query("apps/v1", "Deployment", "llm", "research"),
        Ok(deployment(None, "4")),
    )]);
    (object, script)
}

/// [`created`] with the host's answers of [`llm_on_a100`].
fn on_a100(object: Value) -> Verdict {
    created(object, &llm_on_a100())
}

const CPU_ONLY: &str = "HorizontalPodAutoscaler ml/llm: it scales Deployment llm (2 nvidia.com/gpu per replica) on cpu only, and CPU utilization does not follow GPU inference load. Scale on requests per second, queue depth or a GPU metric with a Pods or External metric (e.g. vllm:num_requests_waiting or DCGM_FI_DEV_GPU_UTIL through a metrics adapter), or with a KEDA ScaledObject and a prometheus trigger.";

#[test]
fn hpa_on_cpu_only_for_a_gpu_deployment_is_denied_without_reading_the_pool_twice() {
    let v = on_a100(hpa(10, cpu()));
    denies(&v, CPU_ONLY);
    assert_eq!(
        v.audit_annotations["target"],
        "Deployment ml/llm: 2 nvidia.com/gpu per replica, maxReplicas 10"
    );
    assert_eq!(v.audit_annotations["signals"], "cpu");
    assert_eq!(
        v.audit_annotations["ceiling"],
        "a100: 64 nvidia.com/gpu (nodes), 32 fit"
    );
}

#[test]
fn hpa_without_metrics_scales_on_cpu() {
    let mut object = hpa(10, Value::Null);
    object["spec"].as_object_mut().unwrap().remove("metrics");
    let script = target_only(None, "1");
    let v = created(object, &script);
    denies_saying(
        &v,
        "on cpu only (spec.metrics is empty: the default is 80% average CPU utilization)",
    );
    assert_eq!(
        v.audit_annotations["no-pool"],
        "spec.template.spec (1 nvidia.com/gpu): no configured pool is named by the pool label or selected by the node selector; pool ceiling not checked"
    );
}

#[test]
fn hpa_on_an_external_metric_within_the_pool_is_accepted() {
    let v = on_a100(hpa(32, external()));
    assert!(v.allowed, "{v:?}");
    assert!(v.warnings.is_empty());
    assert_eq!(
        v.audit_annotations["signals"],
        "External vllm:num_requests_waiting"
    );
}

const TOO_MANY: &str = "HorizontalPodAutoscaler ml/llm: maxReplicas 40 x 2 nvidia.com/gpu per replica = 80 nvidia.com/gpu, more than pool a100 can ever hold (64 nvidia.com/gpu allocatable on its 8 nodes). The largest maxReplicas that fits is 32: set maxReplicas to 32 or less. If pool a100 autoscales, give its ceiling in the policy settings (pools[0].maxAllocatable, karpenterNodePool or clusterAutoscaler).";

#[test]
fn max_replicas_above_the_pool_is_denied_with_the_largest_that_fits() {
    let v = on_a100(hpa(40, external()));
    denies(&v, TOO_MANY);
    // Both findings in one message.
    let v = on_a100(hpa(40, cpu()));
    starts_saying(&v, CPU_ONLY);
    ends_saying(
        &v,
        TOO_MANY.trim_start_matches("HorizontalPodAutoscaler ml/llm:"),
    );
}

/// The gate's reserves and headroom on the pool change nothing here: 32 x 2 fit the pool's
/// 64 GPUs although other types than interactive may use only 64 - 16 - 8 of them.
#[test]
fn reserves_and_headroom_do_not_bound_max_replicas() {
    let mut pools = settings_json()["pools"].clone();
    pools[0]["reserve"] = json!({"interactive": 16});
    pools[0]["headroom"] = json!(8);
    let s = with(settings_json(), "pools", pools);
    crate::settings::ValidateSettings::validate(&s).unwrap();
    let script = || llm_on_a100();
    assert!(run(&create(hpa(32, external())), &s, &script()).allowed);
    let v = run(&create(hpa(40, external())), &s, &script());
    denies(&v, TOO_MANY);
}

#[test]
fn a_declared_capacity_needs_no_node_list() {
    let script = target_only(Some("h100-burst"), "8");
    let v = created(hpa(17, external()), &script);
    denies(
        &v,
        "HorizontalPodAutoscaler ml/llm: maxReplicas 17 x 8 nvidia.com/gpu per replica = 136 nvidia.com/gpu, more than pool h100-burst can ever hold (128 nvidia.com/gpu declared as its capacity in the policy settings). The largest maxReplicas that fits is 16: set maxReplicas to 16 or less.",
    );
    let script = target_only(Some("h100-burst"), "8");
    assert!(created(hpa(16, external()), &script).allowed);
}

#[test]
fn a_pool_offering_none_of_the_resource_fits_nothing() {
    let mut d: Value = serde_json::from_str(&deployment(Some("h100-burst"), "1")).unwrap();
    d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] =
        json!({"amd.com/gpu": "1"});
    let script = Script::new(vec![(get_deployment(), Ok(d.to_string()))]);
    let v = created(hpa(2, external()), &script);
    denies(
        &v,
        "HorizontalPodAutoscaler ml/llm: maxReplicas 2 x 1 amd.com/gpu per replica = 2 amd.com/gpu, more than pool h100-burst can ever hold (its capacity in the policy settings declares no amd.com/gpu). Not one replica fits: ask for fewer GPUs per replica, or target another pool or namespace.",
    );
}

#[test]
fn the_namespace_maximum_counts_every_gpu() {
    let (object, script) = in_research();
    let v = created(object, &script);
    denies(
        &v,
        "HorizontalPodAutoscaler research/llm: maxReplicas 10 x 4 GPUs per replica = 40 GPUs, more than the 16 GPUs one autoscaler may scale to in namespace research (namespaceMaxGpus[0] in the policy settings). The largest maxReplicas that fits is 4: set maxReplicas to 4 or less.",
    );
    assert_eq!(
        v.audit_annotations["ceiling"],
        "namespace research: 16 GPUs (namespaceMaxGpus[0]), 4 fit"
    );
}

#[test]
fn below_min_replicas_says_to_lower_both() {
    let (mut object, script) = in_research();
    object["spec"]["minReplicas"] = json!(6);
    let v = created(object, &script);
    ends_saying(
        &v,
        "The largest maxReplicas that fits is 4, below minReplicas 6: set both to 4 or less.",
    );
}

#[test]
fn a_non_gpu_target_is_accepted_after_the_target_lookup_only() {
    let mut d: Value = serde_json::from_str(&deployment(Some("a100"), "0")).unwrap();
    d["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"limits": {"cpu": "2"}});
    let script = Script::new(vec![(get_deployment(), Ok(d.to_string()))]);
    let v = created(hpa(100, cpu()), &script);
    assert!(v.allowed && v.warnings.is_empty());
    assert_eq!(v.audit_annotations["target"], "Deployment ml/llm: no GPU");
}

#[test]
fn keda_prometheus_is_accepted_and_cpu_triggers_warn() {
    let prometheus = json!([{"type": "prometheus", "metadata": {"serverAddress": "http://prometheus:9090",
        "query": "sum(vllm:num_requests_waiting)", "threshold": "5"}}]);
    let v = on_a100(scaled_object(Some(8), prometheus));
    assert!(v.allowed && v.warnings.is_empty(), "{v:?}");

    let cpu_trigger =
        json!([{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}]);
    let v = on_a100(scaled_object(Some(8), cpu_trigger.clone()));
    assert!(v.allowed);
    assert_eq!(
        v.warnings,
        vec![
            "ScaledObject ml/llm: it scales Deployment llm (2 nvidia.com/gpu per replica) on cpu triggers only, and CPU utilization does not follow GPU inference load. Add a trigger on requests per second, queue depth or a GPU metric (e.g. a prometheus trigger on vllm:num_requests_waiting or DCGM_FI_DEV_GPU_UTIL)."
        ]
    );

    // KEDA's default of 100 replicas is the bound when maxReplicaCount is left out.
    let v = on_a100(scaled_object(None, cpu_trigger));
    denies_saying(
        &v,
        "ScaledObject ml/llm: maxReplicaCount 100 (KEDA's default) x 2 nvidia.com/gpu per replica = 200 nvidia.com/gpu, more than pool a100 can ever hold",
    );
    assert_eq!(v.warnings.len(), 1, "the trigger warning too");
}

#[rstest]
#[case::deny("deny", false, 0)]
#[case::warn("warn", true, 1)]
#[case::allow("allow", true, 0)]
fn resource_metrics_only_is_a_setting(
    #[case] action: &str,
    #[case] allowed: bool,
    #[case] warnings: usize,
) {
    let s = with(settings_json(), "resourceMetricsOnly", json!(action));
    let v = run(&create(hpa(4, cpu())), &s, &llm_on_a100());
    assert_eq!(v.allowed, allowed);
    assert_eq!(v.warnings.len(), warnings);
}

#[test]
fn keda_made_hpa_follows_the_keda_setting() {
    let mut object = hpa(4, cpu());
    object["metadata"]["name"] = json!("keda-hpa-llm");
    object["metadata"]["ownerReferences"] = json!([{"apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject", "name": "llm", "controller": true, "uid": "u"}]);
    let v = on_a100(object);
    assert!(v.allowed);
    assert!(
        v.warnings[0].contains("(it is made by ScaledObject llm from its triggers)")
            && v.warnings[0].contains("to ScaledObject llm"),
        "{v:?}"
    );
}

#[test]
fn scaled_job_counts_its_inline_job() {
    let job = json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledJob",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"maxReplicaCount": 10, "triggers": [{"type": "rabbitmq"}],
                 "jobTargetRef": {"parallelism": 2, "template": {"metadata": {"labels": {"gpu-admission/pool": "h100-burst"}},
                   "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}});
    let v = created(job, &Script::none());
    denies(
        &v,
        "ScaledJob ml/train: maxReplicaCount 10 x 16 nvidia.com/gpu per job = 160 nvidia.com/gpu, more than pool h100-burst can ever hold (128 nvidia.com/gpu declared as its capacity in the policy settings). The largest maxReplicaCount that fits is 8: set maxReplicaCount to 8 or less.",
    );
}

#[test]
fn custom_kind_targets_are_read_with_their_masks() {
    let mut object = hpa(9, external());
    object["spec"]["scaleTargetRef"] = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": "llm"});
    let query = target::query(
        &object::TargetRef {
            api_version: "leaderworkerset.x-k8s.io/v1".into(),
            kind: "LeaderWorkerSet".into(),
            name: "llm".into(),
        },
        "ml",
        &settings(),
    )
    .unwrap();
    let lws = json!({"metadata": {"name": "llm"}, "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2,
        "workerTemplate": {"metadata": {"labels": {"gpu-admission/pool": "h100-burst"}},
          "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}});
    let script = Script::new(vec![(query, Ok(lws.to_string()))]);
    let v = created(object, &script);
    denies_saying(
        &v,
        "maxReplicas 9 x 16 nvidia.com/gpu per replica = 144 nvidia.com/gpu",
    );
}

#[test]
fn unknown_target_kinds_are_accepted_with_a_warning_and_no_call() {
    let mut object = hpa(3, cpu());
    object["spec"]["scaleTargetRef"] =
        json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "llm"});
    let v = created(object, &Script::none());
    assert!(v.allowed);
    assert_eq!(
        v.warnings,
        vec![
            "HorizontalPodAutoscaler ml/llm: the GPUs of Rollout llm (argoproj.io/v1alpha1) are not counted: Rollout is not a Deployment, StatefulSet, ReplicaSet or ReplicationController, nor a kind described in customKinds; describe it there to check this autoscaler"
        ]
    );
}

const FORBIDDEN: &str = "HorizontalPodAutoscaler ml/llm: cannot get apps/v1/Deployment ml/llm: forbidden by RBAC: grant the policy-server's ServiceAccount get on deployments (apiGroup apps). The GPU autoscaler policy denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";

#[rstest]
#[case::forbidden(
    "Callback evaluation failure: deployments.apps \"llm\" is forbidden: User \"system:serviceaccount:kubewarden:policy-server\" cannot get resource \"deployments\"",
    FORBIDDEN
)]
#[case::not_granted(
    "Callback evaluation failure: Policy has not been granted access to Kubernetes apps/v1/Deployment resources. The violation has been reported.",
    "HorizontalPodAutoscaler ml/llm: cannot get apps/v1/Deployment ml/llm: not granted to this policy: add {apiVersion: apps/v1, kind: Deployment} to the ClusterAdmissionPolicy's contextAwareResources. The GPU autoscaler policy denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error."
)]
#[case::not_found(
    "Callback evaluation failure: Cannot find apps/v1/Deployment named 'llm' inside of namespace 'Some(\"ml\")'",
    "HorizontalPodAutoscaler ml/llm: its target Deployment ml/llm was not found: create the target before its autoscaler, or correct spec.scaleTargetRef. The GPU autoscaler policy denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error."
)]
fn an_unreadable_target_fails_closed(#[case] error: &str, #[case] message: &str) {
    let script = Script::new(vec![(get_deployment(), Err(error.into()))]);
    let v = created(hpa(4, external()), &script);
    denies(&v, message);
    assert_eq!(v.audit_annotations["host-error"], error);
}

/// `unreadableCluster: warn`, or `failOpen: true` in the old spelling.
#[rstest]
#[case::unreadable_cluster_warn("unreadableCluster", json!("warn"))]
#[case::old_spelling_fail_open(
    "failOpen",
    json!(true)
)]
fn unreadable_cluster_warn_accepts_with_a_warning(#[case] field: &str, #[case] value: Value) {
    let s = with(settings_json(), field, value);
    let script = Script::new(vec![(get_deployment(), Err("forbidden".into()))]);
    let v = run(&create(hpa(4, external())), &s, &script);
    assert!(v.allowed);
    assert_eq!(
        v.warnings,
        vec![
            "HorizontalPodAutoscaler ml/llm: GPU limits were not checked: cannot get apps/v1/Deployment ml/llm: forbidden by RBAC: grant the policy-server's ServiceAccount get on deployments (apiGroup apps) (accepted because unreadableCluster is warn)"
        ]
    );
}

#[test]
fn an_unreadable_pool_fails_closed_after_the_other_findings() {
    let script = Script::new(vec![
        (get_deployment(), Ok(deployment(Some("a100"), "2"))),
        (
            a100_nodes(),
            Err("Callback evaluation failure: Policy has not been granted access to Kubernetes v1/Node resources. The violation has been reported.".into()),
        ),
    ]);
    let v = created(hpa(4, cpu()), &script);
    assert!(!v.allowed);
    assert_eq!(
        v.message.as_deref().unwrap(),
        format!(
            "{CPU_ONLY} pool a100: cannot list v1/Node: not granted to this policy: add {{apiVersion: v1, kind: Node}} to the ClusterAdmissionPolicy's contextAwareResources. The GPU autoscaler policy denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error."
        )
    );
}

#[test]
fn answers_that_are_not_a_workload_fail_closed() {
    let script = Script::new(vec![(get_deployment(), Ok("[1, 2]".into()))]);
    let v = created(hpa(4, external()), &script);
    denies(
        &v,
        "HorizontalPodAutoscaler ml/llm: cannot get apps/v1/Deployment ml/llm: the answer could not be read (expected an object, got a list). The GPU autoscaler policy denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.",
    );
}

#[test]
fn nothing_to_check_makes_no_call() {
    let s = settings();
    // Not an autoscaler, DELETE, exempt namespace, a status update, metadata-only update.
    let deployment: Value = serde_json::from_str(&deployment(Some("a100"), "8")).unwrap();
    assert!(run(&create(deployment), &s, &Script::none()).allowed);
    assert!(
        run(
            &request("DELETE", hpa(4, cpu()), Value::Null),
            &s,
            &Script::none()
        )
        .allowed
    );
    let mut exempt = hpa(4, cpu());
    exempt["metadata"]["namespace"] = json!("gpu-operator");
    let v = run(&create(exempt), &s, &Script::none());
    assert_eq!(
        v.audit_annotations["exempt"],
        "namespace gpu-operator is in exemptNamespaces: not checked"
    );
    let mut status = create(hpa(4, cpu()));
    status.sub_resource = "status".into();
    assert!(run(&status, &s, &Script::none()).allowed);
    let old = hpa(400, cpu());
    let mut new = old.clone();
    new["metadata"]["finalizers"] = json!(["finalizer.keda.sh"]);
    assert!(run(&request("UPDATE", new, old), &s, &Script::none()).allowed);
}

#[test]
fn an_update_that_raises_max_replicas_is_checked() {
    let script = llm_on_a100();
    let v = run(
        &request("UPDATE", hpa(40, external()), hpa(10, external())),
        &settings(),
        &script,
    );
    denies(&v, TOO_MANY);
}

#[test]
fn malformed_autoscalers_are_rejected_with_400() {
    let mut object = hpa(4, cpu());
    object["spec"]["maxReplicas"] = json!("ten");
    let v = created(object, &Script::none());
    assert_eq!(v.code, Some(400));
    denies(
        &v,
        "HorizontalPodAutoscaler ml/llm cannot be read, so it is denied: spec.maxReplicas: must be a non-negative integer, got \"ten\". Fix the manifest (for a custom resource, check its customKinds entry in the policy settings)",
    );
}

/// The target's DRA claim cannot be read: denied as uncountable (the message once said the
/// Deployment could not be read), whatever unreadableCluster says; readable, its devices
/// count.
#[test]
fn a_target_whose_dra_claim_cannot_be_read_is_denied_as_uncountable() {
    let target = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llm", "namespace": "ml"},
        "spec": {"template": {"metadata": {"labels": {"gpu-admission/pool": "a100"}},
          "spec": {"containers": [{"resources": {"claims": [{"name": "gpus"}]}}],
                   "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "four-gpus"}]}}}})
    .to_string();
    let claim = crate::dra::claim_query(
        &crate::dra::ClaimRef::Template("four-gpus".into()),
        "ml",
        &crate::dra::DraSettings::default(),
    );
    let warn = with(settings_json(), "unreadableCluster", json!("warn"));
    for s in [settings(), warn] {
        let script = Script::new(vec![
            (get_deployment(), Ok(target.clone())),
            (claim.clone(), Err("not found".into())),
        ]);
        let v = run(&create(hpa(40, external())), &s, &script);
        denies(
            &v,
            "HorizontalPodAutoscaler ml/llm: the GPUs of Deployment llm cannot be counted, so this autoscaler cannot be checked: spec.template.spec: resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (not found); create it before the workload",
        );
    }
    let template = json!({"spec": {"spec": {"devices": {"requests": [
        {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4}}]}}}});
    let script = Script::new(vec![
        (get_deployment(), Ok(target)),
        (claim, Ok(template.to_string())),
        (a100_nodes(), Ok(nodes(&[8; 8]))),
    ]);
    let v = created(hpa(40, external()), &script);
    denies_saying(
        &v,
        "maxReplicas 40 x 4 nvidia.com/gpu per replica = 160 nvidia.com/gpu",
    );
}

/// The standard scale-from-zero serving setup: a pool with `maxAllocatable: 64` and no
/// Node yet. An HPA of 8 replicas x 2 GPUs fits under the ceiling (as the capacity gate,
/// given the same pool, accepts those 8 replicas); 40 x 2 does not, and the message names
/// the ceiling. The same with a Karpenter NodePool and a cluster-autoscaler node group.
#[rstest]
#[case::max_allocatable(json!({"maxAllocatable": {"nvidia.com/gpu": 64}}), None, "64 nvidia.com/gpu (maxAllocatable)", "64 nvidia.com/gpu from maxAllocatable in settings")]
#[case::karpenter(json!({"karpenterNodePool": "serving"}), Some(r#"{"spec": {"limits": {"nvidia.com/gpu": "64"}}}"#), "64 nvidia.com/gpu (NodePool serving)", "64 nvidia.com/gpu from NodePool serving spec.limits")]
#[case::cluster_autoscaler(json!({"clusterAutoscaler": {"maxNodes": 8, "gpusPerNode": {"nvidia.com/gpu": 8}}}), None, "64 nvidia.com/gpu (clusterAutoscaler)", "64 nvidia.com/gpu from clusterAutoscaler: 8 nodes x 8 nvidia.com/gpu")]
fn scale_from_zero_fits_under_the_pools_ceiling(
    #[case] ceiling: Value,
    #[case] node_pool: Option<&str>,
    #[case] audit: &str,
    #[case] described: &str,
) {
    let mut pool = json!({"name": "serving", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "serving"}}});
    for (k, v) in ceiling.as_object().unwrap() {
        pool[k] = v.clone();
    }
    let s: Settings = serde_json::from_value(json!({"pools": [pool]})).unwrap();
    s.validate().unwrap();
    let calls = || {
        let mut calls = vec![
            (get_deployment(), Ok(deployment(Some("serving"), "2"))),
            (node_query(&s.pools[0]), Ok(nodes(&[]))),
        ];
        if let Some(limits) = node_pool {
            calls.push((
                crate::pools::ceiling::node_pool_query("serving"),
                Ok(limits.to_string()),
            ));
        }
        calls
    };
    let v = run(&create(hpa(8, external())), &s, &Script::new(calls()));
    assert!(v.allowed, "{:?}", v.message);
    assert_eq!(
        v.audit_annotations["ceiling"],
        format!("serving: {audit}, 32 fit")
    );
    let v = run(&create(hpa(40, external())), &s, &Script::new(calls()));
    denies(
        &v,
        &format!(
            "HorizontalPodAutoscaler ml/llm: maxReplicas 40 x 2 nvidia.com/gpu per replica = 80 nvidia.com/gpu, more than pool serving can ever hold ({described}). The largest maxReplicas that fits is 32: set maxReplicas to 32 or less."
        ),
    );
}
