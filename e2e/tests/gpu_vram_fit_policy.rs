//! gpu-vram-fit-policy, built as wasm, through the harness: every request in
//! `policies/gpu-vram-fit-policy/test_data/` with its verdict, the exact message, warnings
//! and audit annotations (server arguments of vLLM, SGLang, TGI and KServe's huggingface
//! runtime in both spellings, requested-memory caps, over-provisioning); the registry
//! ConfigMap and image configs served from kwctl replay sessions (found, not found,
//! malformed; labels found, missing, a registry error) and no host call without them;
//! DRA claims and claim templates (count, product from the selector, malformed) and
//! HAMi's fractional GPUs; exceptions (valid, ending soon with dates computed at test
//! time, expired); settings validation; the metadata; and the README quoting the messages
//! verbatim.

mod common;

use std::collections::BTreeSet;

use common::PolicyUnderTest;
use common::dates::DatedException;
use common::manifests::yaml_documents;
use gpu_e2e::metadata::Metadata;
use gpu_e2e::{CallbackRequest, Exchange, HostCall, RecordedResponse, ReplaySession};
use serde_json::{Value, json};

const POLICY: PolicyUnderTest = PolicyUnderTest("gpu-vram-fit-policy");

const S: &str = "settings.yml";

/// settings_exceptions.yml's exception (until 2027-09-27: renew the fixture before then).
const EXCEPTION_AUDIT: &str =
    "exception=llama-70b-a10g-trial owner=serving-team@example.com expires=2027-09-28T00:00:00Z";

const SETTINGS_DRA_API: &str = "dra.apiVersion: 'resource.k8s.io/v2' is not a DRA API version (resource.k8s.io/v1, v1beta2 or v1beta1)";
const SETTINGS_DRA_CLASS: &str = "dra.gpuDeviceClasses.gpu.example.com: 'example.com/gpu x' is not a resource name (give the GPU resource its devices count as, e.g. nvidia.com/gpu, or \"\" to count the class as no GPU)";
const SETTINGS_KAI_NAMES: &str = "fractionalGpus.kai.schedulerNames: give at least one schedulerName, or set fractionalGpus.kai.enabled: false";

#[test]
fn every_test_data_request_gets_its_verdict_and_message() {
    // A rejection carries no audit annotation but the host's error (nodeInventory's failed
    // Node list, as the capacity gate's failed calls).
    POLICY.check_cases(false, |case, e| match &e.response.audit_annotations {
        Some(a) if !e.response.allowed && a.keys().any(|k| k != "host-error") => {
            vec![format!(
                "{}: a rejection carries audit annotations",
                case.label()
            )]
        }
        _ => Vec::new(),
    });
}

/// The first host call of `request` under `settings`, answered from `session`; the request is
/// accepted.
fn first_call_of_an_accepted(request: &str, settings: &str, session: &str) -> HostCall {
    let e = POLICY.evaluate(request, settings, Some(session));
    assert!(e.response.allowed, "{:?}", e.response);
    e.host_calls.into_iter().next().expect("a host call")
}

#[test]
fn the_registry_is_read_with_the_sdk_get_resource_request() {
    let call = first_call_of_an_accepted(
        "deployment_registry_model.json",
        "settings_registry.yml",
        "session_registry_found.yml",
    );
    assert_eq!(call.target(), ("kubewarden", "kubernetes", "get_resource"));
    assert_eq!(
        serde_json::from_str::<Value>(&call.payload).unwrap(),
        json!({"api_version": "v1", "kind": "ConfigMap", "name": "gpu-models",
               "namespace": "gpu-system", "disable_cache": false, "field_masks": null})
    );
}

#[test]
fn dra_claims_are_read_with_a_masked_get_in_the_request_namespace() {
    for (request, session, kind, name, mask) in [
        (
            "deployment_dra_claim_llama_70b_on_h100.json",
            "session_dra_claim_four_gpus.yml",
            "ResourceClaim",
            "h100-x4",
            "spec.devices",
        ),
        (
            "deployment_dra_llama_70b.json",
            "session_dra_four_h100_selector.yml",
            "ResourceClaimTemplate",
            "h100-gpus",
            "spec.spec.devices",
        ),
    ] {
        let e = POLICY.evaluate(request, S, Some(session));
        assert!(e.response.allowed, "{request}: {:?}", e.response);
        let calls = e.calls();
        assert_eq!(
            calls,
            vec![(
                "get_resource",
                json!({"api_version": "resource.k8s.io/v1", "kind": kind, "name": name,
                       "namespace": "ml-serving", "disable_cache": false, "field_masks": [mask]})
            )]
        );
    }
    // Deployed without the DRA grant: the claim cannot be read, and the pod is denied.
    let denial = POLICY.denial_granted(
        json!([{"apiVersion": "v1", "kind": "ConfigMap"}]),
        "deployment_dra_llama_70b.json",
        S,
        "session_dra_four_h100_selector.yml",
    );
    assert_eq!(
        denial,
        "the GPU request cannot be counted: resource claim 'gpus' (ResourceClaimTemplate h100-gpus) cannot be read (not granted to this policy: add {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate} to the ClusterAdmissionPolicy's contextAwareResources)"
    );
}

#[test]
fn image_labels_are_read_with_the_sdk_oci_manifest_config_request() {
    let call = first_call_of_an_accepted(
        "deployment_image_labelled.json",
        "settings_image_labels.yml",
        "session_image_labels_found.yml",
    );
    assert_eq!(
        call.target(),
        ("kubewarden", "oci", "v1/oci_manifest_config")
    );
    assert_eq!(
        call.payload,
        r#""registry.example.com/ml/support-bot:2024.10""#
    );
    // Off by default: the same request makes no host call.
    let request = POLICY.request("deployment_image_labelled.json");
    let e = POLICY
        .module()
        .evaluate(
            &request,
            &POLICY.settings(S),
            Some(ReplaySession::default()),
        )
        .unwrap();
    assert!(e.response.allowed);
    assert!(e.host_calls.is_empty(), "{:?}", e.host_calls);
}

#[test]
fn both_spellings_of_every_flag_give_the_same_answer() {
    for (spaced, joined) in [
        (
            "deployment_vllm_flags_spaced.json",
            "deployment_vllm_flags_equals.json",
        ),
        (
            "deployment_sglang_spaced.json",
            "deployment_sglang_equals.json",
        ),
        (
            "deployment_tgi_args_spaced.json",
            "deployment_tgi_args_equals.json",
        ),
        (
            "inferenceservice_hf_runtime_args_spaced.json",
            "inferenceservice_hf_runtime_args_equals.json",
        ),
    ] {
        let args = |file: &str| {
            let r = POLICY.request(file);
            let text = r.to_string();
            assert!(text.contains("\"--"), "{file} has flags");
            r
        };
        let (a, b) = (args(spaced), args(joined));
        assert_ne!(
            a["object"], b["object"],
            "{spaced} and {joined} spell them differently"
        );
        let (ra, rb) = (
            POLICY.evaluate(spaced, S, None).response,
            POLICY.evaluate(joined, S, None).response,
        );
        assert_eq!(
            (
                ra.allowed,
                ra.message(),
                &ra.warnings,
                &ra.audit_annotations
            ),
            (
                rb.allowed,
                rb.message(),
                &rb.warnings,
                &rb.audit_annotations
            ),
            "{spaced} vs {joined}"
        );
    }
}

#[test]
fn no_host_call_when_nothing_needs_the_registry() {
    // Registry configured, but the workload names no model, is exempt, is deleted, or
    // (an UPDATE) changes nothing the rule reads: nothing to look up.
    let settings = POLICY.settings("settings_registry.yml");
    for request in [
        "deployment_no_model.json",
        "pod_in_exempt_namespace.json",
        "pod_delete.json",
        "deployment_update_unchanged.json",
    ] {
        let request_json = POLICY.request(request);
        let e = POLICY
            .module()
            .evaluate(&request_json, &settings, Some(ReplaySession::default()))
            .unwrap();
        assert!(e.response.allowed, "{request}: {:?}", e.response);
        assert!(e.host_calls.is_empty(), "{request}: {:?}", e.host_calls);
    }
}

#[test]
fn without_context_aware_access_the_denial_names_the_fix() {
    // `kwctl run` without --allow-context-aware: the host refuses the ConfigMap.
    let message = POLICY.ungranted_denial(
        "deployment_registry_model.json",
        "settings_registry.yml",
        "session_registry_found.yml",
    );
    assert_eq!(
        message,
        "the model registry ConfigMap gpu-system/gpu-models cannot be read (not granted to this policy: add {apiVersion: v1, kind: ConfigMap} to the ClusterAdmissionPolicy's contextAwareResources) (settings.modelRegistry)"
    );
}

#[test]
fn settings_files_are_valid_and_invalid_ones_name_the_field() {
    POLICY.assert_valid_settings(&[
        "settings.yml",
        "settings_pools.yml",
        "settings_caps.yml",
        "settings_warn.yml",
        "settings_registry.yml",
        "settings_requested_caps.yml",
        "settings_overprovision_deny.yml",
        "settings_image_labels.yml",
        "settings_fractional.yml",
        "settings_exceptions.yml",
        "settings_exceptions_expired.yml",
    ]);
    for (file, message) in [
        (
            "settings_invalid.yml",
            "models[meta-llama/Llama-3.1-8B-Instruct].dtype: 'bf17' is not a dtype; use one of fp32, bf16, fp16, fp8, int8, int4",
        ),
        (
            "settings_invalid_percent.yml",
            "usableMemoryPercent: give a whole percentage such as 90 (for vLLM's --gpu-memory-utilization 0.9), got '0.9'",
        ),
    ] {
        let refusal = POLICY.settings_refusal(&POLICY.settings(file));
        assert_eq!(refusal, message, "{file}");
    }
    let empty = POLICY.module().validate_settings(&json!({})).unwrap();
    assert!(
        empty.valid,
        "defaults work out of the box: {:?}",
        empty.message
    );
    let typo = POLICY.settings_refusal(&json!({"usableMemoryPercentage": 90}));
    assert!(
        typo.contains("usableMemoryPercentage"),
        "unknown fields are named"
    );
    // The DRA and fractional-GPU blocks name their fields (the README quotes these).
    for (settings, message) in [
        (
            json!({"dra": {"apiVersion": "resource.k8s.io/v2"}}),
            SETTINGS_DRA_API,
        ),
        (
            json!({"dra": {"gpuDeviceClasses": {"gpu.example.com": "example.com/gpu x"}}}),
            SETTINGS_DRA_CLASS,
        ),
        (
            json!({"fractionalGpus": {"kai": {"schedulerNames": []}}}),
            SETTINGS_KAI_NAMES,
        ),
    ] {
        assert_eq!(POLICY.settings_refusal(&settings), message);
    }
    let zero_layers = POLICY.settings_refusal(
        &json!({"models": {"m": {"parametersBillions": 7, "dtype": "bf16",
        "layers": 0, "kvHeads": 8, "headDim": 128, "contextLength": 4096}}}),
    );
    assert_eq!(
        zero_layers,
        "models[m].layers: must be a whole number from 1 to 10000, got '0'"
    );
}

#[test]
fn metadata_is_valid_and_declares_the_configmap_read() {
    let text = std::fs::read_to_string(POLICY.dir().join("metadata.yml")).unwrap();
    let metadata = Metadata::from_yaml(&text).unwrap().annotated("v1", None);
    metadata.validate().unwrap();
    assert!(!metadata.mutating);
    let resources: BTreeSet<String> = metadata
        .rules
        .iter()
        .flat_map(|r| r.resources.iter().cloned())
        .collect();
    for r in [
        "pods",
        "replicationcontrollers",
        "deployments",
        "statefulsets",
        "daemonsets",
        "replicasets",
        "jobs",
        "cronjobs",
        "inferenceservices",
        "leaderworkersets",
        "rayclusters",
        "pytorchjobs",
    ] {
        assert!(resources.contains(r), "{r} missing from metadata.yml rules");
    }
    let json = serde_json::to_value(&metadata).unwrap();
    assert_eq!(
        json["contextAwareResources"],
        json!([{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim"},
               {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate"},
               {"apiVersion": "v1", "kind": "ConfigMap"},
               {"apiVersion": "v1", "kind": "Node"}])
    );
    assert_eq!(
        json["hostCapabilities"],
        json!([
            "kubernetes/get_resource",
            "kubernetes/list_resources_all",
            "oci/v1/oci_manifest_config"
        ])
    );
    let cargo = std::fs::read_to_string(POLICY.dir().join("Cargo.toml")).unwrap();
    let version = metadata.annotation("io.kubewarden.policy.version").unwrap();
    assert!(
        cargo.contains(&format!("version = \"{version}\"")),
        "metadata version {version} differs from Cargo.toml"
    );
}

#[test]
fn the_readme_quotes_the_messages_verbatim() {
    POLICY.assert_readme_quotes(
        [SETTINGS_DRA_API, SETTINGS_DRA_CLASS, SETTINGS_KAI_NAMES]
            .into_iter()
            .chain([EXCEPTION_AUDIT]),
    );
}

#[test]
fn every_file_in_test_data_is_exercised() {
    POLICY
        .assert_every_file_has_an_answer(&["settings_invalid.yml", "settings_invalid_percent.yml"]);
}

/// The documents of `examples/cluster-admission-policy.yaml`, by kind.
fn example(kind: &str) -> Value {
    yaml_documents(POLICY.dir().join("examples/cluster-admission-policy.yaml"))
        .into_iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in the example"))
}

#[test]
fn the_example_policy_is_valid_and_its_registry_configmap_works() {
    let policy_doc = example("ClusterAdmissionPolicy");
    let spec = &policy_doc["spec"];
    assert_eq!(
        spec["module"],
        "registry://ghcr.io/gpu-admission/policies/gpu-vram-fit-policy:v0.1.0"
    );
    assert_eq!(
        spec["contextAwareResources"],
        json!([{"apiVersion": "v1", "kind": "ConfigMap"},
               {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate"},
               {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim"}])
    );
    let settings = &spec["settings"];
    let v = POLICY.module().validate_settings(settings).unwrap();
    assert!(v.valid, "{:?}", v.message);

    // The example's rules cover every resource of metadata.yml.
    let text = std::fs::read_to_string(POLICY.dir().join("metadata.yml")).unwrap();
    let metadata = Metadata::from_yaml(&text).unwrap();
    let in_example: BTreeSet<String> = spec["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["resources"].as_array().unwrap().iter())
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    for rule in &metadata.rules {
        for r in &rule.resources {
            assert!(
                in_example.contains(r),
                "{r} missing from the example's rules"
            );
        }
    }

    // Serve the example ConfigMap to the example settings: its models are read and valid.
    let configmap = example("ConfigMap");
    let registry = &settings["modelRegistry"];
    assert_eq!(configmap["metadata"]["name"], registry["name"]);
    assert_eq!(configmap["metadata"]["namespace"], registry["namespace"]);
    let session = || {
        ReplaySession::new([Exchange {
            request: CallbackRequest::KubernetesGetResource {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "gpu-models".into(),
                namespace: Some("gpu-system".into()),
                disable_cache: false,
                field_masks: None,
            },
            response: RecordedResponse::Success {
                payload: configmap.to_string(),
            },
        }])
    };
    let mut request = POLICY.request("deployment_registry_model.json");
    let template = &mut request["object"]["spec"]["template"];
    template["metadata"]["labels"]["gpu-admission/model"] = json!("deepseek-v3");
    template["spec"]["containers"][0]["args"] = json!(["--model", "deepseek-ai/DeepSeek-V3"]);
    template["spec"]["nodeSelector"] = json!({"nvidia.com/gpu.product": "NVIDIA-H200"});
    template["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = json!("8");
    // DeepSeek-V3, 671B fp8 + 4 x 32k tokens of MLA latent cache, held whole by each of the
    // 8 tensor-parallel GPUs (kvHeads 1 < 8): ~763 GiB; 8 H200 give 8 x floor(144,384 x 90%) = 1,039,560 MiB.
    let r = POLICY
        .module()
        .validate(&request, settings, Some(session()))
        .unwrap();
    assert!(r.allowed, "{r:?}");
    let audit = r.audit_annotations.unwrap();
    assert_eq!(audit["vram-model"], "deepseek-ai/DeepSeek-V3");
    assert_eq!(audit["vram-available-mib"], "1039560");
    let template = &mut request["object"]["spec"]["template"];
    template["spec"]["nodeSelector"] = json!({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"});
    let r = POLICY
        .module()
        .validate(&request, settings, Some(session()))
        .unwrap();
    assert!(!r.allowed);
    assert!(
        r.message()
            .unwrap()
            .starts_with("model deepseek-ai/DeepSeek-V3 needs ~763 GiB GPU memory (weights 625 GiB fp8, KV cache 69 GiB bf16 for 4 x 32768 tokens (tensor parallel 8 > 1 KV heads: heads replicated), overhead 10%); the pod asks for 8 x NVIDIA-H100-80GB-HBM3 = 573 GiB usable at 90%. It does not fit on NVIDIA-H100-80GB-HBM3 with up to 8 GPUs per pod. No pool's GPU fits it"),
        "{r:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Exceptions dated at test time
// ---------------------------------------------------------------------------------------

#[test]
fn the_exception_fixture_is_renewed_in_time() {
    POLICY.assert_exception_fixture_renewed();
}

#[test]
fn exceptions_dated_at_test_time_warn_in_their_last_week() {
    let exception = DatedException::new("llama-70b-a10g-trial", "serving-team@example.com");
    let request = POLICY.request("deployment_llama_70b_on_2_a10g.json");
    exception.assert_applies(POLICY, &request, None, 1);
    // Another workload of the namespace the selector does not match is still denied.
    exception.assert_not_applied_to_another_app(POLICY, &request, None, "llama-70b-canary");
}
