//! gpu-capacity-gate-policy, built as wasm, through the harness: every request in
//! `policies/gpu-capacity-gate-policy/test_data/` with its replay session (kwctl's
//! format: the exact host calls, selectors and field masks included), the verdict, the
//! exact message, warnings and audit annotations; settings validation; and the README
//! quoting the messages verbatim.

mod common;

use common::PolicyUnderTest;
use common::dates::DatedException;
use common::manifests::{
    assert_granted, assert_metadata_version_matches_the_crate, checked_example, deploy_dra_role,
    rbac_names, yaml_documents,
};
use gpu_e2e::ReplaySession;
use serde_json::Value;

const POLICY: PolicyUnderTest = PolicyUnderTest("gpu-capacity-gate-policy");

const S: &str = "settings.yml";

const OVER: &str = "pool a100: nvidia.com/gpu would be 58 of 64 allocatable (90.6%) with this workload's 8 (50 in use), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool.";
const NOT_GRANTED: &str = "pool a100: cannot list v1/Node: not granted to this policy: add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy's contextAwareResources. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";

// Usage from ResourceQuotas (settings_quotas.yml).
const Q: &str = "settings_quotas.yml";

// DRA: a Deployment of 3 replicas whose pods each get 4 gpu.nvidia.com devices from a
// ResourceClaimTemplate (12 GPUs), and claims that cannot be counted.
const DRA: &str = "deployment_dra_a100_3x4.json";

const KARPENTER_NOT_GRANTED: &str = "pool a100: cannot get karpenter.sh/v1/NodePool gpu-a100: not granted to this policy: add {apiVersion: karpenter.sh/v1, kind: NodePool} to the ClusterAdmissionPolicy's contextAwareResources. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";
const BIGGER_THAN_NODES: &str = "pool a100: the pod asks for 16 nvidia.com/gpu, more than any node of the pool has (the largest, gpu-a100-0, has 8 nvidia.com/gpu allocatable), so it can never be scheduled. Ask for at most 8 nvidia.com/gpu per pod (split the work over more pods), or target a pool with bigger nodes.";

#[test]
fn every_request_gives_its_verdict_message_and_annotations() {
    POLICY.check_cases(false, |_, _| Vec::new());
}

#[test]
fn every_test_data_request_has_a_case() {
    // Settings that the settings tests, e2e.bats or the kwctl parity test read.
    POLICY.assert_every_file_has_an_answer(&[
        "settings_invalid.yml",
        "settings_fail_open_old_spelling.yml",
        "settings_invalid_threshold.yml",
    ]);
}

#[test]
fn host_calls_carry_the_exact_selectors_and_masks() {
    let eval = POLICY.evaluate(
        "deployment_a100_4x2.json",
        S,
        Some("session_a100_below.yml"),
    );
    assert_eq!(
        eval.calls(),
        vec![
            (
                "list_resources_all",
                serde_json::json!({"api_version": "v1", "kind": "Node",
                "label_selector": "gpu-admission/pool=a100", "field_selector": null,
                "field_masks": ["spec.taints", "spec.unschedulable", "status.allocatable"]})
            ),
            (
                "list_resources_all",
                serde_json::json!({"api_version": "v1", "kind": "Pod",
                "label_selector": "gpu-admission/pool=a100",
                "field_selector": "status.phase!=Succeeded,status.phase!=Failed",
                "field_masks": ["spec.containers.resources", "spec.ephemeralContainers.resources",
                                "spec.initContainers.resources", "spec.initContainers.restartPolicy",
                                "spec.nodeName", "spec.resources"]})
            ),
        ]
    );
}

#[test]
fn dra_claims_are_read_first_then_the_pool() {
    let eval = POLICY.evaluate(DRA, Q, Some("session_dra_quotas_found.yml"));
    let calls = eval.calls();
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
    let old = serde_json::json!([
        {"apiVersion": "v1", "kind": "Node"}, {"apiVersion": "v1", "kind": "Pod"},
        {"apiVersion": "v1", "kind": "ResourceQuota"}]);
    let eval = POLICY.evaluate_granted(old, DRA, Q, "session_dra_quotas_found.yml");
    assert!(!eval.response.allowed);
    assert!(
        eval.response
            .message()
            .unwrap()
            .starts_with("the capacity gate cannot count the GPUs of this workload, so it cannot admit it: spec.template.spec: resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (not granted to this policy: add {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate} to the ClusterAdmissionPolicy's contextAwareResources)"),
        "{:?}",
        eval.response
    );
    assert_eq!(eval.host_calls.len(), 1);
}

#[test]
fn scale_reads_the_deployment_then_the_pool() {
    let eval = POLICY.evaluate(
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
fn a_karpenter_pool_reads_its_nodes_then_its_node_pool_then_its_pods() {
    let eval = POLICY.evaluate(
        "deployment_a100_4x2.json",
        "settings_karpenter.yml",
        Some("session_karpenter_zero_nodes.yml"),
    );
    let calls = eval.calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls[0].1["kind"], "Node");
    assert_eq!(
        calls[1],
        (
            "get_resource",
            serde_json::json!({"api_version": "karpenter.sh/v1", "kind": "NodePool",
                "name": "gpu-a100", "namespace": null, "disable_cache": false,
                "field_masks": ["spec.limits"]})
        )
    );
    assert_eq!(calls[2].1["kind"], "Pod");
}

/// The contextAwareResources of the gate's first versions: Nodes and Pods.
fn nodes_and_pods_only() -> Value {
    serde_json::json!([{"apiVersion": "v1", "kind": "Node"}, {"apiVersion": "v1", "kind": "Pod"}])
}

#[test]
fn without_node_pool_in_context_aware_resources_a_karpenter_pool_fails_closed() {
    // A policy deployed before karpenterNodePool existed.
    let denial = POLICY.denial_granted(
        nodes_and_pods_only(),
        "deployment_a100_4x2.json",
        "settings_karpenter.yml",
        "session_karpenter_zero_nodes.yml",
    );
    assert_eq!(denial, KARPENTER_NOT_GRANTED);
}

#[test]
fn pods_bigger_than_every_node_are_denied_before_any_warning_and_whatever_unreadable_cluster() {
    // unreadableCluster is about cluster reads; a pod no node can hold is denied all the same.
    let request = POLICY.request("pod_a100_16gpu.json");
    let eval = POLICY
        .module()
        .evaluate(
            &request,
            &POLICY.settings("settings_fail_open.yml"),
            Some(POLICY.session("session_a100_8gpu_nodes.yml")),
        )
        .unwrap();
    assert_eq!(eval.response.message(), Some(BIGGER_THAN_NODES));
}

#[test]
fn quota_mode_makes_one_host_call_with_the_exact_selector_and_masks() {
    let eval = POLICY.evaluate(
        "deployment_a100_4x2_priority.json",
        Q,
        Some("session_quotas_found.yml"),
    );
    let calls = eval.calls();
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
    yaml_serde::from_str(manifest).unwrap_or_else(|e| panic!("{manifest}: {e}"))
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
    let denied = POLICY.evaluate(
        "deployment_a100_4x2_priority.json",
        Q,
        Some("session_quotas_none.yml"),
    );
    let created = quota_to_create(denied.response.message().unwrap());
    assert_eq!(created["kind"], "ResourceQuota");
    assert_eq!(created["metadata"]["namespace"], "ml-serving");
    assert_eq!(created["metadata"]["labels"]["gpu-admission/pool"], "a100");
    assert_eq!(created["spec"]["hard"]["requests.nvidia.com/gpu"], "64");
    let request = POLICY.request("deployment_a100_4x2_priority.json");
    let eval = POLICY
        .module()
        .evaluate(
            &request,
            &POLICY.settings(Q),
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
    // A policy deployed before usage: quotas existed.
    let denial = POLICY.denial_granted(
        nodes_and_pods_only(),
        "deployment_a100_4x2_priority.json",
        Q,
        "session_quotas_found.yml",
    );
    assert_eq!(
        denial,
        "pool a100: cannot list v1/ResourceQuota: not granted to this policy: add {apiVersion: v1, kind: ResourceQuota} to the ClusterAdmissionPolicy's contextAwareResources. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error."
    );
}

#[test]
fn unreadable_cluster_warn_accepts_with_a_warning() {
    let eval = POLICY.evaluate(
        "deployment_a100_4x2.json",
        "settings_fail_open.yml",
        Some("session_a100_nodes_not_granted.yml"),
    );
    assert_eq!(
        eval.response.warnings,
        Some(vec!["pool a100: GPU capacity was not checked: cannot list v1/Node: not granted to this policy: add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy's contextAwareResources (accepted because unreadableCluster is warn)".to_string()])
    );
}

#[test]
fn without_the_context_aware_grant_the_gate_fails_closed() {
    // What policy-server does when the ClusterAdmissionPolicy lists no contextAwareResources.
    let denial = POLICY.ungranted_denial("deployment_a100_4x2.json", S, "session_a100_below.yml");
    assert_eq!(denial, NOT_GRANTED);
}

#[test]
fn settings_validation() {
    POLICY.assert_valid_settings(&[
        "settings.yml",
        "settings_fail_open.yml",
        "settings_fail_open_old_spelling.yml",
        "settings_charge_all.yml",
        "settings_quotas.yml",
        "settings_static_ceiling.yml",
        "settings_karpenter.yml",
        "settings_cluster_autoscaler.yml",
        "settings_fragmentation_deny.yml",
        "settings_no_surge.yml",
        "settings_alternatives.yml",
        "settings_peak.yml",
        "settings_exceptions.yml",
        "settings_exceptions_expired.yml",
    ]);
    let cases = [
        (
            POLICY.settings("settings_invalid.yml"),
            "pools[1].name: 'a100' is already the name of pools[0]; pool names must be unique",
        ),
        (
            POLICY.settings("settings_invalid_threshold.yml"),
            "pools[0].thresholdPercent: must be between 1 and 100 (got 120)",
        ),
        (
            serde_json::json!({}),
            "pools: define at least one pool, e.g. {name: a100, nodeSelector: {matchLabels: {gpu-admission/pool: a100}}}; without pools the gate has nothing to measure",
        ),
        (
            serde_json::json!({"pools": [{"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}},
                "thresholds": [{"window": "peak", "thresholdPercent": 80}]}]}),
            "pools[0].thresholds[0].window: 'peak' names no schedule; define it under schedules",
        ),
        (
            serde_json::json!({"pools": [{"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}},
                "maxAllocatable": {"nvidia.com/gpu": 64}, "karpenterNodePool": "gpu-a100"}]}),
            "pools[0].karpenterNodePool: the pool already has a ceiling in pools[0].maxAllocatable; give one ceiling per pool",
        ),
        (
            serde_json::json!({"pools": [{"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}},
                "alternatives": ["batch"]}]}),
            "pools[0].alternatives[0]: 'batch' names no pool; use one of the other pools (there are none)",
        ),
    ];
    for (s, message) in cases {
        assert_eq!(POLICY.settings_refusal(&s), message);
    }
    let typo = POLICY.settings_refusal(&serde_json::json!({"pools": [], "failopen": true}));
    assert!(typo.contains("unknown field `failopen`"), "{typo}");
}

#[test]
fn example_manifest_matches_the_metadata_and_its_settings_are_valid() {
    let (docs, metadata) = checked_example(&POLICY.module(), &POLICY.dir());
    let cap = &docs[0];
    // Every kind the policy reads is granted to the ServiceAccount (get, list, watch; get for
    // NodePools); the DRA claims, read with get only, by deploy/policy-server.yaml for every
    // policy.
    let dra_role = deploy_dra_role();
    for resource in metadata["contextAwareResources"].as_array().unwrap() {
        let (group, kind, plural) = rbac_names(resource);
        // The team budgets ConfigMap is read only with teamBudgetsConfigMap, granted then
        // by a Role in its namespace (the README says how).
        if kind == "ConfigMap" {
            assert!(
                cap["spec"]["settings"]["teamBudgetsConfigMap"].is_null(),
                "the example reads a budgets ConfigMap: grant it"
            );
            continue;
        }
        let (role, verbs): (&Value, &[&str]) = match (group, kind) {
            ("resource.k8s.io", _) => (&dra_role, &["get"]),
            // NodePools, LocalQueues and Namespaces are only read with get_resource.
            ("karpenter.sh", _) | ("kueue.x-k8s.io", _) | ("", "Namespace") => (&docs[1], &["get"]),
            _ => (&docs[1], &["get", "list", "watch"]),
        };
        assert_granted(role, group, &plural, verbs);
    }
}

/// The documents of `examples/resource-quotas.yaml`.
fn example_quotas() -> Vec<Value> {
    yaml_documents(POLICY.dir().join("examples/resource-quotas.yaml"))
}

#[test]
fn the_example_quotas_count_the_example_quota_pool() {
    // The example's pool with usage: quotas, and its quotas beside it.
    let cap = &yaml_documents(POLICY.dir().join("examples/cluster-admission-policy.yaml"))[0];
    // The pool's quotas only: the namespace quota and team budget checks are tested above.
    let mut settings = cap["spec"]["settings"].clone();
    settings["checkNamespaceQuotas"] = Value::from(false);
    settings.as_object_mut().unwrap().remove("teamBudgets");
    let settings = &settings;
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
        let mut request = POLICY.request("deployment_a100_4x2_priority.json");
        request["namespace"] = Value::from(namespace);
        let template = &mut request["object"]["spec"]["template"];
        template["metadata"]["labels"]["gpu-admission/pool"] = Value::from(name);
        template["spec"]["nodeSelector"] = serde_json::json!({"gpu-admission/pool": name});
        template["spec"]["priorityClassName"] = Value::from(class);
        let eval = POLICY
            .module()
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
    assert_metadata_version_matches_the_crate(&POLICY.dir());
}

#[test]
fn the_exception_fixture_is_renewed_in_time() {
    POLICY.assert_exception_fixture_renewed();
}

#[test]
fn an_excused_denial_is_kept_in_the_audit_and_warned_about_in_its_last_week() {
    let exception = DatedException::new("llm-a100-launch", "serving-team@example.com");
    let request = POLICY.request("deployment_a100_4x2.json");
    let (month, _) = exception.assert_applies(POLICY, &request, Some("session_a100_over.yml"), 2);
    let audit = month.audit_annotations.unwrap_or_default();
    assert_eq!(audit.get("excused").map(String::as_str), Some(OVER));
    // Another workload of the namespace, which the selector does not match, is still denied.
    exception.assert_not_applied_to_another_app(
        POLICY,
        &request,
        Some("session_a100_over.yml"),
        "llm-other",
    );
}
