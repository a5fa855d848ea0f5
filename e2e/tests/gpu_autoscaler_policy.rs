//! gpu-autoscaler-policy, built as wasm, through the harness: every request in
//! `policies/gpu-autoscaler-policy/test_data/` with its replay session (kwctl's format: the
//! exact host calls and field masks), the verdict, the exact message, warnings and audit
//! annotations; the host calls made; settings validation (the capacity gate's pools among
//! them); the example manifest; and the README quoting the messages verbatim.

mod common;

use common::PolicyUnderTest;
use common::manifests::{
    assert_granted, assert_metadata_version_matches_the_crate, checked_example, deploy_dra_role,
    rbac_names, yaml_documents,
};
use gpu_e2e::ReplaySession;
use serde_json::json;

const POLICY: PolicyUnderTest = PolicyUnderTest("gpu-autoscaler-policy");

const S: &str = "settings.yml";
const A100: Option<&str> = Some("session_deployment_a100.yml");

const NOT_GRANTED: &str = "HorizontalPodAutoscaler ml-serving/llm-a100: cannot get apps/v1/Deployment ml-serving/llm-a100: not granted to this policy: add {apiVersion: apps/v1, kind: Deployment} to the ClusterAdmissionPolicy's contextAwareResources. The GPU autoscaler policy denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";

#[test]
fn every_request_gives_its_verdict_message_warnings_and_calls() {
    POLICY.check_cases(true, |_, _| Vec::new());
}

#[test]
fn every_test_data_file_has_a_case() {
    // Settings that the settings tests read.
    POLICY.assert_every_file_has_an_answer(&[
        "settings_invalid.yml",
        "settings_invalid_namespace_max.yml",
        "settings_fail_open_old_spelling.yml",
    ]);
}

#[test]
fn host_calls_carry_the_capacity_gates_requests() {
    let eval = POLICY.evaluate("hpa_external_gpu_deployment.json", S, A100);
    assert_eq!(
        eval.calls(),
        vec![
            (
                "get_resource",
                json!({"api_version": "apps/v1", "kind": "Deployment", "name": "llm-a100",
                "namespace": "ml-serving", "disable_cache": false,
                "field_masks": ["spec.template.metadata.annotations.gpu-fraction",
                    "spec.template.metadata.annotations.gpu-fraction-num-devices",
                    "spec.template.metadata.annotations.gpu-memory",
                    "spec.template.metadata.labels", "spec.template.spec.affinity.nodeAffinity",
                    "spec.template.spec.containers.resources", "spec.template.spec.ephemeralContainers.resources",
                    "spec.template.spec.initContainers.resources", "spec.template.spec.initContainers.restartPolicy",
                    "spec.template.spec.nodeSelector", "spec.template.spec.priorityClassName",
                    "spec.template.spec.resourceClaims", "spec.template.spec.resources",
                    "spec.template.spec.schedulerName"]})
            ),
            (
                "list_resources_all",
                json!({"api_version": "v1", "kind": "Node",
                "label_selector": "gpu-admission/pool=a100", "field_selector": null,
                "field_masks": ["spec.taints", "spec.unschedulable", "status.allocatable"]})
            ),
        ]
    );
}

#[test]
fn the_capacity_gates_requests_are_byte_for_byte_the_same() {
    // The gate's scale of Deployment ml-serving/llm-a100 reads the same Deployment and the
    // same pool: one cache entry and one watch in policy-server for both policies.
    let gate = PolicyUnderTest("gpu-capacity-gate-policy").session("session_scale_a100_over.yml");
    let ours = POLICY.session("session_deployment_a100.yml");
    let requests = |s: &ReplaySession| s.remaining().map(|e| e.request.clone()).collect::<Vec<_>>();
    assert_eq!(requests(&gate)[..2], requests(&ours)[..]);
}

#[test]
fn without_the_context_aware_grant_the_policy_fails_closed() {
    let denial = POLICY.ungranted_denial(
        "hpa_external_gpu_deployment.json",
        S,
        "session_deployment_a100.yml",
    );
    assert_eq!(denial, NOT_GRANTED);
}

#[test]
fn settings_validation() {
    let p = POLICY.module();
    POLICY.assert_valid_settings(&[
        "settings.yml",
        "settings_fail_open.yml",
        "settings_fail_open_old_spelling.yml",
        "settings_warn_only.yml",
    ]);
    assert!(p.validate_settings(&json!({})).unwrap().valid);
    let cases = [
        (
            POLICY.settings("settings_invalid.yml"),
            "pools[1].name: 'a100' is already the name of pools[0]; pool names must be unique",
        ),
        (
            POLICY.settings("settings_invalid_namespace_max.yml"),
            "namespaceMaxGpus[0].maxGpus: must be at least 1 (an autoscaler of a GPU workload needs at least one replica's GPUs)",
        ),
    ];
    for (s, message) in cases {
        assert_eq!(POLICY.settings_refusal(&s), message);
        assert!(
            POLICY.readme_quotes(message, true),
            "README does not quote {message:?}"
        );
    }
    let typo = POLICY.settings_refusal(&json!({"resourceMetricOnly": "warn"}));
    assert!(
        typo.contains("unknown field `resourceMetricOnly`"),
        "{typo}"
    );
}

#[test]
fn the_capacity_gates_pools_are_valid_settings_here() {
    // Pasting the gate's poolLabelKey, pools, extraGpuResources and customKinds works.
    let gate_dir = PolicyUnderTest("gpu-capacity-gate-policy").dir();
    for file in [
        "test_data/settings.yml",
        "examples/cluster-admission-policy.yaml",
    ] {
        let gate = yaml_documents(gate_dir.join(file)).remove(0);
        let gate = if gate["kind"] == "ClusterAdmissionPolicy" {
            gate["spec"]["settings"].clone()
        } else {
            gate
        };
        let mut ours = json!({});
        for key in [
            "poolLabelKey",
            "pools",
            "extraGpuResources",
            "customKinds",
            "exemptNamespaces",
        ] {
            if !gate[key].is_null() {
                ours[key] = gate[key].clone();
            }
        }
        let v = POLICY.module().validate_settings(&ours).unwrap();
        assert!(v.valid, "{file}: {:?}", v.message);
    }
}

#[test]
fn example_manifest_matches_the_metadata_and_its_settings_are_valid() {
    let (docs, metadata) = checked_example(&POLICY.module(), &POLICY.dir());
    // Every kind read: get on the targets, list and watch on Nodes; get on the DRA claims
    // (granted to every policy by deploy/policy-server.yaml).
    let dra_role = deploy_dra_role();
    for resource in metadata["contextAwareResources"].as_array().unwrap() {
        let (group, kind, plural) = rbac_names(resource);
        let role = if group == "resource.k8s.io" {
            &dra_role
        } else {
            &docs[1]
        };
        let verbs: &[&str] = if kind == "Node" {
            &["list", "watch"]
        } else {
            &["get"]
        };
        assert_granted(role, group, &plural, verbs);
    }
}

#[test]
fn metadata_version_matches_the_crate() {
    assert_metadata_version_matches_the_crate(&POLICY.dir());
}
