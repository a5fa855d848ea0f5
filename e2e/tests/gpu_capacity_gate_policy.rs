//! gpu-capacity-gate-policy, built as wasm, through the harness: every request in
//! `policies/gpu-capacity-gate-policy/test_data/` with its replay session (kwctl's
//! format: the exact host calls, selectors and field masks included), the verdict, the
//! exact message, warnings and audit annotations; settings validation; and the README
//! quoting the messages verbatim.

use std::path::PathBuf;
use std::sync::OnceLock;

use gpu_e2e::{
    ContextAwareAccess, Evaluation, Policy, ReplaySession, module_path, read_admission_request,
    read_settings,
};
use serde_json::Value;

fn policy() -> Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY
        .get_or_init(|| {
            let path = module_path("gpu-capacity-gate-policy").unwrap_or_else(|e| panic!("{e:#}"));
            Policy::load(path).unwrap_or_else(|e| panic!("{e:#}"))
        })
        .clone()
}

fn policy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../policies/gpu-capacity-gate-policy")
}

fn data(file: &str) -> PathBuf {
    policy_dir().join("test_data").join(file)
}

fn settings(file: &str) -> Value {
    read_settings(data(file)).unwrap_or_else(|e| panic!("{e:#}"))
}

/// Evaluates `request` with `settings`, serving host calls from `session` (none: any
/// host call fails the test through the harness's "no replay session" error).
fn evaluate(request: &str, settings_file: &str, session: Option<&str>) -> Evaluation {
    let request = read_admission_request(data(request)).unwrap_or_else(|e| panic!("{e:#}"));
    let session =
        session.map(|s| ReplaySession::from_file(data(s)).unwrap_or_else(|e| panic!("{e:#}")));
    policy()
        .evaluate(&request, &settings(settings_file), session)
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// What one request must produce.
struct Case {
    request: &'static str,
    settings: &'static str,
    session: Option<&'static str>,
    /// `None`: allowed; `Some(message)`: denied with exactly this message.
    denied: Option<&'static str>,
    /// Expected `capacity` audit annotation (`None`: absent).
    capacity: Option<&'static str>,
    /// Other audit annotation expected: (key, value).
    audit: Option<(&'static str, &'static str)>,
    /// Quoted verbatim in the README.
    in_readme: bool,
}

const S: &str = "settings.yml";

const OVER: &str = "pool a100: nvidia.com/gpu would be 58 of 64 allocatable (90.6%) with this workload's 8 (50 in use), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool.";
const EMPTY: &str = "pool a100: no schedulable node offers nvidia.com/gpu for this workload's 8 (no node matches gpu-admission/pool=a100). Request a resource the pool offers, target another pool, or check the pool's nodeSelector in the policy settings and that its nodes are schedulable.";
const NOT_GRANTED: &str = "pool a100: cannot list v1/Node: add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy's contextAwareResources. The GPU capacity gate denies what it cannot check (failOpen: false); the host's error is in the audit annotation host-error.";
const PODS_FORBIDDEN: &str = "pool a100: cannot list v1/Pod: grant the policy-server's ServiceAccount list and watch on pods. The GPU capacity gate denies what it cannot check (failOpen: false); the host's error is in the audit annotation host-error.";
const DEPLOYMENT_FORBIDDEN: &str = "scale of Deployment ml-serving/llm-a100: cannot get apps/v1/Deployment ml-serving/llm-a100: grant the policy-server's ServiceAccount get on deployments (apiGroup apps). The GPU capacity gate denies what it cannot check (failOpen: false); the host's error is in the audit annotation host-error.";
const MIG_OVER: &str = "pool a100-mig: nvidia.com/mig-3g.40gb would be 15 of 16 allocatable (93.8%) with this workload's 5 (10 in use), above the 90% threshold (room for 4 more). Wait for capacity, lower replicas, or target another pool.";
const MALFORMED: &str = "Deployment ml-serving/llm-a100: the pod templates cannot be read: spec.replicas: must be a non-negative integer, got \"four\"";

// Usage from ResourceQuotas (settings_quotas.yml).
const Q: &str = "settings_quotas.yml";
const QUOTAS_OVER: &str = "pool a100: nvidia.com/gpu would be 58 of capacity 64 declared in settings (90.6%) with this workload's 8 (50 in use from 6 ResourceQuotas), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool.";
const QUOTAS_NONE: &str = "pool a100: namespace ml-serving has no ResourceQuota labelled gpu-admission/pool=a100, so the pool's pods there would not be counted. Create it: {apiVersion: v1, kind: ResourceQuota, metadata: {name: gpu-a100, namespace: ml-serving, labels: {gpu-admission/pool: \"a100\"}}, spec: {hard: {requests.nvidia.com/gpu: \"64\"}, scopeSelector: {matchExpressions: [{scopeName: PriorityClass, operator: In, values: [a100-high, a100-low]}]}}} (spec.hard at the pool's size caps nothing; lower it to cap the namespace). The GPU capacity gate denies what it cannot count (failOpen: false).";
const QUOTAS_UNSCOPED: &str = "pool a100: ResourceQuota ml-training/gpu-a100 is not scoped to the pool's priority classes (it has no scope, so it counts the pods of every pool in ml-training): set its spec.scopeSelector to {matchExpressions: [{scopeName: PriorityClass, operator: In, values: [a100-high, a100-low]}]}. The GPU capacity gate denies what it cannot count (failOpen: false).";
const QUOTAS_FORBIDDEN: &str = "pool a100: cannot list v1/ResourceQuota: grant the policy-server's ServiceAccount list and watch on resourcequotas. The GPU capacity gate denies what it cannot check (failOpen: false); the host's error is in the audit annotation host-error.";
const QUOTAS_NO_CLASS: &str = "pool a100: its GPUs in use are counted by ResourceQuotas scoped to its priority classes (a100-high, a100-low), which would not count this workload's pods: spec.template.spec has no priorityClassName. Set priorityClassName to one of a100-high, a100-low (gpu-pool-routing-policy sets it on the pool's workloads).";

// DRA: a Deployment of 3 replicas whose pods each get 4 gpu.nvidia.com devices from a
// ResourceClaimTemplate (12 GPUs), and claims that cannot be counted.
const DRA: &str = "deployment_dra_a100_3x4.json";
const DRA_QUOTAS_OVER: &str = "pool a100: nvidia.com/gpu would be 62 of capacity 64 declared in settings (96.9%) with this workload's 12 (50 in use from 6 ResourceQuotas), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool.";
const DRA_PODS_OVER: &str = "pool a100: nvidia.com/gpu would be 62 of 64 allocatable (96.9%) with this workload's 12 (50 in use), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool.";
const DRA_NOT_FOUND: &str = "the capacity gate cannot count the GPUs of this workload, so it cannot admit it: spec.template.spec: resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (Host error: Callback evaluation failure: Cannot find resource.k8s.io/v1/ResourceClaimTemplate named 'four-gpus' inside of namespace 'Some(\"ml-serving\")'); create it before the workload, and let the policy read it: contextAwareResources {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate} in the policy and get on resourceclaimtemplates.resource.k8s.io for the policy server's service account";
const DRA_NOT_GRANTED: &str = "the capacity gate cannot count the GPUs of this workload, so it cannot admit it: spec.template.spec: resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (Host error: Callback evaluation failure: Policy has not been granted access to Kubernetes resource.k8s.io/v1/ResourceClaimTemplate resources. The violation has been reported.); create it before the workload, and let the policy read it: contextAwareResources {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate} in the policy and get on resourceclaimtemplates.resource.k8s.io for the policy server's service account";
const DRA_ALLOCATION_ALL: &str = "the capacity gate cannot count the GPUs of this workload, so it cannot admit it: spec.template.spec: resource claim 'gpus' (ResourceClaimTemplate four-gpus) request gpus asks for every gpu.nvidia.com device on a node (allocationMode: All); the policies cannot count that: ask for an exact count (allocationMode: ExactCount, count: N)";

const CASES: &[Case] = &[
    // Below, over and exactly at the threshold; an empty pool.
    Case {
        request: "deployment_a100_4x2.json",
        settings: S,
        session: Some("session_a100_below.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 40 + incoming 8 = 48 of 56 allocatable (85.7%), threshold 90%, fits",
        ),
        audit: Some(("pool", "a100")),
        in_readme: true,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: S,
        session: Some("session_a100_over.yml"),
        denied: Some(OVER),
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 8 = 58 of 64 allocatable (90.6%), threshold 90%, over",
        ),
        audit: Some(("pool", "a100")),
        in_readme: true,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: S,
        session: Some("session_a100_exact.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 64 + incoming 8 = 72 of 80 allocatable (90.0%), threshold 90%, fits",
        ),
        audit: None,
        in_readme: false,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: S,
        session: Some("session_a100_empty.yml"),
        denied: Some(EMPTY),
        capacity: Some(
            "a100: nvidia.com/gpu used 0 + incoming 8 = 8 of 0 allocatable (n/a), threshold 90%, over",
        ),
        audit: None,
        in_readme: true,
    },
    // Host-call failures: fail closed, or open with a warning.
    Case {
        request: "deployment_a100_4x2.json",
        settings: S,
        session: Some("session_a100_nodes_not_granted.yml"),
        denied: Some(NOT_GRANTED),
        capacity: Some("pool a100: not checked"),
        audit: Some((
            "host-error",
            "Callback evaluation failure: Policy has not been granted access to Kubernetes v1/Node resources. The violation has been reported.",
        )),
        in_readme: true,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: S,
        session: Some("session_a100_pods_forbidden.yml"),
        denied: Some(PODS_FORBIDDEN),
        capacity: Some("pool a100: not checked"),
        audit: None,
        in_readme: true,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: "settings_fail_open.yml",
        session: Some("session_a100_nodes_not_granted.yml"),
        denied: None,
        capacity: Some("pool a100: not checked"),
        audit: None,
        in_readme: false,
    },
    // UPDATE: only the increase is charged, no increase means no host call.
    Case {
        request: "deployment_update_more_replicas.json",
        settings: S,
        session: Some("session_a100_over.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 2 = 52 of 64 allocatable (81.3%), threshold 90%, fits",
        ),
        audit: None,
        in_readme: false,
    },
    Case {
        request: "deployment_update_image_only.json",
        settings: S,
        session: None,
        denied: None,
        capacity: None,
        audit: None,
        in_readme: false,
    },
    // Scale subresource: the parent's GPUs per pod x the added replicas.
    Case {
        request: "deployment_scale_up.json",
        settings: S,
        session: Some("session_scale_a100_over.yml"),
        denied: Some(OVER),
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 8 = 58 of 64 allocatable (90.6%), threshold 90%, over",
        ),
        audit: Some(("pool", "a100")),
        in_readme: false,
    },
    Case {
        request: "deployment_scale_up.json",
        settings: S,
        session: Some("session_scale_deployment_forbidden.yml"),
        denied: Some(DEPLOYMENT_FORBIDDEN),
        capacity: Some("scale of Deployment ml-serving/llm-a100: not checked"),
        audit: None,
        in_readme: true,
    },
    Case {
        request: "deployment_scale_down.json",
        settings: S,
        session: None,
        denied: None,
        capacity: None,
        audit: None,
        in_readme: false,
    },
    // Time-slicing and MIG: per resource name, in the unit pods request.
    Case {
        request: "deployment_l4_timesliced.json",
        settings: S,
        session: Some("session_l4_timesliced.yml"),
        denied: None,
        capacity: Some(
            "l4-shared: nvidia.com/gpu used 110 + incoming 6 = 116 of 128 allocatable (90.6%), threshold 95%, fits",
        ),
        audit: None,
        in_readme: false,
    },
    Case {
        request: "job_mig_3g.json",
        settings: S,
        session: Some("session_a100_mig.yml"),
        denied: Some(MIG_OVER),
        capacity: Some(
            "a100-mig: nvidia.com/mig-3g.40gb used 10 + incoming 5 = 15 of 16 allocatable (93.8%), threshold 90%, over",
        ),
        audit: None,
        in_readme: false,
    },
    // A custom kind from settings (KServe preset), pool from the object's own label.
    Case {
        request: "inferenceservice_h100.json",
        settings: S,
        session: Some("session_h100_below.yml"),
        denied: None,
        capacity: Some(
            "h100: nvidia.com/gpu used 16 + incoming 8 = 24 of 32 allocatable (75.0%), threshold 80%, fits",
        ),
        audit: None,
        in_readme: false,
    },
    // Demand counted once: a pod of a gated controller is not charged again...
    Case {
        request: "pod_owned_by_replicaset.json",
        settings: S,
        session: None,
        denied: None,
        capacity: None,
        audit: Some((
            "not-charged",
            "created by ReplicaSet llm-a100-7d9f8c6b5, which was charged for its pods (chargePods: ownerless)",
        )),
        in_readme: false,
    },
    // ...unless chargePods is all.
    Case {
        request: "pod_owned_by_replicaset.json",
        settings: "settings_charge_all.yml",
        session: Some("session_a100_over.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 2 = 52 of 64 allocatable (81.3%), threshold 90%, fits",
        ),
        audit: None,
        in_readme: false,
    },
    // No host call for what the gate does not measure.
    Case {
        request: "deployment_cpu_only.json",
        settings: S,
        session: None,
        denied: None,
        capacity: None,
        audit: None,
        in_readme: false,
    },
    // The same with kwctl's empty session, as e2e.bats runs every case that makes no call.
    Case {
        request: "deployment_cpu_only.json",
        settings: S,
        session: Some("session_no_calls.yml"),
        denied: None,
        capacity: None,
        audit: None,
        in_readme: false,
    },
    Case {
        request: "deployment_no_pool.json",
        settings: S,
        session: None,
        denied: None,
        capacity: None,
        audit: Some((
            "no-pool",
            "spec.template.spec (nvidia.com/gpu: 8): no configured pool is named by the pool label or selected by the node selector; capacity not checked",
        )),
        in_readme: false,
    },
    Case {
        request: "deployment_exempt_namespace.json",
        settings: S,
        session: None,
        denied: None,
        capacity: None,
        audit: Some(("exempt", "namespace gpu-operator is in exemptNamespaces")),
        in_readme: false,
    },
    Case {
        request: "deployment_malformed.json",
        settings: S,
        session: None,
        denied: Some(MALFORMED),
        capacity: None,
        audit: None,
        in_readme: false,
    },
    // Usage from ResourceQuotas with capacity declared: one list of the pool's quotas.
    Case {
        request: "deployment_a100_4x2_priority.json",
        settings: Q,
        session: Some("session_quotas_found.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 40 from 6 ResourceQuotas + incoming 8 = 48 of capacity 64 declared in settings (75.0%), threshold 90%, fits",
        ),
        audit: Some(("pool", "a100")),
        in_readme: false,
    },
    Case {
        request: "deployment_a100_4x2_priority.json",
        settings: Q,
        session: Some("session_quotas_over.yml"),
        denied: Some(QUOTAS_OVER),
        capacity: Some(
            "a100: nvidia.com/gpu used 50 from 6 ResourceQuotas + incoming 8 = 58 of capacity 64 declared in settings (90.6%), threshold 90%, over",
        ),
        audit: None,
        in_readme: true,
    },
    Case {
        request: "deployment_a100_4x2_priority.json",
        settings: Q,
        session: Some("session_quotas_none.yml"),
        denied: Some(QUOTAS_NONE),
        capacity: Some("pool a100: not checked"),
        audit: None,
        in_readme: true,
    },
    Case {
        request: "deployment_a100_4x2_priority.json",
        settings: Q,
        session: Some("session_quotas_unscoped.yml"),
        denied: Some(QUOTAS_UNSCOPED),
        capacity: Some("pool a100: not checked"),
        audit: None,
        in_readme: true,
    },
    Case {
        request: "deployment_a100_4x2_priority.json",
        settings: Q,
        session: Some("session_quotas_forbidden.yml"),
        denied: Some(QUOTAS_FORBIDDEN),
        capacity: Some("pool a100: not checked"),
        audit: Some((
            "host-error",
            "Callback evaluation failure: resourcequotas is forbidden: User \"system:serviceaccount:kubewarden:gpu-admission-policy-server\" cannot list resource \"resourcequotas\" in API group \"\" at the cluster scope",
        )),
        in_readme: true,
    },
    // A template without one of the pool's classes: its pods would not be counted.
    Case {
        request: "deployment_a100_4x2.json",
        settings: Q,
        session: None,
        denied: Some(QUOTAS_NO_CLASS),
        capacity: Some("pool a100: not checked"),
        audit: None,
        in_readme: true,
    },
    // usage: pods with capacity declared: only the pool's Pods are listed.
    Case {
        request: "deployment_l4_timesliced.json",
        settings: Q,
        session: Some("session_l4_pods_declared.yml"),
        denied: None,
        capacity: Some(
            "l4-shared: nvidia.com/gpu used 110 + incoming 6 = 116 of capacity 128 declared in settings (90.6%), threshold 95%, fits",
        ),
        audit: None,
        in_readme: false,
    },
    // DRA: the claim template is read first (3 x 4 = 12 GPUs), then the pool, as for a
    // Deployment asking 4 nvidia.com/gpu per pod; with quotas and declared capacity...
    Case {
        request: DRA,
        settings: Q,
        session: Some("session_dra_quotas_found.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 40 from 6 ResourceQuotas + incoming 12 = 52 of capacity 64 declared in settings (81.3%), threshold 90%, fits",
        ),
        audit: Some(("pool", "a100")),
        in_readme: false,
    },
    Case {
        request: DRA,
        settings: Q,
        session: Some("session_dra_quotas_over.yml"),
        denied: Some(DRA_QUOTAS_OVER),
        capacity: Some(
            "a100: nvidia.com/gpu used 50 from 6 ResourceQuotas + incoming 12 = 62 of capacity 64 declared in settings (96.9%), threshold 90%, over",
        ),
        audit: Some(("pool", "a100")),
        in_readme: true,
    },
    // ...and on nodes that advertise nvidia.com/gpu (usage: pods).
    Case {
        request: DRA,
        settings: S,
        session: Some("session_dra_a100_over.yml"),
        denied: Some(DRA_PODS_OVER),
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 12 = 62 of 64 allocatable (96.9%), threshold 90%, over",
        ),
        audit: Some(("pool", "a100")),
        in_readme: false,
    },
    // A claim that cannot be counted: denied before the pool is read, whatever failOpen.
    Case {
        request: DRA,
        settings: Q,
        session: Some("session_dra_not_found.yml"),
        denied: Some(DRA_NOT_FOUND),
        capacity: None,
        audit: None,
        in_readme: true,
    },
    Case {
        request: DRA,
        settings: S,
        session: Some("session_dra_not_granted.yml"),
        denied: Some(DRA_NOT_GRANTED),
        capacity: None,
        audit: None,
        in_readme: true,
    },
    Case {
        request: DRA,
        settings: "settings_fail_open.yml",
        session: Some("session_dra_not_granted.yml"),
        denied: Some(DRA_NOT_GRANTED),
        capacity: None,
        audit: None,
        in_readme: false,
    },
    Case {
        request: DRA,
        settings: S,
        session: Some("session_dra_allocation_all.yml"),
        denied: Some(DRA_ALLOCATION_ALL),
        capacity: None,
        audit: None,
        in_readme: true,
    },
    // KAI Scheduler: 3 pods of gpu-fraction 0.5 are charged ceil(3 x 0.5) = 2 GPUs.
    Case {
        request: "deployment_kai_fraction_3x.json",
        settings: S,
        session: Some("session_a100_below.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 40 + incoming 2 = 42 of 56 allocatable (75.0%), threshold 90%, fits",
        ),
        audit: Some(("pool", "a100")),
        in_readme: false,
    },
];

#[test]
fn every_request_gives_its_verdict_message_and_annotations() {
    for case in CASES {
        let label = format!(
            "{} with {} and {:?}",
            case.request, case.settings, case.session
        );
        let eval = evaluate(case.request, case.settings, case.session);
        let response = &eval.response;
        assert_eq!(
            response.allowed,
            case.denied.is_none(),
            "{label}: {response:?}"
        );
        assert_eq!(response.message(), case.denied, "{label}");
        assert!(
            eval.unconsumed_exchanges.is_empty(),
            "{label}: host calls not made: {:?}",
            eval.unconsumed_exchanges
        );
        if case.session.is_none() {
            assert!(eval.host_calls.is_empty(), "{label}: {:?}", eval.host_calls);
        }
        let audit = response.audit_annotations.clone().unwrap_or_default();
        assert_eq!(
            audit.get("capacity").map(String::as_str),
            case.capacity,
            "{label}: {audit:?}"
        );
        if let Some((key, value)) = case.audit {
            assert_eq!(
                audit.get(key).map(String::as_str),
                Some(value),
                "{label}: {audit:?}"
            );
        }
        if let Some(message) = case.denied.filter(|_| case.in_readme) {
            assert!(
                readme().contains(message),
                "{label}: README does not quote {message:?}"
            );
        }
    }
}

#[test]
fn every_test_data_request_has_a_case() {
    for entry in std::fs::read_dir(policy_dir().join("test_data")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".json") {
            assert!(
                CASES.iter().any(|c| c.request == name),
                "{name} has no case"
            );
        }
        if name.starts_with("session_") {
            assert!(
                CASES.iter().any(|c| c.session == Some(name.as_str())),
                "{name} is unused"
            );
        }
    }
}

#[test]
fn host_calls_carry_the_exact_selectors_and_masks() {
    let eval = evaluate(
        "deployment_a100_4x2.json",
        S,
        Some("session_a100_below.yml"),
    );
    let payloads: Vec<Value> = eval
        .host_calls
        .iter()
        .map(|c| serde_json::from_str(&c.payload).unwrap())
        .collect();
    assert_eq!(
        eval.host_calls
            .iter()
            .map(|c| c.operation.as_str())
            .collect::<Vec<_>>(),
        vec!["list_resources_all", "list_resources_all"]
    );
    assert_eq!(
        payloads,
        vec![
            serde_json::json!({"api_version": "v1", "kind": "Node",
                "label_selector": "gpu-admission/pool=a100", "field_selector": null,
                "field_masks": ["spec.taints", "spec.unschedulable", "status.allocatable"]}),
            serde_json::json!({"api_version": "v1", "kind": "Pod",
                "label_selector": "gpu-admission/pool=a100",
                "field_selector": "status.phase!=Succeeded,status.phase!=Failed",
                "field_masks": ["spec.containers.resources", "spec.ephemeralContainers.resources",
                                "spec.initContainers.resources", "spec.initContainers.restartPolicy",
                                "spec.resources"]}),
        ]
    );
}

#[test]
fn dra_claims_are_read_first_then_the_pool() {
    let eval = evaluate(DRA, Q, Some("session_dra_quotas_found.yml"));
    let calls: Vec<(&str, Value)> = eval
        .host_calls
        .iter()
        .map(|c| {
            (
                c.operation.as_str(),
                serde_json::from_str(&c.payload).unwrap(),
            )
        })
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        calls[0],
        (
            "get_resource",
            serde_json::json!({"api_version": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "name": "four-gpus", "namespace": "ml-serving", "disable_cache": false,
                "field_masks": ["spec.spec.devices"]})
        )
    );
    assert_eq!(calls[1].0, "list_resources_all");
    assert_eq!(calls[1].1["kind"], "ResourceQuota");
    // Deployed without the DRA grant (the contextAwareResources of an earlier version):
    // denied before the pool is read.
    let old = serde_json::json!({"contextAwareResources": [
        {"apiVersion": "v1", "kind": "Node"}, {"apiVersion": "v1", "kind": "Pod"},
        {"apiVersion": "v1", "kind": "ResourceQuota"}]});
    let request = read_admission_request(data(DRA)).unwrap();
    let eval = policy()
        .with_context_aware_access(ContextAwareAccess::from_metadata(Some(&old)))
        .evaluate(
            &request,
            &settings(Q),
            Some(ReplaySession::from_file(data("session_dra_quotas_found.yml")).unwrap()),
        )
        .unwrap();
    assert!(!eval.response.allowed);
    assert!(
        eval.response
            .message()
            .unwrap()
            .starts_with("the capacity gate cannot count the GPUs of this workload, so it cannot admit it: spec.template.spec: resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (Host error: Policy has not been granted access to Kubernetes resource.k8s.io/v1/ResourceClaimTemplate resources."),
        "{:?}",
        eval.response
    );
    assert_eq!(eval.host_calls.len(), 1);
}

#[test]
fn scale_reads_the_deployment_then_the_pool() {
    let eval = evaluate(
        "deployment_scale_up.json",
        S,
        Some("session_scale_a100_over.yml"),
    );
    assert_eq!(
        eval.host_calls
            .iter()
            .map(|c| c.operation.as_str())
            .collect::<Vec<_>>(),
        vec!["get_resource", "list_resources_all", "list_resources_all"]
    );
    let audit = eval.response.audit_annotations.unwrap_or_default();
    assert!(audit["capacity"].contains("incoming 8 "), "{audit:?}");
}

#[test]
fn quota_mode_makes_one_host_call_with_the_exact_selector_and_masks() {
    let eval = evaluate(
        "deployment_a100_4x2_priority.json",
        Q,
        Some("session_quotas_found.yml"),
    );
    let calls: Vec<(&str, Value)> = eval
        .host_calls
        .iter()
        .map(|c| {
            (
                c.operation.as_str(),
                serde_json::from_str(&c.payload).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        vec![(
            "list_resources_all",
            serde_json::json!({"api_version": "v1", "kind": "ResourceQuota",
                "label_selector": "gpu-admission/pool=a100", "field_selector": null,
                "field_masks": ["spec.hard", "spec.scopeSelector", "spec.scopes", "status.used"]})
        )]
    );
}

/// The quota the denial asks for, read back from its message.
fn quota_to_create(message: &str) -> Value {
    let manifest = message
        .split_once("Create it: ")
        .and_then(|(_, rest)| rest.split_once(" (spec.hard"))
        .map(|(manifest, _)| manifest)
        .unwrap_or_else(|| panic!("no manifest in {message:?}"));
    serde_yaml::from_str(manifest).unwrap_or_else(|e| panic!("{manifest}: {e}"))
}

/// A replay session answering pool `pool`'s quota query with `quotas`, each given a
/// `status.used` of 0 GPUs (as the quota controller sets it on an empty namespace).
fn quota_session(pool: &str, quotas: &[Value]) -> ReplaySession {
    let items: Vec<Value> = quotas
        .iter()
        .map(|q| {
            let mut q = q.clone();
            q["status"] = serde_json::json!({"used": {"requests.nvidia.com/gpu": "0"}});
            q
        })
        .collect();
    let payload = serde_json::json!({"apiVersion": "v1", "kind": "ResourceQuotaList",
        "metadata": {"resourceVersion": "1"}, "items": items});
    let yaml = format!(
        "- type: Exchange\n  request: |\n    !KubernetesListResourceAll\n    api_version: v1\n    kind: ResourceQuota\n    label_selector: 'gpu-admission/pool={pool}'\n    field_selector: null\n    field_masks:\n    - spec.hard\n    - spec.scopeSelector\n    - spec.scopes\n    - status.used\n  response:\n    type: Success\n    payload: {}\n",
        serde_json::to_string(&payload.to_string()).unwrap()
    );
    ReplaySession::from_yaml_str(&yaml).unwrap_or_else(|e| panic!("{e:#}"))
}

#[test]
fn the_quota_a_denial_asks_for_makes_the_request_countable() {
    let denied = evaluate(
        "deployment_a100_4x2_priority.json",
        Q,
        Some("session_quotas_none.yml"),
    );
    let created = quota_to_create(denied.response.message().unwrap());
    assert_eq!(created["kind"], "ResourceQuota");
    assert_eq!(created["metadata"]["namespace"], "ml-serving");
    assert_eq!(created["metadata"]["labels"]["gpu-admission/pool"], "a100");
    assert_eq!(created["spec"]["hard"]["requests.nvidia.com/gpu"], "64");
    let request = read_admission_request(data("deployment_a100_4x2_priority.json")).unwrap();
    let eval = policy()
        .evaluate(
            &request,
            &settings(Q),
            Some(quota_session("a100", &[created])),
        )
        .unwrap();
    assert!(eval.response.allowed, "{:?}", eval.response);
    assert_eq!(
        eval.response.audit_annotations.unwrap_or_default()["capacity"],
        "a100: nvidia.com/gpu used 0 from 1 ResourceQuota + incoming 8 = 8 of capacity 64 declared in settings (12.5%), threshold 90%, fits"
    );
}

#[test]
fn without_resource_quota_in_context_aware_resources_quota_mode_fails_closed() {
    // The contextAwareResources of a policy deployed before usage: quotas existed.
    let old = serde_json::json!({"contextAwareResources": [
        {"apiVersion": "v1", "kind": "Node"}, {"apiVersion": "v1", "kind": "Pod"}]});
    let request = read_admission_request(data("deployment_a100_4x2_priority.json")).unwrap();
    let response = policy()
        .with_context_aware_access(ContextAwareAccess::from_metadata(Some(&old)))
        .validate(
            &request,
            &settings(Q),
            Some(ReplaySession::from_file(data("session_quotas_found.yml")).unwrap()),
        )
        .unwrap();
    assert!(!response.allowed);
    assert_eq!(
        response.message(),
        Some(
            "pool a100: cannot list v1/ResourceQuota: add {apiVersion: v1, kind: ResourceQuota} to the ClusterAdmissionPolicy's contextAwareResources. The GPU capacity gate denies what it cannot check (failOpen: false); the host's error is in the audit annotation host-error."
        )
    );
}

#[test]
fn fail_open_warns() {
    let eval = evaluate(
        "deployment_a100_4x2.json",
        "settings_fail_open.yml",
        Some("session_a100_nodes_not_granted.yml"),
    );
    assert_eq!(
        eval.response.warnings,
        Some(vec!["pool a100: GPU capacity was not checked: cannot list v1/Node: add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy's contextAwareResources (accepted because failOpen is true)".to_string()])
    );
}

#[test]
fn without_the_context_aware_grant_the_gate_fails_closed() {
    // What policy-server does when the ClusterAdmissionPolicy lists no contextAwareResources.
    let request = read_admission_request(data("deployment_a100_4x2.json")).unwrap();
    let denied = policy().with_context_aware_access(ContextAwareAccess::none());
    let response = denied
        .validate(
            &request,
            &settings(S),
            Some(ReplaySession::from_file(data("session_a100_below.yml")).unwrap()),
        )
        .unwrap();
    assert!(!response.allowed);
    assert_eq!(response.message(), Some(NOT_GRANTED));
}

#[test]
fn settings_validation() {
    let p = policy();
    for file in [
        "settings.yml",
        "settings_fail_open.yml",
        "settings_charge_all.yml",
        "settings_quotas.yml",
    ] {
        let v = p.validate_settings(&settings(file)).unwrap();
        assert!(v.valid, "{file}: {:?}", v.message);
    }
    let cases = [
        (
            settings("settings_invalid.yml"),
            "pools[1].name: 'a100' is already the name of pools[0]; pool names must be unique",
        ),
        (
            settings("settings_invalid_threshold.yml"),
            "pools[0].thresholdPercent: must be between 1 and 100 (got 120)",
        ),
        (
            serde_json::json!({}),
            "pools: define at least one pool, e.g. {name: a100, nodeSelector: {matchLabels: {gpu-admission/pool: a100}}}; without pools the gate has nothing to measure",
        ),
    ];
    for (s, message) in cases {
        let v = p.validate_settings(&s).unwrap();
        assert!(!v.valid);
        assert_eq!(v.message.as_deref(), Some(message));
    }
    let typo = p
        .validate_settings(&serde_json::json!({"pools": [], "failopen": true}))
        .unwrap();
    assert!(!typo.valid);
    assert!(typo.message.unwrap().contains("unknown field `failopen`"));
}

fn readme() -> &'static str {
    static README: OnceLock<String> = OnceLock::new();
    README
        .get_or_init(|| std::fs::read_to_string(policy_dir().join("README.md")).unwrap_or_default())
}

/// The ClusterAdmissionPolicy of `examples/`, and the metadata it must agree with.
fn example_documents() -> Vec<Value> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(policy_dir().join("examples/cluster-admission-policy.yaml"))
        .unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect()
}

#[test]
fn example_manifest_matches_the_metadata_and_its_settings_are_valid() {
    let docs = example_documents();
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        vec![
            "ClusterAdmissionPolicy",
            "ClusterRole",
            "ClusterRoleBinding"
        ]
    );
    let cap = &docs[0];
    let metadata = read_settings(policy_dir().join("metadata.yml")).unwrap();

    let v = policy()
        .validate_settings(&cap["spec"]["settings"])
        .unwrap();
    assert!(v.valid, "{:?}", v.message);
    assert_eq!(
        cap["spec"]["contextAwareResources"],
        metadata["contextAwareResources"]
    );
    assert_eq!(cap["spec"]["mutating"], metadata["mutating"]);
    assert_eq!(cap["spec"]["backgroundAudit"], metadata["backgroundAudit"]);
    for rule in metadata["rules"].as_array().unwrap() {
        assert!(
            cap["spec"]["rules"].as_array().unwrap().contains(rule),
            "rule {rule} of metadata.yml is missing from the example"
        );
    }
    // Every kind the policy reads is granted to the ServiceAccount (get, list, watch); the
    // DRA claims, read with get only, by deploy/policy-server.yaml for every policy.
    let dra_role = deploy_dra_role();
    for resource in metadata["contextAwareResources"].as_array().unwrap() {
        let api_version = resource["apiVersion"].as_str().unwrap();
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        let plural = format!(
            "{}s",
            resource["kind"].as_str().unwrap().to_ascii_lowercase()
        );
        let (role, verbs): (&Value, &[&str]) = if group == "resource.k8s.io" {
            (&dra_role, &["get"])
        } else {
            (&docs[1], &["get", "list", "watch"])
        };
        let granted = role["rules"].as_array().unwrap().iter().any(|r| {
            r["apiGroups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g == group)
                && r["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p == plural.as_str())
                && verbs
                    .iter()
                    .all(|verb| r["verbs"].as_array().unwrap().iter().any(|v| v == verb))
        });
        assert!(
            granted,
            "the ClusterRole does not grant {verbs:?} on {plural}"
        );
    }
    assert_eq!(docs[2]["roleRef"]["name"], docs[1]["metadata"]["name"]);
}

/// The ClusterRole of deploy/policy-server.yaml that grants every gpu-admission policy the
/// DRA reads (get on ResourceClaimTemplates and ResourceClaims), checked to be bound to the
/// PolicyServer's ServiceAccount.
fn deploy_dra_role() -> Value {
    use serde::Deserialize;
    let text =
        std::fs::read_to_string(policy_dir().join("../../deploy/policy-server.yaml")).unwrap();
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect();
    let binding = docs
        .iter()
        .find(|d| {
            d["kind"] == "ClusterRoleBinding" && d["metadata"]["name"] == "gpu-admission-dra-reader"
        })
        .expect("deploy/policy-server.yaml binds gpu-admission-dra-reader");
    assert_eq!(
        binding["subjects"][0]["name"],
        "gpu-admission-policy-server"
    );
    assert_eq!(binding["roleRef"]["name"], "gpu-admission-dra-reader");
    docs.iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == "gpu-admission-dra-reader")
        .expect("deploy/policy-server.yaml has the ClusterRole gpu-admission-dra-reader")
        .clone()
}

/// The documents of `examples/resource-quotas.yaml`.
fn example_quotas() -> Vec<Value> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(policy_dir().join("examples/resource-quotas.yaml")).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect()
}

#[test]
fn the_example_quotas_count_the_example_quota_pool() {
    // The example's pool with usage: quotas, and its quotas beside it.
    let cap = &example_documents()[0];
    let settings = &cap["spec"]["settings"];
    let pool = settings["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["usage"] == "quotas")
        .expect("the example has a pool with usage: quotas");
    let name = pool["name"].as_str().unwrap();
    let docs = example_quotas();
    let classes: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "PriorityClass")
        .map(|d| &d["metadata"]["name"])
        .collect();
    assert_eq!(
        classes,
        pool["priorityClasses"]
            .as_array()
            .unwrap()
            .iter()
            .collect::<Vec<_>>()
    );
    let quotas: Vec<Value> = docs
        .iter()
        .filter(|d| d["kind"] == "ResourceQuota")
        .cloned()
        .collect();
    assert!(quotas.len() >= 2, "{quotas:?}");
    let class = classes[0].as_str().unwrap();
    // A GPU Deployment of that pool in each quota's namespace is counted (no set-up denial).
    for quota in &quotas {
        let namespace = quota["metadata"]["namespace"].as_str().unwrap();
        let mut request =
            read_admission_request(data("deployment_a100_4x2_priority.json")).unwrap();
        request["namespace"] = Value::from(namespace);
        let template = &mut request["object"]["spec"]["template"];
        template["metadata"]["labels"]["gpu-admission/pool"] = Value::from(name);
        template["spec"]["nodeSelector"] = serde_json::json!({"gpu-admission/pool": name});
        template["spec"]["priorityClassName"] = Value::from(class);
        let eval = policy()
            .evaluate(&request, settings, Some(quota_session(name, &quotas)))
            .unwrap();
        assert!(eval.response.allowed, "{namespace}: {:?}", eval.response);
        assert_eq!(
            eval.response.audit_annotations.unwrap_or_default()["capacity"],
            format!(
                "{name}: nvidia.com/gpu used 0 from {} ResourceQuotas + incoming 8 = 8 of capacity 64 declared in settings (12.5%), threshold 85%, fits",
                quotas.len()
            )
        );
    }
}

#[test]
fn metadata_version_matches_the_crate() {
    let metadata = read_settings(policy_dir().join("metadata.yml")).unwrap();
    let cargo = std::fs::read_to_string(policy_dir().join("Cargo.toml")).unwrap();
    let version = metadata["annotations"]["io.kubewarden.policy.version"]
        .as_str()
        .unwrap();
    assert!(
        cargo.contains(&format!("version = \"{version}\"")),
        "Cargo.toml is not at {version}"
    );
}
