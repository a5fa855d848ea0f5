//! gpu-labels-policy, built as wasm, through the harness: every request in
//! `policies/gpu-labels-policy/test_data/` with the verdict, the exact message users see,
//! warnings and audit annotations; exceptions per rule (valid, ending soon with the dates
//! computed at test time, expired, invalid); settings validation; and the README quoting
//! the messages verbatim.

mod common;

use common::PolicyUnderTest;
use common::dates::{DatedException, civil_from_days, days_from_civil, parse_utc};
use serde_json::{Value, json};

const POLICY: PolicyUnderTest = PolicyUnderTest("gpu-labels-policy");

fn settings(file: Option<&str>) -> Value {
    match file {
        Some(f) => POLICY.settings(f),
        None => json!({}),
    }
}

#[test]
fn every_test_data_request_gets_its_verdict_and_message() {
    // An accepted request gets neither a message nor warnings.
    POLICY.check_cases(false, |case, e| {
        let r = &e.response;
        let said = r.status.is_some() || r.warnings.is_some();
        match r.allowed && said {
            true => vec![format!(
                "{}: allowed with a message or warnings: {r:?}",
                case.label()
            )],
            false => Vec::new(),
        }
    });
}

#[test]
fn exempt_namespace_is_accepted_with_an_audit_annotation() {
    let request = POLICY.request("pod_in_exempt_namespace.json");
    let denied = POLICY.validate(&request, &json!({}));
    assert!(
        !denied.allowed,
        "without the exemption the validator pod is unlabelled"
    );
    let r = POLICY.validate(&request, &settings(Some("settings_exempt.yml")));
    assert!(r.allowed);
    assert_eq!(r.status, None);
    assert_eq!(
        r.audit("exempt"),
        Some("namespace gpu-operator is in exemptNamespaces: not checked")
    );
}

#[test]
fn an_update_that_changes_no_template_or_label_is_allowed_with_warnings() {
    let request = POLICY.request("deployment_update_scales_legacy.json");
    let r = POLICY.validate(&request, &json!({}));
    assert!(r.allowed);
    assert_eq!(
        r.warnings.as_deref(),
        Some(
            &[
                "Deployment 'legacy-trainer' breaks the GPU admission rules (2 problems); this update is allowed because it changes no pod template and no label, but the next change to them must fix:".to_string(),
                "1) label 'workload-type' is missing (GPU pods must carry it): add workload-type: <one of interactive, batch, training> to spec.template.metadata.labels".to_string(),
                "2) label 'team' is missing (GPU pods must carry it): add team: <a non-empty value> to spec.template.metadata.labels".to_string(),
            ][..]
        )
    );
    assert!(
        r.audit_annotations.as_ref().unwrap()["unchanged-noncompliant-object"]
            .starts_with("Deployment 'legacy-trainer' breaks the GPU admission rules (2 problems): 1) label 'workload-type' is missing")
    );
    // The same object created anew is denied.
    let mut create = request.clone();
    create["operation"] = json!("CREATE");
    create["oldObject"] = Value::Null;
    assert!(!POLICY.validate(&create, &json!({})).allowed);
}

#[test]
fn custom_kinds_are_only_checked_when_configured() {
    // Without customKinds a RayCluster carries no pod template the policy knows of; its
    // pods are still judged when the Ray operator creates them.
    let request = POLICY.request("raycluster_worker_unlabelled.json");
    assert!(POLICY.validate(&request, &json!({})).allowed);
}

#[test]
fn settings_files_are_valid_and_invalid_ones_name_the_field() {
    let policy = POLICY.module();
    for file in [
        "settings_custom_kinds.yml",
        "settings_max_gpus.yml",
        "settings_exempt.yml",
        "settings_strict_daemonsets.yml",
        "settings_cost_center.yml",
        "settings_workload_rules.yml",
        "settings_device_tooling.yml",
        "settings_exceptions.yml",
        "settings_exceptions_expired.yml",
    ] {
        let v = policy.validate_settings(&settings(Some(file))).unwrap();
        assert!(v.valid, "{file}: {v:?}");
    }
    assert_eq!(
        POLICY.settings_refusal(&settings(Some("settings_invalid_workload_rules.yml"))),
        "workloadRules.readinessProbe.workloadTypes[0]: 'serving' is not a value the workload-type label may take (requiredLabels allows interactive, batch, training), so the rule would never apply"
    );
    assert!(policy.validate_settings(&Value::Null).unwrap().valid);

    assert_eq!(
        POLICY.settings_refusal(&settings(Some("settings_invalid_both.yml"))),
        "requiredLabels[0]: give allowedValues or pattern, not both (a value would have to satisfy both; put the values in allowedValues, or widen the pattern)"
    );

    let message = POLICY.settings_refusal(&settings(Some("settings_invalid_typo.yml")));
    assert!(
        message.starts_with("settings: unknown field `requireGpuLimit`, expected one of"),
        "{message}"
    );

    for (settings, prefix) in [
        (json!({"maxGpusPerPod": 0}), "maxGpusPerPod: "),
        (
            json!({"gpuTaints": [{"key": "nvidia.com/gpu", "effect": "NoSchedul"}]}),
            "gpuTaints[0].effect: ",
        ),
        (
            json!({"requiredLabels": [{"key": "team", "pattern": "team-.+"}]}),
            "requiredLabels[0].pattern: ",
        ),
        (json!({"exemptNamespaces": ["*"]}), "exemptNamespaces[0]: "),
    ] {
        let m = POLICY.settings_refusal(&settings);
        assert!(m.starts_with(prefix), "{settings}: {m}");
    }
}

#[test]
fn env_from_is_allowed_with_a_warning_and_the_warning_stays_on_denials() {
    let warning = |file: &str| {
        let request = POLICY.request(file);
        POLICY.validate(&request, &json!({}))
    };
    let r = warning("pod_gpu_env_from.json");
    assert!(r.allowed && r.status.is_none());
    assert_eq!(
        r.warnings.as_deref(),
        Some(&["container 'vllm' takes variables from ConfigMap 'vllm-settings' (envFrom), which the GPU admission policy cannot read: a device variable such as NVIDIA_VISIBLE_DEVICES set there is not checked; set such variables in env instead".to_string()][..])
    );
    // KAI's NVIDIA_VISIBLE_DEVICES reference on a pod KAI did not mutate: denied, with the
    // envFrom warning kept.
    let r = warning("pod_kai_spoofed_visible_devices.json");
    assert!(!r.allowed);
    assert_eq!(
        r.message(),
        Some(
            "Pod 'gpu-sharing' breaks the GPU admission rules (3 problems): 1) the pod requests no GPU but tolerates the GPU taint nvidia.com/gpu with tolerations[0] (key: nvidia.com/gpu, operator: Exists): GPU nodes are for GPU work, so remove the toleration, or, if it needs a GPU, request one (e.g. nvidia.com/gpu: 1 in resources.limits); 2) container 'gpu-workload' sets NVIDIA_VISIBLE_DEVICES from ConfigMap 'gpu-sharing-bq7kx2z-shared-gpu-0' key 'NVIDIA_VISIBLE_DEVICES' (valueFrom), which the policy cannot read at admission and the container runtime obeys: remove NVIDIA_VISIBLE_DEVICES and request the GPUs as a resource (e.g. nvidia.com/gpu: 1 in resources.limits); the device plugin sets NVIDIA_VISIBLE_DEVICES to the GPUs it allocates; 3) the pod requests no GPU but sets runtimeClassName: nvidia, a GPU runtime (deviceAccess.gpuRuntimeClasses) that can hand it GPUs no request counts: remove runtimeClassName, or, if it needs a GPU, request one (e.g. nvidia.com/gpu: 1 in resources.limits)"
        )
    );
    assert_eq!(r.warnings.as_ref().map(Vec::len), Some(1));
    // The settings file that names the field.
    assert_eq!(
        POLICY.settings_refusal(&settings(Some("settings_invalid_device_access.yml"))),
        "deviceAccess.deviceHostPaths.paths[1]: '/dev/dri/' is not an absolute path without '.', '..', '//' or a trailing '/' (e.g. /dev/nvidia)"
    );
}

#[test]
fn every_request_in_test_data_is_exercised() {
    // Requests, settings and sessions that named tests read.
    POLICY.assert_every_file_has_an_answer(&[
        "settings_invalid_workload_rules.yml",
        "session_dra_not_granted.yml",
        "settings_exceptions_expired.yml",
        "session_dra_four_gpus.yml",
        "settings_exempt.yml",
        "settings_invalid_typo.yml",
        "settings_invalid_exceptions.yml",
        "settings_invalid_both.yml",
        "settings_exceptions.yml",
        "settings_invalid_device_access.yml",
        "pod_in_exempt_namespace.json",
        "deployment_update_scales_legacy.json",
        "pod_gpu_env_from.json",
        "pod_kai_spoofed_visible_devices.json",
        "pod_dra_four_gpus_unlabelled.json",
        "pod_dra_four_gpus_labelled.json",
    ]);
}

/// A DRA pod: its claim template (read from a kwctl replay session) asks for 4
/// `gpu.nvidia.com` devices, so it is a GPU pod with 4 nvidia.com/gpu.
#[test]
fn dra_claims_make_a_gpu_pod_and_an_unreadable_claim_is_denied() {
    let run = |request: &str, settings_file: Option<&str>, session: &str| {
        let request = POLICY.request(request);
        let session = POLICY.session(session);
        let e = POLICY
            .module()
            .evaluate(&request, &settings(settings_file), Some(session))
            .unwrap();
        assert_eq!(e.host_calls.len(), 1, "one get of the claim template");
        e.response
    };
    let r = run(
        "pod_dra_four_gpus_unlabelled.json",
        None,
        "session_dra_four_gpus.yml",
    );
    assert!(!r.allowed);
    assert_eq!(
        r.message(),
        Some(
            "Pod 'batch-eval-dra' breaks the GPU admission rules (1 problem): 1) label 'team' is missing (GPU pods must carry it): add team: <a non-empty value> to metadata.labels"
        )
    );
    let r = run(
        "pod_dra_four_gpus_labelled.json",
        None,
        "session_dra_four_gpus.yml",
    );
    assert!(r.allowed, "{r:?}");
    let capped = run(
        "pod_dra_four_gpus_labelled.json",
        Some("settings_max_gpus.yml"),
        "session_dra_four_gpus.yml",
    );
    assert!(
        capped.allowed,
        "4 DRA GPUs are within maxGpusPerPod 8: {capped:?}"
    );
    let r = run(
        "pod_dra_four_gpus_labelled.json",
        None,
        "session_dra_not_granted.yml",
    );
    assert!(!r.allowed);
    assert_eq!(
        r.message(),
        Some(
            "Pod 'batch-eval-dra' breaks the GPU admission rules (1 problem): 1) resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (not granted to this policy: add {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate} to the ClusterAdmissionPolicy's contextAwareResources); the GPU rules cannot check GPUs they cannot count, so the workload is denied"
        )
    );
}

// ---------------------------------------------------------------------------------------
// Exceptions (settings_exceptions.yml: the label rules of ml-serving, until 2027-09-27)
// ---------------------------------------------------------------------------------------

const EXCEPTION_AUDIT: &str = "exception=serving-labels-migration owner=platform-team@example.com expires=2027-09-28T00:00:00Z";
const MIG_LABELS_EXCUSED: &str = "Pod 'mig-notebook' breaks the GPU admission rules (2 problems): 1) label 'workload-type' is missing (GPU pods must carry it): add workload-type: <one of interactive, batch, training> to metadata.labels; 2) label 'team' is missing (GPU pods must carry it): add team: <a non-empty value> to metadata.labels";
const LLM_LABELS_EXCUSED: &str = "Pod 'llm-chat' breaks the GPU admission rules (2 problems): 1) label 'workload-type' is missing (GPU pods must carry it): add workload-type: <one of interactive, batch, training> to metadata.labels; 2) label 'team' is missing (GPU pods must carry it): add team: <a non-empty value> to metadata.labels";
/// What an exception for the label rules leaves of pod_gpu_missing_labels.json.
const LLM_NOT_EXCUSED: &str = "Pod 'llm-chat' breaks the GPU admission rules (1 problem): 1) container 'vllm' holds GPUs but requests no cpu and no memory: set resources.requests.cpu and resources.requests.memory to what it uses, so it is not packed onto a GPU node without room for it";
const EXPIRED_NOTE: &str = " (exception serving-labels-migration (owner platform-team@example.com) expired at 2026-11-16T00:00:00Z; renew it or fix the workload)";
const INVALID_EXCEPTION: &str = "exceptions[0].rules[0]: 'maxGpusPerPod' is not a rule of this policy; use one of requiredLabels, gpuRequests, gpuNodes, deviceAccess, workloadRules, gpuAccess, gpuSharing";

/// The date helpers of common/dates.rs, which every policy's exception tests use.
#[test]
fn the_date_helpers_agree_with_known_dates() {
    assert_eq!(civil_from_days(0), "1970-01-01");
    assert_eq!(days_from_civil(2026, 12, 1) * 86_400, 1_796_083_200);
    assert_eq!(parse_utc("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(parse_utc("2026-12-01T00:00:00Z"), Some(1_796_083_200));
    assert_eq!(parse_utc("2026-12-01T22:00:00Z"), Some(1_796_162_400));
    assert_eq!(civil_from_days(1_796_083_200 / 86_400), "2026-12-01");
    assert_eq!(civil_from_days(days_from_civil(2028, 2, 29)), "2028-02-29");
    for bad in [
        "2026-12-01 00:00:00Z",
        "2026-12-01T22:00:00",
        "2026-13-01T22:00:00Z",
        "2026-12-01T2a:00:00Z",
    ] {
        assert_eq!(parse_utc(bad), None, "{bad}");
    }
}

fn run_with(request: &str, settings: &Value) -> gpu_e2e::AdmissionResponse {
    let request = POLICY.request(request);
    POLICY.validate(&request, settings)
}

#[test]
fn the_exception_fixture_is_renewed_in_time() {
    POLICY.assert_exception_fixture_renewed();
}

#[test]
fn an_exception_for_the_label_rules_excuses_only_them() {
    let s = settings(Some("settings_exceptions.yml"));
    // Only label problems: accepted, with what was excused and by which exception.
    let r = run_with("pod_mig_slice_unlabelled.json", &s);
    assert!(r.allowed, "{r:?}");
    assert_eq!((r.status.as_ref(), r.warnings.as_ref()), (None, None));
    assert_eq!(r.audit("exception"), Some(EXCEPTION_AUDIT));
    assert_eq!(r.audit("excused"), Some(MIG_LABELS_EXCUSED));
    // Labels and a request problem: denied for the request problem alone.
    let r = run_with("pod_gpu_missing_labels.json", &s);
    assert!(!r.allowed);
    assert_eq!(r.message(), Some(LLM_NOT_EXCUSED));
    assert_eq!(r.audit("exception"), Some(EXCEPTION_AUDIT));
    assert_eq!(r.audit("excused"), Some(LLM_LABELS_EXCUSED));
    // Another namespace: not covered, as without the exception.
    let r = run_with("pod_amd_gpu_unlabelled.json", &s);
    let plain = run_with("pod_amd_gpu_unlabelled.json", &json!({}));
    assert!(!r.allowed);
    assert_eq!(r, plain);
}

#[test]
fn an_expired_exception_is_named_in_the_denial() {
    let s = settings(Some("settings_exceptions_expired.yml"));
    let r = run_with("pod_mig_slice_unlabelled.json", &s);
    assert!(!r.allowed);
    assert_eq!(
        r.message(),
        Some(format!("{MIG_LABELS_EXCUSED}{EXPIRED_NOTE}").as_str())
    );
    assert_eq!(r.audit_annotations, None);
    let r = run_with("pod_gpu_missing_labels.json", &s);
    let plain = run_with("pod_gpu_missing_labels.json", &json!({}));
    assert_eq!(
        r.message().map(String::from),
        plain.message().map(|m| format!("{m}{EXPIRED_NOTE}"))
    );
}

#[test]
fn exceptions_dated_at_test_time_warn_in_their_last_week() {
    // Dates from the test machine's clock, so these cases never go stale.
    let exception = DatedException::new("serving-labels-migration", "platform-team@example.com");
    let request = POLICY.request("pod_mig_slice_unlabelled.json");
    let (_, warning) = exception.assert_applies(POLICY, &request, None, 3);
    assert!(
        warning.ends_with(" days); renew it or fix the workload before then"),
        "{warning}"
    );
    // An exception more than maxExceptionDays ahead is refused by settings validation.
    let far = exception.date(400);
    let v = POLICY
        .module()
        .validate_settings(&exception.until(POLICY, 400))
        .unwrap();
    assert!(!v.valid);
    assert!(
        v.message
            .as_deref()
            .unwrap_or_default()
            .starts_with(&format!(
                "exceptions[0].expires: {far} is more than 366 days (maxExceptionDays) from now ("
            )),
        "{:?}",
        v.message
    );
}

#[test]
fn an_exception_of_no_rule_is_invalid_settings() {
    let v = POLICY
        .module()
        .validate_settings(&settings(Some("settings_invalid_exceptions.yml")))
        .unwrap();
    assert!(!v.valid);
    assert_eq!(v.message.as_deref(), Some(INVALID_EXCEPTION));
}

#[test]
fn the_readme_quotes_the_exception_texts() {
    let readme = std::fs::read_to_string(POLICY.dir().join("README.md")).unwrap();
    for text in [
        EXCEPTION_AUDIT,
        MIG_LABELS_EXCUSED,
        LLM_NOT_EXCUSED,
        EXPIRED_NOTE.trim_start(),
        INVALID_EXCEPTION,
    ] {
        assert!(readme.contains(text), "README.md does not quote: {text}");
    }
}
