//! `evaluate` on the clusters people run: pools with a ceiling (static, a Karpenter
//! NodePool, cluster-autoscaler's node count), scale from zero, suspended and queued
//! workloads, pods no node can hold, fragmentation, rollout surge, alternatives in a
//! denial, and thresholds by schedule window.

use super::*;
use crate::admission::ValidateSettings;
use crate::clock::FixedClock;
use crate::pools::ceiling::node_pool_query;

const GPU: &str = "nvidia.com/gpu";

/// `settings()` with pool a100's fields set from `fields` (merged into its JSON).
fn with_a100(fields: Value) -> Settings {
    let mut v = serde_json::to_value(settings()).unwrap();
    for (k, value) in fields.as_object().unwrap() {
        v["pools"][0][k] = value.clone();
    }
    let s: Settings = serde_json::from_value(v).unwrap();
    s.validate().unwrap();
    s
}

/// Named nodes: (name, allocatable nvidia.com/gpu).
fn named_nodes(nodes: &[(&str, u64)]) -> String {
    let items: Vec<Value> = nodes
        .iter()
        .map(|(name, n)| {
            json!({"metadata": {"name": name, "labels": {"gpu-admission/pool": "a100"}},
                   "status": {"allocatable": {GPU: n.to_string(), "cpu": "96"}}})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "NodeList", "items": items}).to_string()
}

/// Pods bound to nodes: (node or "" for pending, GPUs).
fn bound_pods(pods: &[(&str, u64)]) -> String {
    let items: Vec<Value> = pods
        .iter()
        .map(|(node, n)| {
            let mut spec = json!({"containers": [{"resources": {"limits": {GPU: n.to_string()}}}]});
            if !node.is_empty() {
                spec["nodeName"] = json!(node);
            }
            json!({"metadata": {"name": "p"}, "spec": spec})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "PodList", "items": items}).to_string()
}

fn node_pool_answer(limits: Value) -> String {
    json!({"metadata": {"name": "a100"}, "spec": {"limits": limits}}).to_string()
}

// -- ceilings ------------------------------------------------------------------------

/// [`run_a100`] on `replicas` x 2 GPUs, pool a100 having `maxAllocatable: 64`, no Node and
/// no Pod.
fn zero_nodes_under_64(replicas: u64) -> Verdict {
    let s = with_a100(json!({"maxAllocatable": {GPU: 64}}));
    let cluster = Script::new(pool_calls("a100", nodes(&[]), pods(&[])));
    run_a100(&s, replicas, "2", &cluster)
}

#[test]
fn zero_node_pool_with_a_static_ceiling_accepts_what_fits_under_it() {
    allows_recording(
        &zero_nodes_under_64(4),
        "capacity",
        "a100: nvidia.com/gpu used 0 + incoming 8 = 8 of 64 it can grow to (12.5%), threshold 90%, fits (ceiling 64 from maxAllocatable in settings, 0 allocatable now)",
    );
    // Over the ceiling: denied, saying which number decided.
    let s = with_a100(json!({"maxAllocatable": {GPU: 64}}));
    let cluster = Script::new(pool_calls(
        "a100",
        nodes(&[8, 8]),
        pods(&[8, 8, 8, 8, 8, 8, 2]),
    ));
    denies(
        &run_a100(&s, 4, "2", &cluster),
        "pool a100: nvidia.com/gpu would be 58 of 64 it can grow to (90.6%) with this workload's 8 (50 in use), above the 90% threshold (room for 7 more; ceiling 64 from maxAllocatable in settings, 16 allocatable now). Wait for capacity, lower replicas, or target another pool.",
    );
}

/// The scale-from-zero serving setup of the autoscaler policy's test of the same name: a
/// pool with `maxAllocatable: 64` and no Node accepts 8 replicas of 2 GPUs.
#[test]
fn scale_from_zero_accepts_what_the_autoscaler_policy_accepts() {
    allows_recording(
        &zero_nodes_under_64(8),
        "capacity",
        "a100: nvidia.com/gpu used 0 + incoming 16 = 16 of 64 it can grow to (25.0%), threshold 90%, fits (ceiling 64 from maxAllocatable in settings, 0 allocatable now)",
    );
}

#[test]
fn a_ceiling_below_what_is_allocatable_changes_nothing() {
    let s = with_a100(json!({"maxAllocatable": {GPU: 16}}));
    let cluster = Script::new(pool_calls("a100", nodes(&[8; 4]), pods(&[8, 8, 8])));
    allows_recording(
        &run_a100(&s, 1, "4", &cluster),
        "capacity",
        "a100: nvidia.com/gpu used 24 + incoming 4 = 28 of 32 allocatable (87.5%), threshold 90%, fits (ceiling 16 from maxAllocatable in settings, 32 allocatable now)",
    );
}

#[test]
fn a_ceiling_of_another_resource_does_not_raise_this_one() {
    let s = with_a100(json!({"maxAllocatable": {"nvidia.com/mig-1g.10gb": 56}}));
    let cluster = Script::new(pool_calls("a100", nodes(&[]), pods(&[])));
    denies_starting(
        &run_a100(&s, 1, "1", &cluster),
        "pool a100: no schedulable node offers nvidia.com/gpu for this workload's 1 (no node matches gpu-admission/pool=a100)",
    );
}

fn karpenter() -> Settings {
    with_a100(json!({"karpenterNodePool": "a100"}))
}

/// Nodes, then the NodePool, then the pods.
fn karpenter_calls(
    node_list: String,
    node_pool: Result<String, String>,
    pod_list: Option<String>,
) -> Script {
    let mut calls = vec![
        (node_query(&pool("a100")), Ok(node_list)),
        (node_pool_query("a100"), node_pool),
    ];
    if let Some(p) = pod_list {
        calls.push((pod_query("gpu-admission/pool", &pool("a100")), Ok(p)));
    }
    Script::new(calls)
}

#[test]
fn zero_node_pool_with_a_karpenter_node_pool_found() {
    let cluster = karpenter_calls(
        nodes(&[]),
        Ok(node_pool_answer(
            json!({"cpu": "1000", "memory": "4000Gi", GPU: "64"}),
        )),
        Some(pods(&[])),
    );
    allows_recording(
        &run_a100(&karpenter(), 4, "2", &cluster),
        "capacity",
        "a100: nvidia.com/gpu used 0 + incoming 8 = 8 of 64 it can grow to (12.5%), threshold 90%, fits (ceiling 64 from NodePool a100 spec.limits, 0 allocatable now)",
    );
}

#[test]
fn karpenter_node_pool_without_a_gpu_limit_is_judged_on_allocatable() {
    let cluster = karpenter_calls(
        nodes(&[8]),
        Ok(node_pool_answer(json!({"cpu": "1000"}))),
        Some(pods(&[])),
    );
    let v = run_a100(&karpenter(), 4, "2", &cluster);
    denies_with_capacity(
        &v,
        "pool a100: nvidia.com/gpu would be 8 of 8 allocatable (100.0%) with this workload's 8 (0 in use), above the 90% threshold (room for 7 more; NodePool a100 spec.limits sets no nvidia.com/gpu). Wait for capacity, lower replicas, or target another pool.",
        "over (NodePool a100 spec.limits sets no nvidia.com/gpu: judged on allocatable)",
    );
}

#[rstest]
#[case::not_found(
    "Callback evaluation failure: Cannot find karpenter.sh/v1/NodePool named 'a100' inside of namespace 'None'",
    "pool a100: cannot get karpenter.sh/v1/NodePool a100: not found. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error."
)]
#[case::not_granted(
    "Policy has not been granted access to Kubernetes karpenter.sh/v1/NodePool resources. The violation has been reported.",
    "pool a100: cannot get karpenter.sh/v1/NodePool a100: not granted to this policy: add {apiVersion: karpenter.sh/v1, kind: NodePool} to the ClusterAdmissionPolicy's contextAwareResources. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error."
)]
#[case::forbidden(
    "nodepools.karpenter.sh \"a100\" is forbidden: User \"system:serviceaccount:kubewarden:gpu-admission-policy-server\" cannot get resource \"nodepools\"",
    "pool a100: cannot get karpenter.sh/v1/NodePool a100: forbidden by RBAC: grant the policy-server's ServiceAccount get on nodepools (apiGroup karpenter.sh). The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error."
)]
fn karpenter_node_pool_that_cannot_be_read_fails_closed(#[case] error: &str, #[case] denial: &str) {
    let cluster = karpenter_calls(nodes(&[]), Err(error.into()), None);
    let v = run_a100(&karpenter(), 1, "1", &cluster);
    denies(&v, denial);
    assert_eq!(v.audit_annotations["host-error"], error);
    assert_eq!(v.audit_annotations["capacity"], "pool a100: not checked");
    // unreadableCluster: warn: accepted with a warning, as for any read.
    let mut open = karpenter();
    open.unreadable_cluster = Some(crate::settings::Action::Warn);
    let cluster = karpenter_calls(nodes(&[]), Err(error.into()), None);
    let v = run_a100(&open, 1, "1", &cluster);
    assert!(v.allowed);
    assert_eq!(v.warnings.len(), 1);
}

#[rstest]
#[case::fraction(json!({GPU: "1.5"}), "spec.limits.nvidia.com/gpu: '1.5' must be a whole number")]
#[case::not_an_object(json!(5), "")]
fn unreadable_node_pool_limits(#[case] limits: Value, #[case] reason: &str) {
    let answer = if limits.is_object() {
        node_pool_answer(limits)
    } else {
        limits.to_string()
    };
    let cluster = karpenter_calls(nodes(&[]), Ok(answer), None);
    let v = run_a100(&karpenter(), 1, "1", &cluster);
    denies_starting(
        &v,
        "pool a100: cannot get karpenter.sh/v1/NodePool a100: the answer could not be read (",
    );
    denies_saying(&v, reason);
}

fn cluster_autoscaler() -> Settings {
    with_a100(json!({"clusterAutoscaler": {"maxNodes": 8, "gpusPerNode": {GPU: 8}}}))
}

#[test]
fn cluster_autoscaler_ceiling_is_max_nodes_times_gpus_per_node() {
    let cluster = Script::new(pool_calls("a100", nodes(&[8, 8]), pods(&[8, 8])));
    allows_recording(
        &run_a100(&cluster_autoscaler(), 4, "8", &cluster),
        "capacity",
        "a100: nvidia.com/gpu used 16 + incoming 32 = 48 of 64 it can grow to (75.0%), threshold 90%, fits (ceiling 64 from clusterAutoscaler: 8 nodes x 8 nvidia.com/gpu, 16 allocatable now)",
    );
}

#[test]
fn cluster_autoscaler_node_shape_decides_what_a_zero_node_pool_can_schedule() {
    let cluster = Script::new(pool_calls("a100", nodes(&[]), pods(&[])));
    denies(
        &run_a100(&cluster_autoscaler(), 1, "16", &cluster),
        "pool a100: a pod of spec.template.spec asks for 16 nvidia.com/gpu, more than any node of the pool has (the pool has no node now and the nodes the cluster autoscaler adds have 8), so it can never be scheduled. Ask for at most 8 nvidia.com/gpu per pod (split the work over more pods), or target a pool with bigger nodes.",
    );
    // 8 per pod fits the shape the autoscaler adds.
    let cluster = Script::new(pool_calls("a100", nodes(&[]), pods(&[])));
    let v = run_a100(&cluster_autoscaler(), 2, "8", &cluster);
    assert!(v.allowed, "{v:?}");
    assert!(v.warnings.is_empty(), "{v:?}");
}

// -- per-node feasibility and fragmentation ------------------------------------------

#[test]
fn a_pod_bigger_than_every_node_is_denied_naming_the_largest() {
    // Eight 8-GPU nodes with 40 free GPUs: a 16-GPU pod fits the pool, never a node.
    let node_list = named_nodes(&[
        ("gpu-a100-0", 8),
        ("gpu-a100-1", 8),
        ("gpu-a100-2", 8),
        ("gpu-a100-3", 8),
        ("gpu-a100-4", 8),
        ("gpu-a100-5", 8),
        ("gpu-a100-6", 8),
        ("gpu-a100-7", 8),
    ]);
    let pod_list = bound_pods(&[("gpu-a100-0", 8), ("gpu-a100-1", 8), ("gpu-a100-2", 8)]);
    let mut d = deployment(1, Some("a100"), "16");
    d["metadata"]["name"] = json!("big");
    let cluster = Script::new(pool_calls("a100", node_list, pod_list));
    let v = run(&create(d), &settings(), &cluster);
    // The capacity check itself fits: only the node size denies.
    denies_with_capacity(
        &v,
        "pool a100: a pod of spec.template.spec asks for 16 nvidia.com/gpu, more than any node of the pool has (the largest, gpu-a100-0, has 8 nvidia.com/gpu allocatable), so it can never be scheduled. Ask for at most 8 nvidia.com/gpu per pod (split the work over more pods), or target a pool with bigger nodes.",
        "fits",
    );
}

/// A pool of four 8-GPU nodes, 3 GPUs free on each (20 of 32 in use).
fn fragmented() -> Script {
    let node_list = named_nodes(&[
        ("gpu-a100-0", 8),
        ("gpu-a100-1", 8),
        ("gpu-a100-2", 8),
        ("gpu-a100-3", 8),
    ]);
    let pod_list = bound_pods(&[
        ("gpu-a100-0", 5),
        ("gpu-a100-1", 5),
        ("gpu-a100-2", 4),
        ("gpu-a100-2", 1),
        ("gpu-a100-3", 6),
    ]);
    Script::new(pool_calls("a100", node_list, pod_list))
}

const FRAGMENTED: &str = "no node has room for one pod of spec.template.spec (4 nvidia.com/gpu): the largest free block is 3 nvidia.com/gpu on gpu-a100-0 (11 nvidia.com/gpu free over its 4 nodes)";

#[test]
fn fragmentation_warns_by_default() {
    let v = run_a100(&settings(), 1, "4", &fragmented());
    assert!(v.allowed, "{v:?}");
    assert_eq!(
        v.warnings,
        vec![format!(
            "pool a100: {FRAGMENTED}. Its pods will wait (Pending) until GPUs free up on one node (fragmentation: warn)."
        )]
    );
    assert_eq!(
        v.audit_annotations["fragmentation"],
        format!("a100: {FRAGMENTED}")
    );
}

#[test]
fn fragmentation_deny_denies_naming_the_largest_free_block() {
    let s = Settings {
        fragmentation: crate::settings::Action::Deny,
        ..settings()
    };
    denies(
        &run_a100(&s, 1, "4", &fragmented()),
        &format!(
            "pool a100: {FRAGMENTED}. Wait for GPUs to free up on one node, ask for fewer GPUs per pod, or target another pool (fragmentation: deny)."
        ),
    );
    // A pod that fits the largest free block is accepted without a word.
    let v = run_a100(&s, 2, "3", &fragmented());
    assert!(v.allowed, "{v:?}");
    assert!(v.warnings.is_empty());
}

#[test]
fn a_pool_that_can_still_grow_a_node_is_not_fragmented() {
    let s = Settings {
        fragmentation: crate::settings::Action::Deny,
        ..with_a100(json!({"clusterAutoscaler": {"maxNodes": 8, "gpusPerNode": {GPU: 8}}}))
    };
    let v = run_a100(&s, 1, "4", &fragmented());
    assert!(v.allowed, "{v:?}");
    assert!(v.warnings.is_empty(), "{v:?}");
}

#[test]
fn pending_pods_count_in_the_pool_but_on_no_node() {
    let node_list = named_nodes(&[("gpu-a100-0", 8), ("gpu-a100-1", 8)]);
    let pod_list = bound_pods(&[("gpu-a100-0", 8), ("", 4)]);
    let cluster = Script::new(pool_calls("a100", node_list, pod_list));
    let v = run_a100(&settings(), 1, "2", &cluster);
    assert!(v.warnings.is_empty(), "{v:?}");
    allows_noting(&v, "capacity", "used 12 + incoming 2 = 14 of 16");
}

// -- suspended and queued workloads --------------------------------------------------

fn job(suspend: Option<bool>, parallelism: u64, gpus: &str) -> Value {
    let mut j = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"parallelism": parallelism, "completions": parallelism,
                 "template": template(Some("a100"), gpus)}});
    if let Some(s) = suspend {
        j["spec"]["suspend"] = json!(s);
    }
    j
}

#[test]
fn a_suspended_job_is_not_charged_at_create() {
    let v = run(
        &create(job(Some(true), 4, "8")),
        &settings(),
        &Script::none(),
    );
    assert!(v.allowed);
    assert_eq!(
        v.audit_annotations["suspend"],
        "Job ml/llm is suspended (spec.suspend: true): not charged until the update that unsuspends it"
    );
    assert!(!v.audit_annotations.contains_key("capacity"));
}

#[test]
fn the_update_that_unsuspends_a_job_is_charged_in_full() {
    let cluster = Script::new(pool_calls("a100", nodes(&[8; 8]), pods(&[8, 8, 8, 8])));
    let v = run(
        &request("UPDATE", job(Some(false), 4, "8"), job(Some(true), 4, "8")),
        &settings(),
        &cluster,
    );
    assert!(!v.allowed, "32 + 32 of 64 is over 90%: {v:?}");
    assert_eq!(
        v.audit_annotations["suspend"],
        "Job ml/llm is unsuspended (spec.suspend: true -> false): charged in full"
    );
    notes(&v, "capacity", "incoming 32 ");
    // Suspending again, or updating while suspended, is never charged.
    for (new, old) in [
        (job(Some(true), 4, "8"), job(Some(false), 4, "8")),
        (job(Some(true), 8, "8"), job(Some(true), 4, "8")),
    ] {
        let v = run(&request("UPDATE", new, old), &settings(), &Script::none());
        allows_noting(&v, "suspend", "is suspended");
    }
}

#[test]
fn suspendable_kinds_from_settings_and_built_in_custom_kinds() {
    let pytorch = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "t", "namespace": "ml"},
        "spec": {"runPolicy": {"suspend": true}, "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": template(Some("a100"), "8")},
            "Worker": {"replicas": 3, "template": template(Some("a100"), "8")}}}});
    let v = run(&create(pytorch), &settings(), &Script::none());
    allows_noting(&v, "suspend", "(spec.runPolicy.suspend: true)");
    let mut s = settings();
    s.custom_kinds.push(serde_json::from_value(json!({"group": "example.com", "kind": "Trainer",
        "templates": [{"path": "$.spec", "podSpec": "template.spec", "metadata": "template.metadata"}]})).unwrap());
    s.suspendable_kinds = vec![
        serde_json::from_value(
            json!({"group": "example.com", "kind": "Trainer", "path": "spec.paused"}),
        )
        .unwrap(),
    ];
    s.validate().unwrap();
    let trainer = json!({"apiVersion": "example.com/v1", "kind": "Trainer",
        "metadata": {"name": "t", "namespace": "ml"},
        "spec": {"paused": true, "template": template(Some("a100"), "8")}});
    let v = run(&create(trainer), &s, &Script::none());
    assert!(v.audit_annotations.contains_key("suspend"), "{v:?}");
}

fn kueue_job() -> Value {
    let mut j = job(Some(true), 4, "8");
    j["metadata"]["labels"] = json!({"kueue.x-k8s.io/queue-name": "team-a"});
    j
}

#[test]
fn a_kueue_labelled_job_is_left_to_its_queue() {
    // Created suspended, as Kueue's webhook leaves it: not charged, no call.
    let v = run(&create(kueue_job()), &settings(), &Script::none());
    assert!(v.allowed);
    assert!(v.audit_annotations.contains_key("suspend"), "{v:?}");
    // Unsuspended by Kueue, its LocalQueue existing: left to the queue (the proof is in
    // tests/queue.rs).
    let mut running = kueue_job();
    running["spec"]["suspend"] = json!(false);
    let cluster = Script::new(vec![(
        crate::capacity::queue::local_queue_query("ml", "team-a"),
        Ok(r#"{"metadata":{"name":"team-a"}}"#.to_string()),
    )]);
    let v = run(
        &request("UPDATE", running, kueue_job()),
        &settings(),
        &cluster,
    );
    assert!(v.allowed);
    assert_eq!(
        v.audit_annotations["queue"],
        "Job ml/llm carries kueue.x-k8s.io/queue-name=team-a: LocalQueue ml/team-a exists and Kueue holds the Job (suspended), so its queue admits it, not the capacity gate (gateQueued: false)"
    );
    // gateQueued: the unsuspending update is charged like any other.
    let s = Settings {
        gate_queued: true,
        ..settings()
    };
    let mut running = kueue_job();
    running["spec"]["suspend"] = json!(false);
    let cluster = Script::new(pool_calls("a100", nodes(&[8; 8]), pods(&[])));
    let v = run(&request("UPDATE", running, kueue_job()), &s, &cluster);
    assert!(!v.audit_annotations.contains_key("queue"));
    allows_noting(&v, "capacity", "incoming 32 ");
}

#[test]
fn a_queue_label_on_a_cpu_workload_says_nothing() {
    let mut j = kueue_job();
    j["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"limits": {"cpu": "1"}});
    assert_eq!(
        run(&create(j), &settings(), &Script::none()),
        Verdict::accept()
    );
}

// -- rollout surge -------------------------------------------------------------------

/// [`run`] on the update of `old` to `new` with `settings()`, pool a100 one node of 64
/// GPUs and none in use.
fn update_on_64(new: Value, old: Value) -> Verdict {
    let cluster = Script::new(pool_calls("a100", nodes(&[64]), pods(&[])));
    run(&request("UPDATE", new, old), &settings(), &cluster)
}

/// Asserts that the update of `old` to `new` with `s` is accepted without a host call or
/// a word.
#[track_caller]
fn charges_nothing(new: Value, old: Value, s: &Settings) {
    assert_eq!(
        run(&request("UPDATE", new, old), s, &Script::none()),
        Verdict::accept()
    );
}

fn rollout(replicas: u64, strategy: Option<Value>) -> (Value, Value) {
    let mut old = deployment(replicas, Some("a100"), "1");
    if let Some(s) = strategy {
        old["spec"]["strategy"] = s;
    }
    let mut new = old.clone();
    new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("vllm:2");
    (new, old)
}

#[rstest]
#[case::default_25_percent_of_10(
    10,
    None,
    3,
    "maxSurge 25% (the default) of 10 replicas, rounded up"
)]
#[case::percent(10, Some(json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%"}})), 5, "maxSurge 50% of 10 replicas, rounded up")]
#[case::count(10, Some(json!({"rollingUpdate": {"maxSurge": 2, "maxUnavailable": 0}})), 2, "maxSurge 2")]
#[case::one_replica(1, None, 1, "maxSurge 25% (the default) of 1 replicas, rounded up")]
fn a_template_change_is_charged_max_surge_pods(
    #[case] replicas: u64,
    #[case] strategy: Option<Value>,
    #[case] surge: u64,
    #[case] how: &str,
) {
    let (new, old) = rollout(replicas, strategy);
    let v = update_on_64(new, old);
    allows_noting(&v, "capacity", &format!("incoming {surge} "));
    assert_eq!(
        v.audit_annotations["surge"],
        format!(
            "rollout of Deployment ml/llm: {surge} extra {} charged ({how}; chargeRolloutSurge: true)",
            if surge == 1 { "pod" } else { "pods" }
        )
    );
}

#[test]
fn surge_adds_to_a_replica_increase() {
    let (mut new, old) = rollout(10, None);
    new["spec"]["replicas"] = json!(12);
    // 2 more replicas + 25% of 12 = 3 surge pods.
    notes(&update_on_64(new, old), "capacity", "incoming 5 ");
}

#[rstest]
#[case::recreate(Some(json!({"type": "Recreate"})))]
#[case::zero_surge(Some(json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}})))]
fn recreate_and_zero_surge_charge_nothing(#[case] strategy: Option<Value>) {
    let (new, old) = rollout(10, strategy);
    charges_nothing(new, old, &settings());
}

#[test]
fn no_surge_for_statefulsets_paused_deployments_or_with_the_setting_off() {
    let (mut new, mut old) = rollout(10, None);
    for o in [&mut new, &mut old] {
        o["kind"] = json!("StatefulSet");
    }
    charges_nothing(new, old, &settings());
    let (mut new, old) = rollout(10, None);
    new["spec"]["paused"] = json!(true);
    charges_nothing(new, old, &settings());
    let (new, old) = rollout(10, None);
    charges_nothing(new, old, &no_surge());
}

#[test]
fn resuming_a_paused_deployment_is_charged_its_surge() {
    let mut old = deployment(8, Some("a100"), "1");
    old["spec"]["paused"] = json!(true);
    let new = deployment(8, Some("a100"), "1");
    notes(&update_on_64(new, old), "capacity", "incoming 2 ");
}

#[test]
fn a_metadata_only_update_starts_no_rollout() {
    let old = deployment(10, Some("a100"), "1");
    let mut new = old.clone();
    new["metadata"]["labels"] = json!({"team": "x"});
    charges_nothing(new, old, &settings());
}

// -- alternatives --------------------------------------------------------------------

fn with_alternatives() -> Settings {
    let mut v = serde_json::to_value(settings()).unwrap();
    v["pools"][0]["alternatives"] = json!(["h100", "batch"]);
    v["pools"].as_array_mut().unwrap().push(
        json!({"name": "batch", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "batch"}}}),
    );
    let s: Settings = serde_json::from_value(v).unwrap();
    s.validate().unwrap();
    s
}

fn calls_of(
    s: &Settings,
    name: &str,
    node_list: String,
    pod_list: String,
) -> Vec<(ClusterRequest, Result<String, String>)> {
    let p = s.pool_named(name).unwrap().1;
    vec![
        (node_query(p), Ok(node_list)),
        (pod_query("gpu-admission/pool", p), Ok(pod_list)),
    ]
}

#[test]
fn a_denial_names_the_first_alternative_with_room() {
    let s = with_alternatives();
    let mut calls = calls_of(&s, "a100", nodes(&[8; 8]), pods(&[8, 8, 8, 8, 8, 8, 2]));
    // h100 (80%): 24 of 32 in use, room for 1 only; batch: room for 28.
    calls.extend(calls_of(&s, "h100", nodes(&[8; 4]), pods(&[8, 8, 8])));
    calls.extend(calls_of(&s, "batch", nodes(&[8; 4]), pods(&[])));
    let v = run_a100(&s, 4, "2", &Script::new(calls));
    denies(
        &v,
        &format!("{OVER_BY_8} Pool batch has room for 28 nvidia.com/gpu."),
    );
    assert_eq!(
        v.audit_annotations["alternatives"],
        "a100: Pool batch has room for 28 nvidia.com/gpu."
    );
}

#[test]
fn a_denial_says_when_no_alternative_has_room() {
    let s = with_alternatives();
    let mut calls = calls_of(&s, "a100", nodes(&[8; 8]), pods(&[8, 8, 8, 8, 8, 8, 2]));
    calls.extend(calls_of(&s, "h100", nodes(&[8; 4]), pods(&[8, 8, 8])));
    let batch = s.pool_named("batch").unwrap().1.clone();
    calls.push((node_query(&batch), Err("nodes is forbidden".into())));
    let v = run_a100(&s, 4, "2", &Script::new(calls));
    assert!(!v.allowed);
    ends_saying(
        &v,
        "or target another pool. No alternative pool has room: h100 (room for 1 nvidia.com/gpu), batch (its state could not be read).",
    );
}

#[test]
fn an_accepted_workload_reads_no_alternative() {
    let s = with_alternatives();
    let cluster = Script::new(calls_of(&s, "a100", nodes(&[8; 8]), pods(&[])));
    assert!(run_a100(&s, 4, "2", &cluster).allowed);
}

// -- thresholds by schedule window ---------------------------------------------------

fn windowed() -> Settings {
    let mut v = serde_json::to_value(settings()).unwrap();
    v["schedules"] = json!({
        "peak": {"timeZone": "Europe/Berlin", "windows": [{"days": ["Mon", "Tue", "Wed", "Thu", "Fri"], "from": "08:00", "to": "20:00"}]},
        "night": {"timeZone": "UTC", "windows": [{"days": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"], "from": "22:00", "to": "06:00"}]}
    });
    v["pools"][0]["thresholds"] = json!([
        {"window": "peak", "thresholdPercent": 70},
        {"window": "night", "thresholdPercent": 100}
    ]);
    let s: Settings = serde_json::from_value(v).unwrap();
    s.validate().unwrap();
    s
}

/// Tuesday 2026-12-01 at `hh:mm` UTC (Berlin is UTC+1 in December).
fn tuesday(hh: i64, mm: i64) -> FixedClock {
    FixedClock(1_796_083_200 + hh * 3600 + mm * 60)
}

#[rstest]
#[case::peak_starts_inclusive(7, 0, Some(70), false)]
#[case::before_peak(6, 59, None, true)]
#[case::peak_ends_exclusive(19, 0, None, true)]
#[case::last_peak_minute(18, 59, Some(70), false)]
#[case::night(23, 30, Some(100), true)]
fn the_window_that_holds_now_sets_the_threshold(
    #[case] hh: i64,
    #[case] mm: i64,
    #[case] threshold: Option<u32>,
    #[case] allowed: bool,
) {
    // 40 of 64 in use + 8 = 48 = 75%: over 70%, under 90% and 100%.
    let cluster = Script::new(pool_calls("a100", nodes(&[8; 8]), pods(&[8, 8, 8, 8, 8])));
    let v = CapacityGate::evaluate_at(
        &create(deployment(4, Some("a100"), "2")),
        &crate::policy::checked::<CapacityGate>(&windowed()),
        &cluster,
        &tuesday(hh, mm),
    );
    assert!(cluster.done());
    assert_eq!(v.allowed, allowed, "{v:?}");
    let capacity = &v.audit_annotations["capacity"];
    match threshold {
        Some(70) => {
            assert!(
                capacity.contains("threshold 70% in window peak, over"),
                "{capacity}"
            );
            assert_eq!(
                message(&v),
                "pool a100: nvidia.com/gpu would be 48 of 64 allocatable (75.0%) with this workload's 8 (40 in use), above the 70% threshold of window peak (room for 4 more). Wait for capacity, lower replicas, or target another pool."
            );
        }
        Some(t) => assert!(
            capacity.contains(&format!("threshold {t}% in window night, fits")),
            "{capacity}"
        ),
        None => assert!(capacity.contains("threshold 90%, fits"), "{capacity}"),
    }
}

#[test]
fn the_monday_after_a_weekend_night_window() {
    // Saturday 2026-12-05 23:00 UTC is in the night window; Sunday 05:59 too; 06:00 not.
    let saturday = 1_796_083_200 + 4 * 86_400;
    for (at, window) in [
        (saturday + 23 * 3600, true),
        (saturday + 86_400 + 5 * 3600 + 59 * 60, true),
        (saturday + 86_400 + 6 * 3600, false),
    ] {
        let cluster = Script::new(pool_calls("a100", nodes(&[8; 8]), pods(&[8, 8, 8, 8, 8])));
        let v = CapacityGate::evaluate_at(
            &create(deployment(4, Some("a100"), "2")),
            &crate::policy::checked::<CapacityGate>(&windowed()),
            &cluster,
            &FixedClock(at),
        );
        assert_eq!(
            v.audit_annotations["capacity"].contains("in window night"),
            window,
            "{at}: {v:?}"
        );
    }
}

/// A host sends settings `validate_settings` accepted; the gate's `prepare` reads only what
/// its rules take (the schedules thresholds name, the team budgets) and refuses what does
/// not read, naming the field, before any rule runs. On valid settings it gives the same
/// verdicts as `check`.
#[test]
fn prepared_settings_read_the_windows_and_budgets_the_rules_take() {
    let mut v = serde_json::to_value(windowed()).unwrap();
    v["schedules"]["peak"]["timeZone"] = json!("Mars/Olympus");
    fails_starting(
        CapacityGate::prepare(serde_json::from_value(v.clone()).unwrap()),
        "schedules.peak.timeZone: 'Mars/Olympus'",
    );
    // A schedule no threshold names is not read.
    v["pools"][0]["thresholds"] = json!([{"window": "night", "thresholdPercent": 100}]);
    assert!(CapacityGate::prepare(serde_json::from_value(v).unwrap()).is_ok());
    let mut v = serde_json::to_value(settings()).unwrap();
    v["teamBudgets"] = json!({"ml-a": 16});
    fails_starting(
        CapacityGate::prepare(serde_json::from_value(v).unwrap()),
        "teamBudgets.ml-a: must be a budget",
    );

    let prepared = CapacityGate::prepare(Box::new(windowed())).unwrap();
    let at_peak = tuesday(9, 0);
    for settings in [
        &prepared,
        &crate::policy::checked::<CapacityGate>(&windowed()),
    ] {
        let cluster = Script::new(pool_calls("a100", nodes(&[8; 8]), pods(&[8, 8, 8, 8, 8])));
        let v = CapacityGate::evaluate_at(
            &create(deployment(4, Some("a100"), "2")),
            settings,
            &cluster,
            &at_peak,
        );
        assert!(cluster.done());
        denies_saying(&v, "above the 70% threshold of window peak");
    }
}
