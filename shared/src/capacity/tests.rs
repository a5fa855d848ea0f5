//! `evaluate` end to end, with a scripted cluster that checks every host call.

mod brake;
mod growth;
mod namespace_quotas;
mod offers;
mod queue;
mod quotas;
mod reserve;
mod teams;
mod upgrade;

use super::queries::{parent_query, pod_query};
use super::*;
use crate::cluster::ClusterRequest;
use crate::policy::Policy;
use crate::pools::nodes::node_query;
use policy::CapacityGate;
use rstest::rstest;
use serde_json::{Value, json};

use crate::cluster::fake::Script;
use crate::testing::{
    allows_noting, allows_recording, audit, denies, denies_saying, denies_starting, ends_saying,
    fails_starting, message, notes, notes_ending, says,
};

fn settings() -> Settings {
    serde_json::from_value(json!({
        "pools": [
            {"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}}},
            {"name": "h100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "h100"}}, "thresholdPercent": 80}
        ],
        "customKinds": crate::workload::presets::all(),
        "exemptNamespaces": ["gpu-operator"],
        "exemptPriorityClasses": ["system-node-critical"],
        // The pool tests: namespace quotas are tested in tests/namespace_quotas.rs.
        "checkNamespaceQuotas": false
    }))
    .unwrap()
}

/// `settings()` without the rollout surge charge (for tests of the replica arithmetic).
fn no_surge() -> Settings {
    Settings {
        charge_rollout_surge: false,
        ..settings()
    }
}

fn pool(name: &str) -> Pool {
    settings().pool_named(name).unwrap().1.clone()
}

/// Node list: one node per entry, `nvidia.com/gpu` allocatable.
fn nodes(gpus: &[u64]) -> String {
    let items: Vec<Value> = gpus
        .iter()
        .map(|n| json!({"status": {"allocatable": {"nvidia.com/gpu": n.to_string()}}}))
        .collect();
    json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": items}).to_string()
}

/// Pod list: one pod per entry, holding that many `nvidia.com/gpu`.
fn pods(gpus: &[u64]) -> String {
    let items: Vec<Value> = gpus
        .iter()
        .map(|n| json!({"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": n.to_string()}}}]}}))
        .collect();
    json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}).to_string()
}

/// The two calls that read pool `name`.
fn pool_calls(
    name: &str,
    node_list: String,
    pod_list: String,
) -> Vec<(ClusterRequest, Result<String, String>)> {
    vec![
        (node_query(&pool(name)), Ok(node_list)),
        (pod_query("gpu-admission/pool", &pool(name)), Ok(pod_list)),
    ]
}

fn template(pool: Option<&str>, gpus: &str) -> Value {
    let labels = match pool {
        Some(p) => json!({"app": "llm", "gpu-admission/pool": p}),
        None => json!({"app": "llm"}),
    };
    json!({"metadata": {"labels": labels},
           "spec": {"containers": [{"name": "server", "image": "vllm", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}})
}

fn deployment(replicas: u64, pool: Option<&str>, gpus: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "llm", "namespace": "ml"},
           "spec": {"replicas": replicas, "template": template(pool, gpus)}})
}

fn pod(pool: Option<&str>, gpus: &str, owner: Option<Value>) -> Value {
    let mut p = template(pool, gpus);
    p["apiVersion"] = json!("v1");
    p["kind"] = json!("Pod");
    p["metadata"]["name"] = json!("llm-0");
    p["metadata"]["namespace"] = json!("ml");
    if let Some(o) = owner {
        p["metadata"]["ownerReferences"] = json!([o]);
    }
    p
}

fn request(operation: &str, object: Value, old: Value) -> AdmissionRequest {
    let kind = object["kind"].as_str().unwrap_or("").to_string();
    serde_json::from_value(json!({
        "uid": "u", "operation": operation, "namespace": "ml", "name": "llm",
        "kind": {"group": "", "version": "v1", "kind": kind},
        "object": object, "oldObject": old
    }))
    .unwrap()
}

fn create(object: Value) -> AdmissionRequest {
    request("CREATE", object, Value::Null)
}

/// [`run`] on the creation of `deployment(replicas, pool, gpus)` with `settings()`.
fn run_deployment(replicas: u64, pool: Option<&str>, gpus: &str, cluster: &Script) -> Verdict {
    run(
        &create(deployment(replicas, pool, gpus)),
        &settings(),
        cluster,
    )
}

/// [`run`] on the creation of `deployment(replicas, Some("a100"), gpus)` with `s`.
fn run_a100(s: &Settings, replicas: u64, gpus: &str, cluster: &Script) -> Verdict {
    run(
        &create(deployment(replicas, Some("a100"), gpus)),
        s,
        cluster,
    )
}

/// Asserts that `v` denies with exactly `message`, its audit annotation capacity ending
/// with `ending`.
#[track_caller]
fn denies_with_capacity(v: &Verdict, message: &str, ending: &str) {
    denies(v, message);
    notes_ending(v, "capacity", ending);
}

fn run(req: &AdmissionRequest, s: &Settings, cluster: &Script) -> Verdict {
    let v = CapacityGate::evaluate(req, &crate::policy::checked::<CapacityGate>(s), cluster);
    assert!(
        cluster.done(),
        "host calls left unmade: {:?}",
        cluster.answers.borrow()
    );
    v
}

#[test]
fn below_threshold_is_accepted_with_the_numbers() {
    let cluster = Script::new(pool_calls(
        "a100",
        nodes(&[8, 8, 8, 8]),
        pods(&[4, 4, 8, 4]),
    ));
    let v = run_deployment(4, Some("a100"), "2", &cluster);
    assert!(v.allowed, "{v:?}");
    assert_eq!(v.audit_annotations["pool"], "a100");
    assert_eq!(
        v.audit_annotations["capacity"],
        "a100: nvidia.com/gpu used 20 + incoming 8 = 28 of 32 allocatable (87.5%), threshold 90%, fits"
    );
    assert!(v.warnings.is_empty());
}

#[test]
fn over_threshold_is_denied_with_the_numbers() {
    let cluster = Script::new(pool_calls(
        "a100",
        nodes(&[8; 8]),
        pods(&[8, 8, 8, 8, 8, 8, 2]),
    ));
    let v = run_deployment(4, Some("a100"), "2", &cluster);
    denies_with_capacity(&v, OVER_BY_8, "over");
}

/// The denial of 8 more GPUs for pool a100 (8 nodes of 8) with 50 in use.
const OVER_BY_8: &str = "pool a100: nvidia.com/gpu would be 58 of 64 allocatable (90.6%) with this workload's 8 (50 in use), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool.";

#[rstest]
#[case::exactly_at(82, true)]
#[case::one_above(83, false)]
fn exactly_at_the_threshold_is_accepted(#[case] used: u64, #[case] allowed: bool) {
    let cluster = Script::new(pool_calls("a100", nodes(&[50, 50]), pods(&[used])));
    let v = run_deployment(1, Some("a100"), "8", &cluster);
    assert_eq!(v.allowed, allowed, "{v:?}");
}

#[test]
fn per_pool_thresholds_apply() {
    // h100 has an 80% threshold: 20 + 8 = 28 of 32 = 87.5% is over.
    let cluster = Script::new(pool_calls("h100", nodes(&[8, 8, 8, 8]), pods(&[8, 8, 4])));
    let v = run_deployment(1, Some("h100"), "8", &cluster);
    denies_saying(&v, "above the 80% threshold");
}

#[test]
fn empty_pool_is_denied_clearly() {
    let cluster = Script::new(pool_calls("a100", nodes(&[]), pods(&[])));
    let v = run_deployment(1, Some("a100"), "1", &cluster);
    denies_starting(
        &v,
        "pool a100: no schedulable node offers nvidia.com/gpu for this workload's 1 (no node matches gpu-admission/pool=a100)",
    );
}

#[test]
fn non_gpu_workloads_make_no_host_call() {
    let mut d = deployment(3, Some("a100"), "1");
    d["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"limits": {"cpu": "4"}});
    let cluster = Script::none();
    let v = run(&create(d), &settings(), &cluster);
    assert_eq!(v, Verdict::accept());
    assert_eq!(*cluster.calls.borrow(), 0);
}

#[rstest]
#[case::delete("DELETE")]
#[case::connect("CONNECT")]
fn other_operations_are_accepted(#[case] op: &str) {
    let v = run(
        &request(op, Value::Null, deployment(4, Some("a100"), "8")),
        &settings(),
        &Script::none(),
    );
    assert_eq!(v, Verdict::accept());
}

#[test]
fn exempt_namespace_is_accepted_without_calls() {
    let mut r = create(deployment(400, Some("a100"), "8"));
    r.namespace = "gpu-operator".into();
    let v = run(&r, &settings(), &Script::none());
    assert!(v.allowed);
    assert_eq!(
        v.audit_annotations["exempt"],
        "namespace gpu-operator is in exemptNamespaces: not checked"
    );
}

#[test]
fn exempt_priority_class_is_not_charged() {
    let mut d = deployment(4, Some("a100"), "8");
    d["spec"]["template"]["spec"]["priorityClassName"] = json!("system-node-critical");
    let v = run(&create(d), &settings(), &Script::none());
    assert!(v.allowed);
    assert_eq!(
        v.audit_annotations["exempt"],
        "spec.template.spec (priorityClassName system-node-critical): exemptPriorityClasses"
    );
}

#[test]
fn gpu_workload_without_pool_is_accepted_with_an_annotation() {
    let v = run_deployment(2, None, "4", &Script::none());
    assert!(v.allowed);
    assert_eq!(
        v.audit_annotations["no-pool"],
        "spec.template.spec (nvidia.com/gpu: 8): no configured pool is named by the pool label or selected by the node selector; capacity not checked"
    );
}

#[test]
fn made_up_pool_label_does_not_escape_the_node_selector() {
    let mut d = deployment(1, Some("free-gpus"), "8");
    d["spec"]["template"]["spec"]["nodeSelector"] = json!({"gpu-admission/pool": "a100"});
    let cluster = Script::new(pool_calls("a100", nodes(&[8]), pods(&[])));
    let v = run(&create(d), &settings(), &cluster);
    assert!(!v.allowed, "8 of 8 is over 90%: {v:?}");
}

#[test]
fn templates_in_two_pools_check_both_in_settings_order() {
    let ray = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r", "namespace": "ml"},
    "spec": {
        "headGroupSpec": {"template": template(Some("h100"), "1")},
        "workerGroupSpecs": [{"replicas": 3, "template": template(Some("a100"), "2")}]
    }});
    let mut calls = pool_calls("a100", nodes(&[8]), pods(&[]));
    calls.extend(pool_calls("h100", nodes(&[8]), pods(&[6])));
    let cluster = Script::new(calls);
    let v = run(&create(ray), &settings(), &cluster);
    denies_starting(&v, "pool h100: nvidia.com/gpu would be 7 of 8");
    assert_eq!(v.audit_annotations["pool"], "a100,h100");
    assert!(
        audit(&v, "capacity").starts_with("a100: nvidia.com/gpu used 0 + incoming 6 = 6 of 8"),
        "{v:?}"
    );
}

#[rstest]
#[case::more_replicas(
    deployment(2, Some("a100"), "2"),
    deployment(4, Some("a100"), "2"),
    Some(4)
)]
#[case::more_gpus_per_pod(
    deployment(2, Some("a100"), "2"),
    deployment(2, Some("a100"), "3"),
    Some(2)
)]
#[case::same(
    deployment(4, Some("a100"), "2"),
    deployment(4, Some("a100"), "2"),
    None
)]
#[case::fewer(
    deployment(4, Some("a100"), "2"),
    deployment(1, Some("a100"), "2"),
    None
)]
#[case::image_change_only(deployment(4, Some("a100"), "2"), { let mut d = deployment(4, Some("a100"), "2"); d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("vllm:2"); d }, None)]
fn updates_are_charged_the_increase(
    #[case] old: Value,
    #[case] new: Value,
    #[case] incoming: Option<u64>,
) {
    let cluster = match incoming {
        Some(_) => Script::new(pool_calls("a100", nodes(&[64]), pods(&[]))),
        None => Script::none(),
    };
    let v = run(&request("UPDATE", new, old), &no_surge(), &cluster);
    match incoming {
        Some(n) => allows_noting(&v, "capacity", &format!("incoming {n} ")),
        None => assert_eq!(v, Verdict::accept()),
    }
}

/// An update of 2 replicas x 2 GPUs in `pool` (one node of `node_gpus`) from `old`: all 4
/// GPUs are charged to `pool`.
#[rstest]
#[case::update_moving_pools_is_charged_in_full_to_the_new_pool(
    "h100",
    8,
    deployment(2, Some("a100"), "2")
)]
#[case::update_with_unreadable_old_object_charges_everything("a100", 64, json!({"kind": 5}))]
fn updates_charged_in_full(#[case] pool: &str, #[case] node_gpus: u64, #[case] old: Value) {
    let cluster = Script::new(pool_calls(pool, nodes(&[node_gpus]), pods(&[])));
    let new = deployment(2, Some(pool), "2");
    let v = run(&request("UPDATE", new, old), &no_surge(), &cluster);
    allows_noting(&v, "capacity", "incoming 4 ");
}

fn rs_owner() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "llm-7d9f", "uid": "1", "controller": true})
}

#[rstest]
#[case::ownerless_skips_controller_pods("ownerless", Some(rs_owner()), false)]
#[case::ownerless_charges_bare_pods("ownerless", None, true)]
#[case::ownerless_charges_daemonset_pods("ownerless", Some(json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "controller": true})), true)]
#[case::ownerless_charges_unconfigured_owners("ownerless", Some(json!({"apiVersion": "example.com/v1", "kind": "Trainer", "name": "t", "controller": true})), true)]
#[case::all_charges_controller_pods("all", Some(rs_owner()), true)]
#[case::none_skips_bare_pods("none", None, false)]
fn charging_pods(#[case] mode: &str, #[case] owner: Option<Value>, #[case] charged: bool) {
    let mut s = settings();
    s.charge_pods = serde_json::from_value(json!(mode)).unwrap();
    let cluster = if charged {
        Script::new(pool_calls("a100", nodes(&[8]), pods(&[])))
    } else {
        Script::none()
    };
    let v = run(&create(pod(Some("a100"), "1", owner)), &s, &cluster);
    assert!(v.allowed);
    assert_eq!(
        v.audit_annotations.contains_key("capacity"),
        charged,
        "{v:?}"
    );
    assert_eq!(
        v.audit_annotations.contains_key("not-charged"),
        !charged,
        "{v:?}"
    );
}

#[test]
fn pod_of_a_gated_controller_names_its_owner() {
    let v = run(
        &create(pod(Some("a100"), "8", Some(rs_owner()))),
        &settings(),
        &Script::none(),
    );
    assert_eq!(
        v.audit_annotations["not-charged"],
        "created by ReplicaSet llm-7d9f, which was charged for its pods (chargePods: ownerless)"
    );
}

#[test]
fn replicaset_of_a_deployment_is_not_charged_even_with_charge_pods_all() {
    let mut rs = deployment(4, Some("a100"), "8");
    rs["kind"] = json!("ReplicaSet");
    rs["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm", "controller": true}]);
    let mut s = settings();
    s.charge_pods = ChargePods::All;
    let v = run(&create(rs), &s, &Script::none());
    assert!(v.allowed);
    assert!(
        audit(&v, "not-charged").starts_with("created by Deployment llm"),
        "{v:?}"
    );
}

#[test]
fn malformed_object_is_rejected_not_a_panic() {
    let mut d = deployment(1, Some("a100"), "1");
    d["spec"]["replicas"] = json!("many");
    let v = run(&create(d), &settings(), &Script::none());
    assert_eq!(v.code, Some(400));
    denies_starting(
        &v,
        "Deployment ml/llm cannot be read, so it is denied: spec.replicas: must be a non-negative integer",
    );
}

#[test]
fn host_error_fails_closed_with_what_to_grant() {
    let cluster = Script::new(vec![(
        node_query(&pool("a100")),
        Err("Policy has not been granted access to Kubernetes v1/Node resources. The violation has been reported.".into()),
    )]);
    let v = run_deployment(1, Some("a100"), "1", &cluster);
    denies(
        &v,
        "pool a100: cannot list v1/Node: not granted to this policy: add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy's contextAwareResources. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.",
    );
    assert_eq!(
        v.audit_annotations["host-error"],
        "Policy has not been granted access to Kubernetes v1/Node resources. The violation has been reported."
    );
    assert_eq!(v.audit_annotations["capacity"], "pool a100: not checked");
}

#[test]
fn host_error_with_unreadable_cluster_warn_accepts_with_a_warning() {
    let mut s = settings();
    s.unreadable_cluster = Some(crate::settings::Action::Warn);
    let mut calls = vec![(node_query(&pool("a100")), Ok(nodes(&[8])))];
    calls.push((
        pod_query("gpu-admission/pool", &pool("a100")),
        Err(format!("pods is forbidden: {}", "x".repeat(2000))),
    ));
    let cluster = Script::new(calls);
    let v = run(&create(deployment(1, Some("a100"), "1")), &s, &cluster);
    assert!(v.allowed);
    assert_eq!(
        v.warnings,
        vec![
            "pool a100: GPU capacity was not checked: cannot list v1/Pod: forbidden by RBAC: grant the policy-server's ServiceAccount list and watch on pods (accepted because unreadableCluster is warn)"
        ]
    );
    assert_eq!(v.audit_annotations["host-error"].len(), HOST_ERROR_MAX + 3);
}

fn scale(group: &str, resource: &str, old: Value, new: Value) -> AdmissionRequest {
    let scale = |r: &Value| {
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "llm", "namespace": "ml"}, "spec": {"replicas": r}})
    };
    serde_json::from_value(json!({
        "uid": "u", "operation": "UPDATE", "namespace": "ml", "name": "llm", "subResource": "scale",
        "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "resource": {"group": group, "version": "v1", "resource": resource},
        "object": scale(&new), "oldObject": scale(&old)
    }))
    .unwrap()
}

/// [`run`] with `settings()` on a scale of Deployment ml/llm from `old` to `new` replicas.
fn scale_deployment(old: Value, new: Value, cluster: &Script) -> Verdict {
    run(
        &scale("apps", "deployments", old, new),
        &settings(),
        cluster,
    )
}

/// What get_resource returns for the Deployment under field masks: no apiVersion/kind.
fn masked_parent(pool: &str, gpus: &str) -> String {
    json!({"metadata": {"name": "llm", "namespace": "ml"},
           "spec": {"template": {"metadata": {"labels": {"gpu-admission/pool": pool}},
                    "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}}})
    .to_string()
}

#[test]
fn scale_up_is_charged_the_added_replicas() {
    let mut calls = vec![(
        parent_query("apps/v1", "Deployment", "llm", "ml"),
        Ok(masked_parent("a100", "2")),
    )];
    calls.extend(pool_calls(
        "a100",
        nodes(&[8; 8]),
        pods(&[8, 8, 8, 8, 8, 8, 2]),
    ));
    let cluster = Script::new(calls);
    // 2 -> 6 replicas of 2 GPUs: 8 more on top of 50 in use = 58 of 64.
    let v = scale_deployment(json!(2), json!(6), &cluster);
    denies(&v, OVER_BY_8);
}

#[rstest]
#[case::statefulsets("apps", "statefulsets", "apps/v1", "StatefulSet")]
#[case::replicasets("apps", "replicasets", "apps/v1", "ReplicaSet")]
#[case::replicationcontrollers("", "replicationcontrollers", "v1", "ReplicationController")]
fn scale_reads_the_right_parent(
    #[case] group: &str,
    #[case] resource: &str,
    #[case] api_version: &str,
    #[case] kind: &str,
) {
    let mut calls = vec![(
        parent_query(api_version, kind, "llm", "ml"),
        Ok(masked_parent("a100", "1")),
    )];
    calls.extend(pool_calls("a100", nodes(&[8]), pods(&[])));
    let cluster = Script::new(calls);
    let v = run(
        &scale(group, resource, json!(1), json!(3)),
        &settings(),
        &cluster,
    );
    allows_noting(&v, "capacity", "incoming 2 ");
}

#[rstest]
#[case::down(json!(6), json!(2))]
#[case::same(json!(3), json!(3))]
#[case::to_zero(json!(3), json!(null))]
fn scale_down_makes_no_host_call(#[case] old: Value, #[case] new: Value) {
    let v = scale_deployment(old, new, &Script::none());
    assert_eq!(v, Verdict::accept());
}

#[test]
fn scale_of_an_unknown_resource_is_not_gated() {
    let v = run(
        &scale(
            "leaderworkerset.x-k8s.io",
            "leaderworkersets",
            json!(1),
            json!(4),
        ),
        &settings(),
        &Script::none(),
    );
    assert!(v.allowed);
    assert!(
        audit(&v, "not-charged")
            .starts_with("scale of leaderworkersets.leaderworkerset.x-k8s.io is not gated"),
        "{v:?}"
    );
}

#[test]
fn scale_with_bad_replicas_is_rejected() {
    let v = scale_deployment(json!(1), json!(-3), &Script::none());
    assert_eq!(v.code, Some(400));
    denies(
        &v,
        "scale of deployments ml/llm: spec.replicas must be a non-negative integer, got -3",
    );
}

#[rstest]
#[case::host_error(Err("deployments.apps \"llm\" is forbidden".to_string()), "scale of Deployment ml/llm: cannot get apps/v1/Deployment ml/llm: forbidden by RBAC: grant the policy-server's ServiceAccount get on deployments (apiGroup apps). The GPU capacity gate")]
#[case::not_an_object(Ok("[1]".to_string()), "scale of Deployment ml/llm: cannot get apps/v1/Deployment ml/llm: the answer could not be read (expected an object, got [1])")]
#[case::spec_not_an_object(Ok(r#"{"spec": 5}"#.to_string()), "scale of Deployment ml/llm: cannot get apps/v1/Deployment ml/llm: the answer could not be read (spec is not an object)")]
fn scale_parent_failures_fail_closed(#[case] answer: Result<String, String>, #[case] start: &str) {
    let cluster = Script::new(vec![(
        parent_query("apps/v1", "Deployment", "llm", "ml"),
        answer,
    )]);
    let v = scale_deployment(json!(1), json!(2), &cluster);
    denies_starting(&v, start);
}

#[test]
fn scale_of_a_cpu_workload_is_accepted_after_reading_it() {
    let parent = json!({"spec": {"template": {"spec": {"containers": [{"resources": {"limits": {"cpu": "1"}}}]}}}});
    let cluster = Script::new(vec![(
        parent_query("apps/v1", "Deployment", "llm", "ml"),
        Ok(parent.to_string()),
    )]);
    let v = scale_deployment(json!(1), json!(20), &cluster);
    assert_eq!(v, Verdict::accept());
}

#[test]
fn other_subresources_are_accepted() {
    let mut r = create(pod(Some("a100"), "8", None));
    r.operation = "UPDATE".into();
    r.sub_resource = "status".into();
    assert_eq!(run(&r, &settings(), &Script::none()), Verdict::accept());
}

#[test]
fn mig_and_time_sliced_pools_account_per_resource_name() {
    let node = json!({"items": [
        {"status": {"allocatable": {"nvidia.com/mig-3g.40gb": "8", "nvidia.com/mig-1g.10gb": "14"}}}
    ]})
    .to_string();
    let used = json!({"items": [
        {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/mig-1g.10gb": "13"}}}]}}
    ]})
    .to_string();
    let mut d = deployment(2, Some("a100"), "1");
    d["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"limits": {"nvidia.com/mig-3g.40gb": "2"}});
    let cluster = Script::new(pool_calls("a100", node.clone(), used.clone()));
    let v = run(&create(d.clone()), &settings(), &cluster);
    assert!(v.allowed, "4 of 8 3g slices: {v:?}");

    d["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"limits": {"nvidia.com/mig-1g.10gb": "1"}});
    let cluster = Script::new(pool_calls("a100", node, used));
    let v = run(&create(d), &settings(), &cluster);
    assert!(!v.allowed, "15 of 14 1g slices: {v:?}");
}

/// A DRA claim that cannot be read is denied before the pool is read, with the reason in
/// one sentence that ends with what to grant (the reason was once in the middle of it).
#[test]
fn unreadable_dra_claim_is_denied_before_the_pool_is_read() {
    let mut object = deployment(3, Some("a100"), "0");
    let spec = &mut object["spec"]["template"]["spec"];
    spec["containers"][0]["resources"] = json!({"claims": [{"name": "gpus"}]});
    spec["resourceClaims"] = json!([{"name": "gpus", "resourceClaimTemplateName": "four-gpus"}]);
    let get = ClusterRequest::Get(crate::cluster::GetResource {
        api_version: "resource.k8s.io/v1".into(),
        kind: "ResourceClaimTemplate".into(),
        name: "four-gpus".into(),
        namespace: Some("ml".into()),
        disable_cache: false,
        field_masks: Some(["spec.spec.devices".to_string()].into()),
    });
    let script = Script::new(vec![(get.clone(), Err("not found".into()))]);
    let v = run(&create(object.clone()), &settings(), &script);
    denies(
        &v,
        "the capacity gate cannot count the GPUs of this workload, so it cannot admit it: spec.template.spec: resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (not found); create it before the workload",
    );
    // Readable: 3 replicas x 4 devices are charged to the pool.
    let template = json!({"spec": {"spec": {"devices": {"requests": [
        {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4}}]}}}});
    let mut answers = vec![(get, Ok(template.to_string()))];
    answers.extend(pool_calls("a100", nodes(&[8, 8]), pods(&[])));
    let script = Script::new(answers);
    let v = run(&create(object), &settings(), &script);
    assert!(v.allowed, "{:?}", v.message);
    assert_eq!(
        v.audit_annotations.get("capacity").map(String::as_str),
        Some(
            "a100: nvidia.com/gpu used 0 + incoming 12 = 12 of 16 allocatable (75.0%), threshold 90%, fits"
        )
    );
}
