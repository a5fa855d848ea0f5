//! gpu-pool-routing-policy, built as wasm, through the harness: every request in
//! `policies/gpu-pool-routing-policy/test_data/` with its verdict, the exact JSONPatch
//! (decoded ops) or the exact message, and warnings; a second pass over every patched
//! object that must produce no patch; settings validation; the README quoting the
//! messages verbatim; metadata.yml consistent with the crate. DRA pods read their
//! ResourceClaimTemplate from a kwctl replay session (found, not found, forbidden, not
//! granted, too many requests, a class that is not a GPU); KAI fractional pods. Lending by
//! schedule, at the host's time: a batch Deployment lent to the interactive pool under the
//! harness and under the real kwctl (when on PATH), its audit annotation carrying the time
//! the module read from the host's clock; exceptions (valid, ending soon with dates computed
//! at test time, expired). Team labels (teamLabelKey): stamped from the Namespace read
//! from a replay session on a Pod, a Deployment, a CronJob and an InferenceService, a
//! forged one denied, a stamped Deployment updated (no patch; restamped when the namespace
//! moved to another team), the Namespace not granted or not found (denied naming the grant).

mod common;

use std::path::Path;

use common::dates::{DatedException, parse_utc, today, unix_now};
use common::manifests::{assert_metadata_version_matches_the_crate, yaml_documents};
use common::{PolicyUnderTest, assert_rejected_starting};
use gpu_e2e::kwctl::Kwctl;
use gpu_e2e::{AdmissionResponse, Evaluation, module_path, read_settings};
use serde_json::{Value, json};

const POLICY: PolicyUnderTest = PolicyUnderTest("gpu-pool-routing-policy");

fn run(request: &Value, settings_file: &str) -> AdmissionResponse {
    POLICY.validate(request, &POLICY.settings(settings_file))
}

/// Evaluates with host calls served from `session` (a file of test_data/).
fn run_session(request: &Value, settings_file: &str, session: &str) -> Evaluation {
    let session = POLICY.session(session);
    POLICY
        .module()
        .evaluate(request, &POLICY.settings(settings_file), Some(session))
        .unwrap()
}

/// Evaluates `req` under `settings_file` with host calls served from `session`: denied
/// with exactly `message`, and no patch. The evaluation, for the test's own checks.
fn assert_denied_in_session(
    req: &Value,
    settings_file: &str,
    session: &str,
    message: &str,
) -> Evaluation {
    let e = run_session(req, settings_file, session);
    assert!(!e.response.allowed, "{session}");
    assert_eq!(e.response.message(), Some(message), "{session}");
    assert_eq!(e.response.patch, None, "{session}");
    e
}

/// Ops sorted by path: the order of a JSONPatch diff follows the host's map ordering.
fn sorted(mut ops: Vec<Value>) -> Vec<Value> {
    ops.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    ops
}

/// Applies the response's patch to the request's object and runs the policy again on the
/// result, with host calls served from `session` (a file of test_data/) when given: a
/// routed object must be accepted with no patch. The second answer, for the caller's own
/// checks.
fn second_pass(
    req: &Value,
    response: &AdmissionResponse,
    settings_file: &str,
    session: Option<&str>,
) -> AdmissionResponse {
    let patch: json_patch::Patch =
        serde_json::from_value(Value::Array(response.patch_ops().unwrap())).unwrap();
    let mut again = req.clone();
    json_patch::patch(&mut again["object"], &patch).unwrap();
    let second = match session {
        Some(session) => run_session(&again, settings_file, session).response,
        None => run(&again, settings_file),
    };
    assert!(second.allowed, "second pass denied: {:?}", second.message());
    assert_eq!(second.patch, None, "second pass patched");
    second
}

/// [`second_pass`] without host calls.
fn second_pass_is_quiet(req: &Value, response: &AdmissionResponse, settings_file: &str) {
    second_pass(req, response, settings_file, None);
}

/// Runs test_data/`file` with `settings_file`: accepted with exactly the ops `expected`
/// (sorted by path), and routed for good (a second pass is quiet). The response, for the
/// test's own checks.
fn assert_routed(file: &str, settings_file: &str, expected: Vec<Value>) -> AdmissionResponse {
    let req = POLICY.request(file);
    let response = run(&req, settings_file);
    assert!(response.allowed, "{file}: {:?}", response.message());
    assert_eq!(sorted(response.patch_ops().unwrap()), expected, "{file}");
    second_pass_is_quiet(&req, &response, settings_file);
    response
}

const SETTINGS: &str = "settings.yml";

const TOLERATION_BATCH: &str =
    r#"{"effect": "NoSchedule", "key": "dedicated", "operator": "Equal", "value": "batch"}"#;
const TOLERATION_INTERACTIVE: &str =
    r#"{"effect": "NoSchedule", "key": "dedicated", "operator": "Equal", "value": "interactive"}"#;

fn toleration(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

fn interactive_affinity() -> Value {
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-L4", "NVIDIA-A10G"]}]}]}}})
}

/// The ops that route a pod template to pool interactive with priority class `priority`:
/// its labels at `metadata`, its pod spec at `spec`.
fn interactive_ops(metadata: &str, spec: &str, priority: &str) -> Vec<Value> {
    vec![
        json!({"op": "add", "path": format!("{metadata}/labels/gpu-admission~1pool"), "value": "interactive"}),
        json!({"op": "add", "path": format!("{spec}/affinity"), "value": interactive_affinity()}),
        json!({"op": "add", "path": format!("{spec}/nodeSelector"), "value": {"gpu-admission/node-pool": "interactive"}}),
        json!({"op": "add", "path": format!("{spec}/priorityClassName"), "value": priority}),
        json!({"op": "add", "path": format!("{spec}/tolerations"), "value": [toleration(TOLERATION_INTERACTIVE)]}),
    ]
}

/// The ops that route a `spec.template`-style template at `template` to pool batch.
fn batch_ops(template: &str) -> Vec<Value> {
    vec![
        json!({"op": "add", "path": format!("{template}/metadata/labels/gpu-admission~1pool"), "value": "batch"}),
        json!({"op": "add", "path": format!("{template}/spec/nodeSelector"), "value": {"gpu-admission/node-pool": "batch"}}),
        json!({"op": "add", "path": format!("{template}/spec/priorityClassName"), "value": "batch-low"}),
        json!({"op": "add", "path": format!("{template}/spec/tolerations"), "value": [toleration(TOLERATION_BATCH)]}),
    ]
}

/// The ops that route a bare Pod to pool batch: those of a template at the Pod's root,
/// without the priority class (a Pod's priority is resolved before webhooks run).
fn bare_pod_batch_ops() -> Vec<Value> {
    let mut ops = batch_ops("");
    ops.remove(2);
    ops
}

#[test]
fn pod_is_routed_without_priority_class_and_warned() {
    let response = assert_routed("pod_batch.json", SETTINGS, bare_pod_batch_ops());
    assert_eq!(response.patch_type.as_deref(), Some("JSONPatch"));
    assert_eq!(
        response.warnings,
        Some(vec![
            "spec.priorityClassName: pool batch runs its workloads with priority class batch-low, but a Pod's priority is resolved before this policy runs, so it is not set on a bare Pod; set spec.priorityClassName: batch-low (Pods of routed Deployments, Jobs and other controllers already carry it)".to_string()
        ])
    );
}

#[test]
fn deployment_is_routed_with_affinity_and_priority_class() {
    let response = assert_routed(
        "deployment_interactive.json",
        SETTINGS,
        interactive_ops(
            "/spec/template/metadata",
            "/spec/template/spec",
            "interactive-high",
        ),
    );
    assert_eq!(response.warnings, None);
}

#[test]
fn update_is_evaluated_like_create() {
    let mut req = POLICY.request("deployment_interactive.json");
    req["operation"] = json!("UPDATE");
    req["oldObject"] = req["object"].clone();
    req["oldObject"]["spec"]["replicas"] = json!(1);
    let response = run(&req, SETTINGS);
    assert!(response.allowed);
    assert_eq!(response.patch_ops().unwrap().len(), 5);
    second_pass_is_quiet(&req, &response, SETTINGS);
}

#[test]
fn job_keeps_its_own_toleration_and_gets_the_pools() {
    let mut expected = batch_ops("/spec/template");
    // The Job already tolerates nvidia.com/gpu: the pool's toleration is appended.
    expected[3] = json!({"op": "add", "path": "/spec/template/spec/tolerations/1", "value": toleration(TOLERATION_BATCH)});
    assert_routed("job_batch.json", SETTINGS, expected);
}

#[test]
fn cronjob_keeps_its_product_selector_and_joins_the_pool() {
    let mut expected = batch_ops("/spec/jobTemplate/spec/template");
    // The CronJob already selects a GPU product: the pool's key is added beside it.
    expected[1] = json!({"op": "add", "path": "/spec/jobTemplate/spec/template/spec/nodeSelector/gpu-admission~1node-pool", "value": "batch"});
    assert_routed("cronjob_batch.json", SETTINGS, expected);
}

#[test]
fn inference_service_is_routed_through_its_custom_kind_paths() {
    assert_routed(
        "inferenceservice_interactive.json",
        SETTINGS,
        interactive_ops("/metadata", "/spec/predictor", "interactive-high"),
    );
}

#[test]
fn ray_cluster_routes_the_gpu_workers_and_leaves_the_head() {
    assert_routed(
        "raycluster_batch.json",
        SETTINGS,
        batch_ops("/spec/workerGroupSpecs/0/template"),
    );
    // Without customKinds the RayCluster is not read at all (its Pods are routed).
    let mut plain = POLICY.settings(SETTINGS);
    plain.as_object_mut().unwrap().remove("customKinds");
    let req = POLICY.request("raycluster_batch.json");
    let response = POLICY.validate(&req, &plain);
    assert!(response.allowed);
    assert_eq!(response.patch, None);
}

#[test]
fn gpu_in_an_init_container_is_routed() {
    assert_routed(
        "deployment_gpu_in_init_container.json",
        SETTINGS,
        batch_ops("/spec/template"),
    );
}

#[test]
fn default_pool_takes_what_matches_no_pool() {
    let response = assert_routed(
        "deployment_no_pool.json",
        "settings_default_pool.yml",
        batch_ops("/spec/template"),
    );
    assert_eq!(
        response.warnings,
        Some(vec![
            "spec.template.spec: the pod template's labels match no pool, so it runs in the default pool batch".to_string()
        ])
    );
}

/// Accepted without a patch, with these warnings.
const UNCHANGED: &[(&str, &[&str])] = &[
    ("deployment_no_gpu.json", &[]),
    ("deployment_routed_update.json", &[]),
    ("pod_exempt_namespace.json", &[]),
    (
        "pod_update_finalizer_removed.json",
        &[
            "Pod/embed-corpus-4xk9t is not routed as its pool requires (spec: pool batch: label gpu-admission/pool=batch, nodeSelector gpu-admission/node-pool=batch, toleration dedicated=batch:NoSchedule); it was admitted before, and its pod template cannot change after creation, so this update is let through unchanged",
        ],
    ),
    (
        "replicaset_owned_unrouted.json",
        &[
            "ReplicaSet/chat-llm-7d9c5b6f4 is controlled by Deployment/chat-llm, whose pod template is not routed (spec.template.spec: pool interactive: label gpu-admission/pool=interactive, nodeSelector gpu-admission/node-pool=interactive, toleration dedicated=interactive:NoSchedule, priorityClassName interactive-high, required node affinity nvidia.com/gpu.product In (NVIDIA-L4, NVIDIA-A10G)); the policy does not change objects another controller manages, and routes their Pods when they are created. Route Deployment/chat-llm itself: update it (e.g. kubectl rollout restart), or list its kind in customKinds",
        ],
    ),
];

#[test]
fn accepted_without_patch() {
    for (file, warnings) in UNCHANGED {
        let response = run(&POLICY.request(file), SETTINGS);
        assert!(response.allowed, "{file}: {:?}", response.message());
        assert_eq!(response.patch, None, "{file}");
        assert_eq!(response.status, None, "{file}");
        let expected = (!warnings.is_empty())
            .then(|| warnings.iter().map(|w| w.to_string()).collect::<Vec<_>>());
        assert_eq!(response.warnings, expected, "{file}");
    }
}

/// Denied with exactly this message (each is quoted in the README).
const DENIED: &[(&str, &str)] = &[
    (
        "deployment_no_pool.json",
        "spec.template.metadata.labels: the GPU pod template at spec.template.spec (labels app=research, team=research) in namespace team-a matches no GPU pool; pool interactive takes workload-type=interactive; pool batch takes workload-type=batch; pool training takes workload-type=training in namespaces ml-*. Label the pod template so that it matches one of them, or ask the cluster admins to set defaultPool",
    ),
    (
        "deployment_nodeselector_other_pool.json",
        "spec.template.spec.nodeSelector.gpu-admission/node-pool: 'interactive' points at the nodes of pool interactive, but the workload belongs to pool batch, whose nodes have gpu-admission/node-pool=batch. Remove this nodeSelector entry (the policy sets the pool's own)",
    ),
    (
        "deployment_affinity_other_pool.json",
        "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]: gpu-admission/node-pool In (training) points at the nodes of pool training, but the workload belongs to pool batch, whose nodes have gpu-admission/node-pool batch. Remove the requirement on gpu-admission/node-pool (the policy adds the pool's own)",
    ),
    (
        "deployment_pool_label_spoofed.json",
        "spec.template.metadata.labels.gpu-admission/pool: names pool interactive, but the workload's labels place it in pool batch. The pool is chosen from the workload's labels, not set by hand: remove the label (the policy sets it to batch)",
    ),
    (
        "deployment_toleration_other_pool.json",
        "spec.template.spec.tolerations[0]: operator Exists without a key (tolerates every taint) tolerates the taint of pool interactive (dedicated=interactive:NoSchedule), which the nodes of pool batch do not have. Remove it (the policy adds what pool batch needs: dedicated=batch:NoSchedule)",
    ),
    (
        "deployment_priority_not_allowed.json",
        "spec.template.spec.priorityClassName: 'system-cluster-critical' is not allowed: pool batch allows batch-low, batch-high; use one of them or remove it (the policy sets batch-low)",
    ),
];

#[test]
fn contradictions_and_unmatched_workloads_are_denied() {
    for (file, message) in DENIED {
        let req = POLICY.request(file);
        let response = run(&req, SETTINGS);
        assert!(!response.allowed, "{file}");
        assert_eq!(response.message(), Some(*message), "{file}");
        assert_eq!(response.patch, None, "{file}");
        assert_eq!(response.uid, req["uid"].as_str().unwrap(), "{file}");
    }
}

#[test]
fn malformed_object_is_rejected_not_a_500() {
    let mut req = POLICY.request("deployment_interactive.json");
    req["object"]["spec"]["template"]["spec"]["containers"] = json!("vllm");
    assert_rejected_starting(
        &run(&req, SETTINGS),
        400,
        "Deployment team-a/chat-llm cannot be read, so it is denied: spec.template.spec: invalid type",
    );
}

const INVALID_SETTINGS: &[(&str, &str)] = &[
    (
        "settings_invalid_overlap.yml",
        "pools[1].selector: pool everything overlaps pool batch (pools[0]): a pod template labelled workload-type=batch in any namespace matches both, so its pool would be ambiguous. Make them disjoint: give both selectors the same label key with different values (e.g. matchLabels workload-type: batch vs workload-type: interactive), add a NotIn or DoesNotExist on a key the other pool requires, or restrict them to namespaces that do not overlap",
    ),
    (
        "settings_invalid_toleration.yml",
        "pools[0].tolerations[0].value: operator Exists takes no value (got 'batch'); remove the value, or use operator Equal",
    ),
    (
        "settings_invalid_lending.yml",
        "pools[0].lendTo[0].window: 'nights' names no schedule; define it under schedules (defined: off-peak)",
    ),
];

#[test]
fn settings_validation() {
    POLICY.assert_valid_settings(&[
        SETTINGS,
        "settings_default_pool.yml",
        LENDING,
        EXCEPTIONS,
        "settings_exceptions_expired.yml",
        TEAM,
    ]);
    for (file, message) in INVALID_SETTINGS {
        let refusal = POLICY.settings_refusal(&POLICY.settings(file));
        assert_eq!(refusal, *message, "{file}");
    }
    let empty = POLICY.settings_refusal(&Value::Null);
    assert!(empty.starts_with("pools: configure at least one pool"));
    let typo = POLICY.settings_refusal(&json!({"pools": [], "defaultPol": "batch"}));
    assert!(typo.contains("unknown field `defaultPol`"));
}

// ---------------------------------------------------------------------------------------
// Dynamic Resource Allocation and fractional GPUs
// ---------------------------------------------------------------------------------------

/// The one host call a DRA template makes: its ResourceClaimTemplate, masked to the device
/// requests, in the request's namespace.
fn claim_template_call(name: &str, namespace: &str) -> Value {
    json!({"api_version": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "name": name,
           "namespace": namespace, "disable_cache": false, "field_masks": ["spec.spec.devices"]})
}

#[test]
fn dra_pod_and_deployment_are_routed_like_four_nvidia_gpus() {
    // pod_batch.json asks for nvidia.com/gpu; this Pod's 4 GPUs come from a claim template.
    let req = POLICY.request("pod_dra_four_gpus.json");
    let e = run_session(&req, SETTINGS, "session_dra_four_gpus.yml");
    assert!(e.unconsumed_exchanges.is_empty());
    assert_eq!(
        e.calls(),
        vec![("get_resource", claim_template_call("four-gpus", "team-a"))]
    );
    let plain = run(&POLICY.request("pod_batch.json"), SETTINGS);
    assert!(e.response.allowed);
    assert_eq!(
        sorted(e.response.patch_ops().unwrap()),
        sorted(plain.patch_ops().unwrap())
    );
    assert_eq!(e.response.warnings, plain.warnings);
    // A second pass over the patched object, with the claim read again: nothing to change.
    second_pass(
        &req,
        &e.response,
        SETTINGS,
        Some("session_dra_four_gpus.yml"),
    );

    let req = POLICY.request("deployment_dra_four_gpus.json");
    let e = run_session(&req, SETTINGS, "session_dra_four_gpus.yml");
    assert!(e.response.allowed);
    assert_eq!(
        sorted(e.response.patch_ops().unwrap()),
        sorted(
            run(&POLICY.request("deployment_interactive.json"), SETTINGS)
                .patch_ops()
                .unwrap()
        )
    );
    assert_eq!(e.response.warnings, None);
    // A second pass over the patched object, with the claim read again: nothing to change.
    second_pass(
        &req,
        &e.response,
        SETTINGS,
        Some("session_dra_four_gpus.yml"),
    );
}

const DRA_NOT_FOUND: &str = "spec: the GPUs of this pod template cannot be counted, so it cannot be routed to its pool: resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (not found); create it before the workload";
const DRA_FORBIDDEN: &str = "spec.template.spec: the GPUs of this pod template cannot be counted, so it cannot be routed to its pool: resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (forbidden by RBAC: grant the policy-server's ServiceAccount get on resourceclaimtemplates (apiGroup resource.k8s.io))";
const DRA_NOT_GRANTED: &str = "spec.template.spec: the GPUs of this pod template cannot be counted, so it cannot be routed to its pool: resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (not granted to this policy: add {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate} to the ClusterAdmissionPolicy's contextAwareResources)";
const DRA_FORTY_REQUESTS: &str = "spec: the GPUs of this pod template cannot be counted, so it cannot be routed to its pool: resource claim 'gpus' (ResourceClaimTemplate four-gpus) has 40 device requests; Kubernetes allows at most 32";

/// (request, session, message): denied, never routed as if the pod had no GPU.
const DRA_DENIED: &[(&str, &str, &str)] = &[
    (
        "pod_dra_four_gpus.json",
        "session_dra_not_found.yml",
        DRA_NOT_FOUND,
    ),
    (
        "deployment_dra_four_gpus.json",
        "session_dra_forbidden.yml",
        DRA_FORBIDDEN,
    ),
    (
        "deployment_dra_four_gpus.json",
        "session_dra_not_granted.yml",
        DRA_NOT_GRANTED,
    ),
    (
        "pod_dra_four_gpus.json",
        "session_dra_forty_requests.yml",
        DRA_FORTY_REQUESTS,
    ),
];

#[test]
fn dra_claims_that_cannot_be_counted_are_denied_with_the_fix() {
    for (file, session, message) in DRA_DENIED {
        let e = assert_denied_in_session(&POLICY.request(file), SETTINGS, session, message);
        assert_eq!(e.host_calls.len(), 1, "{file} {session}");
        assert!(e.unconsumed_exchanges.is_empty());
    }
}

#[test]
fn deployed_without_the_dra_grant_a_dra_pod_is_denied_not_routed() {
    // The ClusterAdmissionPolicy of a version without DRA: contextAwareResources: [].
    let denial = POLICY.ungranted_denial(
        "deployment_dra_four_gpus.json",
        SETTINGS,
        "session_dra_four_gpus.yml",
    );
    assert_eq!(
        denial,
        "spec.template.spec: the GPUs of this pod template cannot be counted, so it cannot be routed to its pool: resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (not granted to this policy: add {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate} to the ClusterAdmissionPolicy's contextAwareResources)"
    );
}

#[test]
fn a_claim_of_a_device_class_that_is_not_a_gpu_leaves_the_pod_alone() {
    // rdma.example.com is not a GPU class (a documented pass): the Pod is not a GPU pod.
    let e = run_session(
        &POLICY.request("pod_dra_rdma_nic.json"),
        SETTINGS,
        "session_dra_rdma_nic.yml",
    );
    assert!(e.response.allowed);
    assert_eq!(e.response.patch, None);
    assert_eq!(e.response.warnings, None);
    assert_eq!(e.host_calls.len(), 1);
}

#[test]
fn kai_fraction_pod_is_routed_as_a_gpu_pod() {
    // KAI Scheduler's published gpu-fraction example: no GPU resource, half a GPU.
    let mut expected = bare_pod_batch_ops();
    // It tolerates nvidia.com/gpu already: the pool's toleration is appended.
    expected[2] =
        json!({"op": "add", "path": "/spec/tolerations/1", "value": toleration(TOLERATION_BATCH)});
    let response = assert_routed("pod_kai_gpu_fraction.json", SETTINGS, expected);
    assert_eq!(
        response.warnings,
        run(&POLICY.request("pod_batch.json"), SETTINGS).warnings
    );
    // The same pod under another scheduler is not fractional: not a GPU pod.
    let mut other = POLICY.request("pod_kai_gpu_fraction.json");
    other["object"]["spec"]["schedulerName"] = json!("default-scheduler");
    let response = run(&other, SETTINGS);
    assert!(response.allowed);
    assert_eq!(response.patch, None);
}

#[test]
fn every_request_in_test_data_is_exercised() {
    let mut covered: Vec<&str> = DENIED.iter().map(|(f, _)| *f).collect();
    covered.extend(UNCHANGED.iter().map(|(f, _)| *f));
    covered.extend(DRA_DENIED.iter().map(|(f, _, _)| *f));
    covered.extend([
        "pod_dra_four_gpus.json",
        "deployment_dra_four_gpus.json",
        "pod_dra_rdma_nic.json",
        "pod_kai_gpu_fraction.json",
        "pod_batch.json",
        "deployment_interactive.json",
        "job_batch.json",
        "cronjob_batch.json",
        "inferenceservice_interactive.json",
        "raycluster_batch.json",
        "deployment_gpu_in_init_container.json",
        "deployment_batch.json",
        "deployment_batch_lent_update.json",
        "deployment_batch_moved_to_lending_pool.json",
        "deployment_batch_lent_new_image.json",
        "deployment_team_forged.json",
        "deployment_team_stamped_update.json",
    ]);
    for name in POLICY.test_data_files() {
        if name.ends_with(".json") {
            assert!(covered.contains(&name.as_str()), "{name} is not tested");
        }
    }
}

#[test]
fn the_readme_quotes_the_messages_verbatim() {
    POLICY.assert_readme_quotes(
        DENIED
            .iter()
            .chain(INVALID_SETTINGS)
            .map(|(_, m)| *m)
            .chain(UNCHANGED.iter().flat_map(|(_, w)| w.iter().copied()))
            .chain(DRA_DENIED.iter().map(|(_, _, m)| *m))
            .chain([
                LENT_STAYS,
                EXCEPTION_AUDIT,
                EXPIRED_NOTE.trim_start(),
                LENT_PREFIX,
                LENT_POD_PRIORITY,
                TEAM_FORGED,
                TEAM_FORGED_NO_TEAM,
                TEAM_RESTAMPED,
                TEAM_NOT_GRANTED,
                TEAM_NOT_FOUND,
            ]),
    );
}

#[test]
fn metadata_is_mutating_and_versioned_like_the_crate() {
    let metadata = read_settings(POLICY.dir().join("metadata.yml")).unwrap();
    assert_eq!(metadata["mutating"], true);
    // DRA: the claims and claim templates a pod template names; the Namespace, for its team
    // label (get_resource only).
    assert_eq!(
        metadata["contextAwareResources"],
        json!([{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate"},
               {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim"},
               {"apiVersion": "v1", "kind": "Namespace"}])
    );
    assert_eq!(
        metadata["hostCapabilities"],
        json!(["kubernetes/get_resource"])
    );
    assert_metadata_version_matches_the_crate(&POLICY.dir());
    let resources: Vec<&str> = metadata["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["resources"].as_array().unwrap())
        .filter_map(Value::as_str)
        .collect();
    for kind in [
        "pods",
        "deployments",
        "statefulsets",
        "daemonsets",
        "replicasets",
        "replicationcontrollers",
        "jobs",
        "cronjobs",
    ] {
        assert!(resources.contains(&kind), "metadata.yml misses {kind}");
    }
}

#[test]
fn example_cluster_admission_policy_is_mutating_with_valid_settings() {
    let docs = yaml_documents(POLICY.dir().join("examples/cluster-admission-policy.yaml"));
    let cap = docs
        .iter()
        .find(|d| d["kind"] == "ClusterAdmissionPolicy")
        .expect("a ClusterAdmissionPolicy");
    assert_eq!(cap["spec"]["mutating"], true);
    assert_eq!(
        cap["spec"]["module"],
        "registry://ghcr.io/gpu-admission/policies/gpu-pool-routing-policy:v0.1.0"
    );
    let metadata = read_settings(POLICY.dir().join("metadata.yml")).unwrap();
    assert_eq!(
        cap["spec"]["contextAwareResources"],
        metadata["contextAwareResources"]
    );
    let settings = &cap["spec"]["settings"];
    let v = POLICY.module().validate_settings(settings).unwrap();
    assert!(v.valid, "{:?}", v.message);
    // Every priority class the pools name is created by the example.
    let classes: Vec<&str> = docs
        .iter()
        .filter(|d| d["kind"] == "PriorityClass")
        .filter_map(|d| d["metadata"]["name"].as_str())
        .collect();
    for pool in settings["pools"].as_array().unwrap() {
        let named = pool["priorityClassName"].as_str().into_iter().chain(
            pool["allowedPriorityClasses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str),
        );
        for pc in named {
            assert!(
                classes.contains(&pc),
                "PriorityClass {pc} is not in the example"
            );
        }
    }
    // Routes a RayCluster through the example's customKinds, with the team label from its
    // namespace (the example sets teamLabelKey: team).
    assert_eq!(settings["teamLabelKey"], "team");
    let e = POLICY
        .module()
        .evaluate(
            &POLICY.request("raycluster_batch.json"),
            settings,
            Some(POLICY.session("session_team_ml_a.yml")),
        )
        .unwrap();
    let mut expected = batch_ops("/spec/workerGroupSpecs/0/template");
    expected.push(team_op(
        "/spec/workerGroupSpecs/0/template/metadata",
        "ml-a",
    ));
    assert_eq!(sorted(e.response.patch_ops().unwrap()), sorted(expected));
}

// ---------------------------------------------------------------------------------------
// Lending by schedule, at the host's time
// ---------------------------------------------------------------------------------------

/// settings.yml, with pool interactive lending to batch during `always` (every day,
/// 00:00-24:00 Europe/Berlin: open whenever the tests run).
const LENDING: &str = "settings_lending.yml";
/// The audit annotation `lent` of a template routed during the window, before the time.
const LENT_PREFIX: &str =
    "spec.template.spec: pool interactive lends its nodes to pool batch during always, open at ";
const LENT_STAYS: &str = "spec.template.spec: stays on pool interactive, which lends to pool batch (lent before, unchanged by this request)";

/// The time in a `lent` annotation of a template lent during the window: a real RFC 3339
/// time, within a day of this machine's clock (the module read it from the host).
fn assert_lent_at_the_hosts_time(response: &AdmissionResponse, runner: &str) {
    assert_lent_at_the_hosts_time_at(response, runner, "spec.template.spec: ");
}

/// [`assert_lent_at_the_hosts_time`] for the template at `location` (`spec: ` for a Pod).
fn assert_lent_at_the_hosts_time_at(response: &AdmissionResponse, runner: &str, location: &str) {
    let prefix = LENT_PREFIX.replacen("spec.template.spec: ", location, 1);
    let lent = response
        .audit("lent")
        .unwrap_or_else(|| panic!("{runner}: no lent annotation: {response:?}"));
    let at = lent
        .strip_prefix(prefix.as_str())
        .unwrap_or_else(|| panic!("{runner}: {lent}"));
    let judged =
        parse_utc(at).unwrap_or_else(|| panic!("{runner}: '{at}' is not an RFC 3339 UTC time"));
    let now = unix_now();
    assert!(
        (judged - now).abs() < 86_400,
        "{runner}: judged at {at}, but this machine's clock says {now} s after 1970"
    );
}

/// The ops that lend `/spec/template` of a batch Deployment to pool interactive.
fn lent_ops() -> Vec<Value> {
    interactive_ops(
        "/spec/template/metadata",
        "/spec/template/spec",
        "interactive-guest",
    )
}

#[test]
fn a_batch_deployment_goes_to_its_own_pool_without_lending() {
    let response = assert_routed(
        "deployment_batch.json",
        SETTINGS,
        batch_ops("/spec/template"),
    );
    assert_eq!(response.audit_annotations, None);
}

#[test]
fn inside_the_window_a_batch_deployment_is_lent_at_the_hosts_time() {
    let response = assert_routed("deployment_batch.json", LENDING, lent_ops());
    assert_eq!(response.warnings, None);
    assert_lent_at_the_hosts_time(&response, "harness");
}

/// A lent bare Pod is told the guest priority class (a Pod's priority is resolved before
/// webhooks run), not the lending pool's own.
const LENT_POD_PRIORITY: &str = "spec.priorityClassName: pool interactive runs guests from pool batch with priority class interactive-guest, but a Pod's priority is resolved before this policy runs, so it is not set on a bare Pod; set spec.priorityClassName: interactive-guest (Pods of routed Deployments, Jobs and other controllers already carry it)";

#[test]
fn a_lent_bare_pod_is_told_the_guest_priority_class() {
    let req = POLICY.request("pod_batch.json");
    let response = run(&req, LENDING);
    assert!(response.allowed);
    assert_eq!(response.warnings, Some(vec![LENT_POD_PRIORITY.to_string()]));
    assert_lent_at_the_hosts_time_at(&response, "harness", "spec: ");
    let mut told = req.clone();
    told["object"]["spec"]["priorityClassName"] = json!("interactive-guest");
    assert!(run(&told, LENDING).allowed);
}

#[test]
fn a_pool_label_naming_the_own_pool_opts_out_of_lending() {
    let mut req = POLICY.request("deployment_batch.json");
    req["object"]["spec"]["template"]["metadata"]["labels"]["gpu-admission/pool"] = json!("batch");
    let response = run(&req, LENDING);
    assert!(response.allowed);
    let mut expected = batch_ops("/spec/template");
    expected.remove(0); // the pool label is there already
    assert_eq!(sorted(response.patch_ops().unwrap()), expected);
    assert_eq!(response.audit_annotations, None);
}

#[test]
fn a_lent_deployment_stays_on_the_lending_pool_when_updated() {
    let req = POLICY.request("deployment_batch_lent_update.json");
    let response = run(&req, LENDING);
    assert!(response.allowed, "{:?}", response.message());
    assert_eq!(response.patch, None);
    assert_eq!(response.warnings, None);
    assert_eq!(response.audit("lent"), Some(LENT_STAYS));
    // Without lending in the settings, the pool label naming interactive is a contradiction.
    let plain = run(&req, SETTINGS);
    assert!(!plain.allowed);
    assert!(
        plain
            .message()
            .unwrap()
            .starts_with("spec.template.metadata.labels.gpu-admission/pool: names pool interactive, but the workload's labels place it in pool batch")
    );
}

/// settings_lending.yml with the window `always` moved to the whole weekday three days
/// from now: closed whenever the test runs.
fn closed_lending_settings() -> Value {
    let mut settings = POLICY.settings(LENDING);
    let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    // 1970-01-01 was a Thursday.
    let day = days[usize::try_from((today() + 3 + 4).rem_euclid(7)).unwrap()];
    settings["schedules"]["always"]["windows"] =
        json!([{"days": [day], "from": "00:00", "to": "24:00"}]);
    settings
}

fn run_closed(request: &Value) -> AdmissionResponse {
    POLICY.validate(request, &closed_lending_settings())
}

/// Outside its window, an UPDATE that moves a batch Deployment onto the lending pool is
/// denied, naming the window and the reason; inside it, the same update is lent.
#[test]
fn moving_onto_a_lending_pool_outside_its_window_is_denied_with_the_reason() {
    let req = POLICY.request("deployment_batch_moved_to_lending_pool.json");
    let closed = run_closed(&req);
    assert!(!closed.allowed, "{closed:?}");
    let message = closed.message().unwrap();
    assert!(
        message.starts_with("spec.template.metadata.labels.gpu-admission/pool: names pool interactive, which lends its nodes to pool batch only during always, closed at "),
        "{message}"
    );
    assert!(
        message.contains("; the object was not on pool interactive before this update: a workload joins a lending pool only while the window is open. Remove the label and the lending pool's nodeSelector, tolerations and priority class (the policy routes it to pool batch), or make the change while always is open"),
        "{message}"
    );
    let open = run(&req, LENDING);
    assert!(open.allowed, "{:?}", open.message());
    assert_lent_at_the_hosts_time(&open, "harness");
}

/// Outside its window a lent Deployment stays while its template is unchanged (a scale),
/// and a new template (a new image) is denied: its new pods would start on the lender.
#[test]
fn a_lent_deployment_stays_outside_the_window_only_while_its_template_is_unchanged() {
    let scaled = run_closed(&POLICY.request("deployment_batch_lent_update.json"));
    assert!(scaled.allowed, "{:?}", scaled.message());
    assert_eq!(scaled.patch, None);
    let rolled = run_closed(&POLICY.request("deployment_batch_lent_new_image.json"));
    assert!(!rolled.allowed);
    assert!(
        rolled
            .message()
            .unwrap()
            .contains("; this update changes its pod template: a lent workload stays on pool interactive only while its template is unchanged, so that no new pod starts on the lender's nodes outside the window."),
        "{:?}",
        rolled.message()
    );
}

/// The same lent Deployment under Kubewarden's own kwctl: the module reads the host's clock
/// through WASI there too.
#[test]
fn under_the_real_kwctl_the_module_reads_the_hosts_clock() {
    let Some((kwctl, _home)) =
        Kwctl::for_test("lending", "lending was not run under the real kwctl")
    else {
        return;
    };
    let output = kwctl
        .run(
            &module_path("gpu-pool-routing-policy").unwrap(),
            &POLICY.dir(),
            Path::new("test_data/deployment_batch.json"),
            Some(Path::new("test_data/settings_lending.yml")),
            None,
        )
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "kwctl run failed: {}{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or_else(|| panic!("kwctl printed no AdmissionResponse: {stdout}"));
    let response: AdmissionResponse = serde_json::from_str(line).unwrap();
    assert!(response.allowed, "{:?}", response.message());
    assert_eq!(sorted(response.patch_ops().unwrap()), lent_ops());
    assert_eq!(response.warnings, None);
    assert_lent_at_the_hosts_time(&response, "kwctl");
}

// ---------------------------------------------------------------------------------------
// Exceptions (settings_exceptions.yml: the research team's workloads in team-a, until
// 2027-09-27)
// ---------------------------------------------------------------------------------------

const EXCEPTIONS: &str = "settings_exceptions.yml";
const EXCEPTION_AUDIT: &str =
    "exception=research-spare-node owner=research-leads@example.com expires=2027-09-28T00:00:00Z";
const EXPIRED_NOTE: &str = " (exception research-spare-node (owner research-leads@example.com) expired at 2026-11-16T00:00:00Z; renew it or fix the workload)";

fn no_pool_message() -> &'static str {
    DENIED
        .iter()
        .find(|(f, _)| *f == "deployment_no_pool.json")
        .map(|(_, m)| *m)
        .unwrap()
}

#[test]
fn the_exception_fixture_is_renewed_in_time() {
    POLICY.assert_exception_fixture_renewed();
}

#[test]
fn an_exception_lets_a_workload_that_matches_no_pool_through() {
    let req = POLICY.request("deployment_no_pool.json");
    let response = run(&req, EXCEPTIONS);
    assert!(response.allowed, "{:?}", response.message());
    assert_eq!(response.patch, None, "excused, not routed");
    assert_eq!(response.warnings, None);
    assert_eq!(response.audit("exception"), Some(EXCEPTION_AUDIT));
    assert_eq!(response.audit("excused"), Some(no_pool_message()));
    // What the exception does not cover is routed as before.
    let other = run(&POLICY.request("deployment_interactive.json"), EXCEPTIONS);
    assert_eq!(
        other,
        run(&POLICY.request("deployment_interactive.json"), SETTINGS)
    );
}

#[test]
fn an_expired_exception_is_named_in_the_denial() {
    let response = run(
        &POLICY.request("deployment_no_pool.json"),
        "settings_exceptions_expired.yml",
    );
    assert!(!response.allowed);
    assert_eq!(
        response.message(),
        Some(format!("{}{EXPIRED_NOTE}", no_pool_message()).as_str())
    );
    assert_eq!(response.audit_annotations, None);
}

#[test]
fn exceptions_dated_at_test_time_warn_in_their_last_week() {
    let exception = DatedException::new("research-spare-node", "research-leads@example.com");
    let req = POLICY.request("deployment_no_pool.json");
    let (_, warning) = exception.assert_applies(POLICY, &req, None, 2);
    assert!(
        warning.ends_with(" days); renew it or fix the workload before then"),
        "{warning}"
    );
}

// ---------------------------------------------------------------------------------------
// Team labels (settings_team.yml: settings.yml with teamLabelKey: team)
// ---------------------------------------------------------------------------------------

const TEAM: &str = "settings_team.yml";
const TEAM_FORGED: &str = "spec.template.metadata.labels.gpu-admission/team: 'ml-b' is not the team of namespace team-a, which is ml-a (its label team). The team is taken from the namespace, not set by hand: remove the label (the policy sets it to ml-a)";
const TEAM_FORGED_NO_TEAM: &str = "spec.template.metadata.labels.gpu-admission/team: 'ml-b' names a team, but namespace team-a has no label team, so its workloads belong to no team. The team is taken from the namespace, not set by hand: remove the label (or ask the cluster admins to label the namespace team=<team>)";
const TEAM_RESTAMPED: &str = "spec.template.metadata.labels.gpu-admission/team: set to ml-b, the team of namespace team-a (its label team); it was ml-a";
const TEAM_NOT_GRANTED: &str = "namespace team-a cannot be read, so the team label gpu-admission/team of this workload cannot be set from the namespace's label team: cannot get v1/Namespace team-a: not granted to this policy: add {apiVersion: v1, kind: Namespace} to the ClusterAdmissionPolicy's contextAwareResources (the host's error: Callback evaluation failure: Policy has not been granted access to Kubernetes v1/Namespace resources. The violation has been reported.)";
const TEAM_NOT_FOUND: &str = "namespace team-a cannot be read, so the team label gpu-admission/team of this workload cannot be set from the namespace's label team: cannot get v1/Namespace team-a: not found (the host's error: Callback evaluation failure: Cannot find v1/Namespace named 'team-a' inside of namespace 'None')";

/// The one host call team labels make: the Namespace, masked to its labels.
fn namespace_call() -> Value {
    json!({"api_version": "v1", "kind": "Namespace", "name": "team-a", "namespace": null,
           "disable_cache": false, "field_masks": ["metadata.labels"]})
}

fn team_op(metadata: &str, team: &str) -> Value {
    json!({"op": "add", "path": format!("{metadata}/labels/gpu-admission~1team"), "value": team})
}

#[test]
fn team_labels_are_stamped_on_pods_controllers_and_custom_kinds() {
    for (file, metadata) in [
        ("deployment_interactive.json", "/spec/template/metadata"),
        ("pod_batch.json", "/metadata"),
        (
            "cronjob_batch.json",
            "/spec/jobTemplate/spec/template/metadata",
        ),
        ("inferenceservice_interactive.json", "/metadata"),
    ] {
        let req = POLICY.request(file);
        let e = run_session(&req, TEAM, "session_team_ml_a.yml");
        assert_eq!(
            e.calls(),
            vec![("get_resource", namespace_call())],
            "{file}"
        );
        assert!(e.unconsumed_exchanges.is_empty(), "{file}");
        let plain = run(&req, SETTINGS);
        let mut expected = plain.patch_ops().unwrap();
        expected.push(team_op(metadata, "ml-a"));
        assert!(e.response.allowed, "{file}: {:?}", e.response.message());
        assert_eq!(
            sorted(e.response.patch_ops().unwrap()),
            sorted(expected),
            "{file}"
        );
        assert_eq!(e.response.warnings, plain.warnings, "{file}");
        second_pass(&req, &e.response, TEAM, Some("session_team_ml_a.yml"));
    }
}

#[test]
fn without_team_label_key_no_namespace_is_read() {
    let req = POLICY.request("deployment_interactive.json");
    let e = POLICY
        .module()
        .evaluate(&req, &POLICY.settings(SETTINGS), None)
        .unwrap();
    assert!(e.host_calls.is_empty());
    assert_eq!(e.response, run(&req, SETTINGS));
}

#[test]
fn a_namespace_without_a_team_gets_no_team_label() {
    let req = POLICY.request("deployment_interactive.json");
    let e = run_session(&req, TEAM, "session_team_no_team.yml");
    assert_eq!(e.host_calls.len(), 1);
    assert_eq!(
        sorted(e.response.patch_ops().unwrap()),
        sorted(run(&req, SETTINGS).patch_ops().unwrap())
    );
    let second = second_pass(&req, &e.response, TEAM, Some("session_team_no_team.yml"));
    assert_eq!(second.warnings, None, "second pass warned");
}

#[test]
fn a_forged_team_label_is_denied() {
    let req = POLICY.request("deployment_team_forged.json");
    for (session, message) in [
        ("session_team_ml_a.yml", TEAM_FORGED),
        ("session_team_no_team.yml", TEAM_FORGED_NO_TEAM),
    ] {
        assert_denied_in_session(&req, TEAM, session, message);
    }
    // Without teamLabelKey the label is not the policy's business (today's behaviour).
    let plain = run(&req, SETTINGS);
    assert!(plain.allowed);
}

#[test]
fn a_stamped_deployment_updated_stays_or_follows_its_namespace() {
    let req = POLICY.request("deployment_team_stamped_update.json");
    let e = run_session(&req, TEAM, "session_team_ml_a.yml");
    assert!(e.response.allowed, "{:?}", e.response.message());
    assert_eq!(e.response.patch, None);
    assert_eq!(e.response.warnings, None);
    assert_eq!(e.host_calls.len(), 1);
    // The namespace moved to team ml-b since: the label follows it (a rollout follows).
    let e = run_session(&req, TEAM, "session_team_ml_b.yml");
    assert!(e.response.allowed, "{:?}", e.response.message());
    assert_eq!(
        e.response.patch_ops().unwrap(),
        vec![
            json!({"op": "replace", "path": "/spec/template/metadata/labels/gpu-admission~1team", "value": "ml-b"})
        ]
    );
    assert_eq!(e.response.warnings, Some(vec![TEAM_RESTAMPED.to_string()]));
}

#[test]
fn the_namespace_not_granted_or_not_found_is_denied_naming_the_grant() {
    let req = POLICY.request("deployment_interactive.json");
    for (session, message) in [
        ("session_team_not_granted.yml", TEAM_NOT_GRANTED),
        ("session_team_not_found.yml", TEAM_NOT_FOUND),
    ] {
        let e = assert_denied_in_session(&req, TEAM, session, message);
        assert!(e.unconsumed_exchanges.is_empty());
    }
    // Deployed without the grant at all: denied too, never routed without its team.
    let denial =
        POLICY.ungranted_denial("deployment_interactive.json", TEAM, "session_team_ml_a.yml");
    assert!(
        denial.starts_with("namespace team-a cannot be read, so the team label gpu-admission/team of this workload cannot be set from the namespace's label team: cannot get v1/Namespace team-a: "),
        "{denial}"
    );
}

#[test]
fn the_deploy_manifest_lets_the_policy_server_get_namespaces() {
    let docs = yaml_documents(POLICY.dir().join("../../deploy/policy-server.yaml"));
    let name = "gpu-pool-routing-namespace-reader";
    let role = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == name)
        .expect("deploy/policy-server.yaml has the ClusterRole");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}])
    );
    let binding = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRoleBinding" && d["metadata"]["name"] == name)
        .expect("deploy/policy-server.yaml binds it");
    assert_eq!(binding["roleRef"]["name"], name);
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "gpu-admission-policy-server", "namespace": "kubewarden"}])
    );
}
