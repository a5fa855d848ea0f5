//! gpu-autoscaler-policy, built as wasm, through the harness: every request in
//! `policies/gpu-autoscaler-policy/test_data/` with its replay session (kwctl's format: the
//! exact host calls and field masks), the verdict, the exact message, warnings and audit
//! annotations; the host calls made; settings validation (the capacity gate's pools among
//! them); the example manifest; and the README quoting the messages verbatim.

mod common;

use std::sync::OnceLock;

use common::PolicyUnderTest;
use common::manifests::{
    assert_granted, assert_metadata_version_matches_the_crate, checked_example, deploy_dra_role,
    rbac_names, yaml_documents,
};
use gpu_e2e::ReplaySession;
use serde_json::{Value, json};

const POLICY: PolicyUnderTest = PolicyUnderTest("gpu-autoscaler-policy");

/// What one request must produce.
struct Case {
    request: &'static str,
    settings: &'static str,
    session: Option<&'static str>,
    /// `None`: allowed; `Some(message)`: denied with exactly this message.
    denied: Option<&'static str>,
    /// The one warning expected (`None`: no warning).
    warning: Option<&'static str>,
    /// The host calls made, in order.
    calls: &'static [&'static str],
    /// An audit annotation expected: (key, value).
    audit: Option<(&'static str, &'static str)>,
    /// The message or warning is quoted verbatim in the README.
    in_readme: bool,
}

const S: &str = "settings.yml";
const A100: Option<&str> = Some("session_deployment_a100.yml");
const GET_AND_LIST: &[&str] = &["get_resource", "list_resources_all"];
const GET: &[&str] = &["get_resource"];

const CPU_ONLY: &str = "HorizontalPodAutoscaler ml-serving/llm-a100: it scales Deployment llm-a100 (2 nvidia.com/gpu per replica) on cpu only, and CPU utilization does not follow GPU inference load. Scale on requests per second, queue depth or a GPU metric with a Pods or External metric (e.g. vllm:num_requests_waiting or DCGM_FI_DEV_GPU_UTIL through a metrics adapter), or with a KEDA ScaledObject and a prometheus trigger.";
const OVER_POOL: &str = "HorizontalPodAutoscaler ml-serving/llm-a100: maxReplicas 40 x 2 nvidia.com/gpu per replica = 80 nvidia.com/gpu, more than pool a100 can ever hold (64 nvidia.com/gpu allocatable on its 8 nodes). The largest maxReplicas that fits is 32: set maxReplicas to 32 or less. If pool a100 autoscales, give its ceiling in the policy settings (pools[0].maxAllocatable, karpenterNodePool or clusterAutoscaler).";
const KEDA_CPU: &str = "ScaledObject ml-serving/llm-a100: it scales Deployment llm-a100 (2 nvidia.com/gpu per replica) on cpu triggers only, and CPU utilization does not follow GPU inference load. Add a trigger on requests per second, queue depth or a GPU metric (e.g. a prometheus trigger on vllm:num_requests_waiting or DCGM_FI_DEV_GPU_UTIL).";
const NAMESPACE_MAX: &str = "HorizontalPodAutoscaler research-nlp/summarizer: maxReplicas 8 x 4 GPUs per replica = 32 GPUs, more than the 16 GPUs one autoscaler may scale to in namespace research-nlp (namespaceMaxGpus[0] in the policy settings). The largest maxReplicas that fits is 4: set maxReplicas to 4 or less.";
const SCALED_JOB: &str = "ScaledJob ml-training/finetune: maxReplicaCount 10 x 16 nvidia.com/gpu per job = 160 nvidia.com/gpu, more than pool h100-burst can ever hold (128 nvidia.com/gpu declared as its capacity in the policy settings). The largest maxReplicaCount that fits is 8: set maxReplicaCount to 8 or less.";
const NOT_FOUND: &str = "HorizontalPodAutoscaler ml-serving/llm-a100: its target Deployment ml-serving/llm-a100 was not found: create the target before its autoscaler, or correct spec.scaleTargetRef. The GPU autoscaler policy denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";
const FORBIDDEN: &str = "HorizontalPodAutoscaler ml-serving/llm-a100: cannot get apps/v1/Deployment ml-serving/llm-a100: forbidden by RBAC: grant the policy-server's ServiceAccount get on deployments (apiGroup apps). The GPU autoscaler policy denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";
const NOT_GRANTED: &str = "HorizontalPodAutoscaler ml-serving/llm-a100: cannot get apps/v1/Deployment ml-serving/llm-a100: not granted to this policy: add {apiVersion: apps/v1, kind: Deployment} to the ClusterAdmissionPolicy's contextAwareResources. The GPU autoscaler policy denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";
const NODES_NOT_GRANTED: &str = "HorizontalPodAutoscaler ml-serving/llm-a100: pool a100: cannot list v1/Node: not granted to this policy: add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy's contextAwareResources. The GPU autoscaler policy denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";
const UNKNOWN_KIND: &str = "HorizontalPodAutoscaler ml-serving/llm-canary: the GPUs of Rollout llm-canary (argoproj.io/v1alpha1) are not counted: Rollout is not a Deployment, StatefulSet, ReplicaSet or ReplicationController, nor a kind described in customKinds; describe it there to check this autoscaler";
const MALFORMED: &str = "HorizontalPodAutoscaler ml-serving/llm-a100 cannot be read, so it is denied: spec.maxReplicas: must be a non-negative integer, got \"eight\". Fix the manifest (for a custom resource, check its customKinds entry in the policy settings)";

const CASES: &[Case] = &[
    // Scale from zero: a pool with maxAllocatable and no node yet (8 x 2 GPUs of 64).
    Case {
        request: "hpa_scale_from_zero.json",
        settings: "settings_scale_from_zero.yml",
        session: Some("session_scale_from_zero.yml"),
        denied: None,
        warning: None,
        calls: GET_AND_LIST,
        audit: Some((
            "ceiling",
            "h100-serving: 64 nvidia.com/gpu (maxAllocatable), 32 fit",
        )),
        in_readme: false,
    },
    Case {
        request: "hpa_cpu_gpu_deployment.json",
        settings: S,
        session: A100,
        denied: Some(CPU_ONLY),
        warning: None,
        calls: GET_AND_LIST,
        audit: Some(("signals", "cpu")),
        in_readme: true,
    },
    Case {
        request: "hpa_external_gpu_deployment.json",
        settings: S,
        session: A100,
        denied: None,
        warning: None,
        calls: GET_AND_LIST,
        audit: Some(("ceiling", "a100: 64 nvidia.com/gpu (nodes), 32 fit")),
        in_readme: false,
    },
    Case {
        request: "hpa_max_replicas_over_pool.json",
        settings: S,
        session: A100,
        denied: Some(OVER_POOL),
        warning: None,
        calls: GET_AND_LIST,
        audit: Some((
            "target",
            "Deployment ml-serving/llm-a100: 2 nvidia.com/gpu per replica, maxReplicas 40",
        )),
        in_readme: true,
    },
    Case {
        request: "scaledobject_prometheus.json",
        settings: S,
        session: A100,
        denied: None,
        warning: None,
        calls: GET_AND_LIST,
        audit: Some(("signals", "prometheus")),
        in_readme: false,
    },
    Case {
        request: "scaledobject_cpu.json",
        settings: S,
        session: A100,
        denied: None,
        warning: Some(KEDA_CPU),
        calls: GET_AND_LIST,
        audit: None,
        in_readme: true,
    },
    // A target without GPUs: the lookup of the target is the only host call.
    Case {
        request: "hpa_cpu_web.json",
        settings: S,
        session: Some("session_deployment_web.yml"),
        denied: None,
        warning: None,
        calls: GET,
        audit: Some(("target", "Deployment frontend/web: no GPU")),
        in_readme: false,
    },
    Case {
        request: "hpa_cpu_web.json",
        settings: "-",
        session: Some("session_deployment_web.yml"),
        denied: None,
        warning: None,
        calls: GET,
        audit: None,
        in_readme: false,
    },
    Case {
        request: "hpa_research_namespace_max.json",
        settings: S,
        session: Some("session_deployment_research.yml"),
        denied: Some(NAMESPACE_MAX),
        warning: None,
        calls: GET,
        audit: Some((
            "ceiling",
            "namespace research-nlp: 16 GPUs (namespaceMaxGpus[0]), 4 fit",
        )),
        in_readme: true,
    },
    // A custom kind, in a pool with a declared capacity: no node list.
    Case {
        request: "hpa_leaderworkerset.json",
        settings: S,
        session: Some("session_leaderworkerset.yml"),
        denied: None,
        warning: None,
        calls: GET,
        audit: Some((
            "ceiling",
            "h100-burst: 128 nvidia.com/gpu (declared), 8 fit",
        )),
        in_readme: false,
    },
    // The target cannot be read: fail closed, or open with a warning.
    Case {
        request: "hpa_external_gpu_deployment.json",
        settings: S,
        session: Some("session_deployment_not_found.yml"),
        denied: Some(NOT_FOUND),
        warning: None,
        calls: GET,
        audit: None,
        in_readme: true,
    },
    Case {
        request: "hpa_external_gpu_deployment.json",
        settings: S,
        session: Some("session_deployment_forbidden.yml"),
        denied: Some(FORBIDDEN),
        warning: None,
        calls: GET,
        audit: None,
        in_readme: true,
    },
    Case {
        request: "hpa_external_gpu_deployment.json",
        settings: S,
        session: Some("session_deployment_not_granted.yml"),
        denied: Some(NOT_GRANTED),
        warning: None,
        calls: GET,
        audit: Some((
            "host-error",
            "Callback evaluation failure: Policy has not been granted access to Kubernetes apps/v1/Deployment resources. The violation has been reported.",
        )),
        in_readme: true,
    },
    Case {
        request: "hpa_external_gpu_deployment.json",
        settings: S,
        session: Some("session_nodes_not_granted.yml"),
        denied: Some(NODES_NOT_GRANTED),
        warning: None,
        calls: GET_AND_LIST,
        audit: None,
        in_readme: true,
    },
    Case {
        request: "hpa_external_gpu_deployment.json",
        settings: "settings_fail_open.yml",
        session: Some("session_deployment_forbidden.yml"),
        denied: None,
        warning: Some(
            "HorizontalPodAutoscaler ml-serving/llm-a100: GPU limits were not checked: cannot get apps/v1/Deployment ml-serving/llm-a100: forbidden by RBAC: grant the policy-server's ServiceAccount get on deployments (apiGroup apps) (accepted because unreadableCluster is warn)",
        ),
        calls: GET,
        audit: None,
        in_readme: false,
    },
    // The signal checks are settings.
    Case {
        request: "hpa_cpu_gpu_deployment.json",
        settings: "settings_warn_only.yml",
        session: A100,
        denied: None,
        warning: Some(CPU_ONLY),
        calls: GET_AND_LIST,
        audit: None,
        in_readme: false,
    },
    Case {
        request: "scaledobject_cpu.json",
        settings: "settings_warn_only.yml",
        session: A100,
        denied: None,
        warning: None,
        calls: GET_AND_LIST,
        audit: None,
        in_readme: false,
    },
    // No host call.
    Case {
        request: "scaledjob_over_declared_capacity.json",
        settings: S,
        session: None,
        denied: Some(SCALED_JOB),
        warning: None,
        calls: &[],
        audit: None,
        in_readme: true,
    },
    Case {
        request: "hpa_unknown_target_kind.json",
        settings: S,
        session: None,
        denied: None,
        warning: Some(UNKNOWN_KIND),
        calls: &[],
        audit: Some((
            "not-checked",
            "the GPUs of Rollout llm-canary (argoproj.io/v1alpha1) are not counted: Rollout is not a Deployment, StatefulSet, ReplicaSet or ReplicationController, nor a kind described in customKinds; describe it there to check this autoscaler",
        )),
        in_readme: true,
    },
    Case {
        request: "hpa_update_metadata_only.json",
        settings: S,
        session: None,
        denied: None,
        warning: None,
        calls: &[],
        audit: None,
        in_readme: false,
    },
    Case {
        request: "hpa_malformed.json",
        settings: S,
        session: None,
        denied: Some(MALFORMED),
        warning: None,
        calls: &[],
        audit: None,
        in_readme: true,
    },
    // DRA: the target's pods get 4 gpu.nvidia.com devices each from a ResourceClaimTemplate,
    // read after the target: 40 x 4 = 160 GPUs, more than pool a100's 64.
    Case {
        request: "hpa_max_replicas_over_pool.json",
        settings: S,
        session: Some("session_deployment_a100_dra.yml"),
        denied: Some(DRA_OVER_POOL),
        warning: None,
        calls: &["get_resource", "get_resource", "list_resources_all"],
        audit: Some((
            "target",
            "Deployment ml-serving/llm-a100: 4 nvidia.com/gpu per replica, maxReplicas 40",
        )),
        in_readme: false,
    },
    Case {
        request: "hpa_max_replicas_over_pool.json",
        settings: S,
        session: Some("session_deployment_a100_dra_not_found.yml"),
        denied: Some(DRA_NOT_FOUND),
        warning: None,
        calls: &["get_resource", "get_resource"],
        audit: None,
        in_readme: true,
    },
];

const DRA_OVER_POOL: &str = "HorizontalPodAutoscaler ml-serving/llm-a100: maxReplicas 40 x 4 nvidia.com/gpu per replica = 160 nvidia.com/gpu, more than pool a100 can ever hold (64 nvidia.com/gpu allocatable on its 8 nodes). The largest maxReplicas that fits is 16: set maxReplicas to 16 or less. If pool a100 autoscales, give its ceiling in the policy settings (pools[0].maxAllocatable, karpenterNodePool or clusterAutoscaler).";
const DRA_NOT_FOUND: &str = "HorizontalPodAutoscaler ml-serving/llm-a100: the GPUs of Deployment llm-a100 cannot be counted, so this autoscaler cannot be checked: spec.template.spec: resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (Host error: Callback evaluation failure: Cannot find resource.k8s.io/v1/ResourceClaimTemplate named 'four-gpus' inside of namespace 'Some(\"ml-serving\")'); create it before the workload, and let the policy read it: contextAwareResources {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate} in the policy and get on resourceclaimtemplates.resource.k8s.io for the policy server's service account";

fn readme() -> &'static str {
    static README: OnceLock<String> = OnceLock::new();
    README
        .get_or_init(|| std::fs::read_to_string(POLICY.dir().join("README.md")).unwrap_or_default())
}

/// The README wraps some quoted messages over lines: compare with whitespace folded.
fn readme_quotes(text: &str) -> bool {
    let fold = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    fold(readme()).contains(&fold(text))
}

#[test]
fn every_request_gives_its_verdict_message_warnings_and_calls() {
    for case in CASES {
        let label = format!(
            "{} with {} and {:?}",
            case.request, case.settings, case.session
        );
        let eval = if case.settings == "-" {
            let request = POLICY.request(case.request);
            let session = case.session.map(|s| POLICY.session(s));
            POLICY
                .module()
                .evaluate(&request, &json!({}), session)
                .unwrap()
        } else {
            POLICY.evaluate(case.request, case.settings, case.session)
        };
        let response = &eval.response;
        assert_eq!(
            response.allowed,
            case.denied.is_none(),
            "{label}: {response:?}"
        );
        assert_eq!(response.message(), case.denied, "{label}");
        assert_eq!(
            response.warnings.clone().unwrap_or_default(),
            case.warning
                .map(|w| vec![w.to_string()])
                .unwrap_or_default(),
            "{label}"
        );
        assert_eq!(
            eval.host_calls
                .iter()
                .map(|c| c.operation.as_str())
                .collect::<Vec<_>>(),
            case.calls,
            "{label}"
        );
        assert!(
            eval.unconsumed_exchanges.is_empty(),
            "{label}: host calls not made: {:?}",
            eval.unconsumed_exchanges
        );
        if let Some((key, value)) = case.audit {
            let audit = response.audit_annotations.clone().unwrap_or_default();
            assert_eq!(
                audit.get(key).map(String::as_str),
                Some(value),
                "{label}: {audit:?}"
            );
        }
        if case.in_readme {
            for text in case.denied.iter().chain(case.warning.iter()) {
                assert!(
                    readme_quotes(text),
                    "{label}: README does not quote {text:?}"
                );
            }
        }
    }
}

#[test]
fn every_test_data_file_has_a_case() {
    for name in POLICY.test_data_files() {
        if name.ends_with(".json") {
            assert!(
                CASES.iter().any(|c| c.request == name),
                "{name} has no case"
            );
        }
        if name.starts_with("session_") && name != "session_no_calls.yml" {
            assert!(
                CASES.iter().any(|c| c.session == Some(name.as_str())),
                "{name} is unused"
            );
        }
    }
}

#[test]
fn host_calls_carry_the_capacity_gates_requests() {
    let eval = POLICY.evaluate("hpa_external_gpu_deployment.json", S, A100);
    let payloads: Vec<Value> = eval
        .host_calls
        .iter()
        .map(|c| serde_json::from_str(&c.payload).unwrap())
        .collect();
    assert_eq!(
        payloads,
        vec![
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
                    "spec.template.spec.schedulerName"]}),
            json!({"api_version": "v1", "kind": "Node",
                "label_selector": "gpu-admission/pool=a100", "field_selector": null,
                "field_masks": ["spec.taints", "spec.unschedulable", "status.allocatable"]}),
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
    let request = POLICY.request("hpa_external_gpu_deployment.json");
    let response = POLICY.ungranted(&request, &POLICY.settings(S), "session_deployment_a100.yml");
    assert!(!response.allowed);
    assert_eq!(response.message(), Some(NOT_GRANTED));
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
        let v = p.validate_settings(&s).unwrap();
        assert!(!v.valid);
        assert_eq!(v.message.as_deref(), Some(message));
        assert!(readme_quotes(message), "README does not quote {message:?}");
    }
    let typo = p
        .validate_settings(&json!({"resourceMetricOnly": "warn"}))
        .unwrap();
    assert!(!typo.valid);
    assert!(
        typo.message
            .unwrap()
            .contains("unknown field `resourceMetricOnly`")
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
