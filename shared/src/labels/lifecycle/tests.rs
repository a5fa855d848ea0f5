//! Each serving and training rule, on and off, through `evaluate`.

use super::super::Settings;
use crate::admission::AdmissionRequest;
use crate::admission::ValidateSettings;
use crate::workload::presets;

use crate::labels::tests::evaluate;
use crate::testing::{message, says};
use rstest::rstest;
use serde_json::{Value, json};

/// Every rule on: serving rules for `interactive`, training rules for `batch` and `training`.
fn rules() -> Value {
    json!({
        "readinessProbe": {"workloadTypes": ["interactive"]},
        "startupProbe": {"workloadTypes": ["interactive"], "minFailureBudgetSeconds": 300},
        "maxUnavailable": {"workloadTypes": ["interactive"]},
        "activeDeadline": {"workloadTypes": ["batch", "training"], "maxSeconds": 86400},
        "sharedMemory": {"workloadTypes": ["training"], "minSize": "16Gi"}
    })
}

fn settings_with(rules: Value) -> Settings {
    let s: Settings = serde_json::from_value(json!({
        "workloadRules": rules,
        "customKinds": presets::all(),
    }))
    .unwrap();
    s.validate().unwrap();
    s
}

fn on() -> Settings {
    settings_with(rules())
}

fn off() -> Settings {
    settings_with(json!({}))
}

fn labels(workload_type: &str) -> Value {
    json!({"workload-type": workload_type, "team": "ml"})
}

fn server(extra: Value) -> Value {
    let mut c = json!({"name": "vllm", "image": "vllm/vllm-openai:v0.6.3",
        "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "8", "memory": "64Gi"}}});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

fn ready_probes() -> Value {
    json!({"readinessProbe": {"httpGet": {"path": "/health", "port": 8000}},
           "startupProbe": {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 10, "failureThreshold": 30}})
}

fn deployment(workload_type: &str, container: Value, strategy: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": "ml"},
        "spec": {"replicas": 4, "strategy": strategy,
          "template": {"metadata": {"labels": labels(workload_type)}, "spec": {"containers": [container]}}}})
}

fn safe_strategy() -> Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}})
}

fn create(object: Value) -> AdmissionRequest {
    serde_json::from_value(json!({"uid": "u", "operation": "CREATE", "namespace": "ml",
        "userInfo": {"username": "alice"}, "object": object}))
    .unwrap()
}

#[test]
fn a_safe_serving_deployment_passes_every_rule() {
    let v = evaluate(
        &create(deployment(
            "interactive",
            server(ready_probes()),
            safe_strategy(),
        )),
        &on(),
    );
    assert!(v.allowed, "{v:?}");
}

#[test]
fn serving_without_probes_is_denied_with_the_fix_and_allowed_when_off() {
    let object = deployment("interactive", server(json!({})), safe_strategy());
    let v = evaluate(&create(object.clone()), &on());
    assert_eq!(
        message(&v),
        "Deployment 'llm' breaks the GPU admission rules (2 problems): 1) container 'vllm' serves (workload-type: interactive) without a readinessProbe: add one (e.g. httpGet on the model server's health endpoint), so no request reaches a replica before its model is loaded; 2) container 'vllm' (workload-type: interactive) has no startupProbe: add one whose failureThreshold x periodSeconds is at least 300 s (e.g. periodSeconds: 10, failureThreshold: 30), so the model can load before the liveness probe counts"
    );
    assert!(evaluate(&create(object.clone()), &off()).allowed);
    // The rules apply to the workload types they name only.
    let training = deployment("training", server(json!({})), safe_strategy());
    assert!(evaluate(&create(training), &on()).allowed);
}

#[rstest]
#[case::defaults(json!({}), 30, "failureThreshold 3 x periodSeconds 10", 30)]
#[case::short(json!({"periodSeconds": 5, "failureThreshold": 12}), 60, "failureThreshold 12 x periodSeconds 5", 60)]
fn a_short_startup_budget_says_what_to_raise(
    #[case] probe: Value,
    #[case] budget: u64,
    #[case] spelled: &str,
    #[case] raise_to: u64,
) {
    let mut probes = ready_probes();
    probes["startupProbe"] = probe;
    let period = if budget == 60 { 5 } else { 10 };
    let v = evaluate(
        &create(deployment("interactive", server(probes), safe_strategy())),
        &on(),
    );
    assert_eq!(
        message(&v),
        format!(
            "Deployment 'llm' breaks the GPU admission rules (1 problem): 1) the startupProbe of container 'vllm' gives the model {budget} s to load ({spelled}), less than the 300 s required: raise failureThreshold to {}",
            300 / period
        )
    );
    assert_eq!(raise_to, budget);
}

#[rstest]
#[case::default_25_percent(json!(null), "spec.strategy.rollingUpdate.maxUnavailable is 25% (the default, as it is not set): a rollout takes 1 of 4 replicas (workload-type: interactive) down at once")]
#[case::percent(json!({"rollingUpdate": {"maxUnavailable": "50%"}}), "maxUnavailable is 50%: a rollout takes 2 of 4 replicas")]
#[case::integer(json!({"rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}), "maxUnavailable is 1: a rollout takes 1 of 4 replicas")]
#[case::both_zero(json!({"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}), "maxUnavailable is 0: a rollout takes 1 of 4 replicas (workload-type: interactive) down at once (with maxSurge 0 too, the Deployment controller takes one down to make progress)")]
#[case::recreate(json!({"type": "Recreate"}), "spec.strategy.type is Recreate: a rollout stops all 4 replicas (workload-type: interactive) before new ones start; use type: RollingUpdate with rollingUpdate.maxUnavailable: 0 and maxSurge: 1")]
#[case::bad(json!({"rollingUpdate": {"maxUnavailable": "lots"}}), "spec.strategy.rollingUpdate.maxUnavailable must be an integer or a percentage like 25%, got 'lots'")]
fn rollouts_that_take_serving_pods_down_are_denied(#[case] strategy: Value, #[case] text: &str) {
    let v = evaluate(
        &create(deployment(
            "interactive",
            server(ready_probes()),
            strategy.clone(),
        )),
        &on(),
    );
    assert!(!v.allowed);
    says(&v, text);
    assert!(
        evaluate(
            &create(deployment("interactive", server(ready_probes()), strategy)),
            &off()
        )
        .allowed
    );
}

#[test]
fn a_configured_max_unavailable_is_the_bound() {
    let mut r = rules();
    r["maxUnavailable"]["max"] = json!(1);
    let s = settings_with(r);
    let one = json!({"rollingUpdate": {"maxUnavailable": 1}});
    assert!(
        evaluate(
            &create(deployment("interactive", server(ready_probes()), one)),
            &s
        )
        .allowed
    );
    let v = evaluate(
        &create(deployment(
            "interactive",
            server(ready_probes()),
            json!({"rollingUpdate": {"maxUnavailable": "50%"}}),
        )),
        &s,
    );
    says(
        &v,
        "more than the 1 allowed; set spec.strategy.rollingUpdate.maxUnavailable: 1 and maxSurge: 1",
    );
}

fn job(workload_type: &str, deadline: Option<u64>) -> Value {
    let mut j = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"template": {"metadata": {"labels": labels(workload_type)},
          "spec": {"restartPolicy": "Never", "containers": [server(json!({"name": "trainer"}))]}}}});
    if let Some(d) = deadline {
        j["spec"]["activeDeadlineSeconds"] = json!(d);
    }
    j
}

#[test]
fn training_jobs_need_a_bounded_deadline() {
    let v = evaluate(&create(job("batch", None)), &on());
    assert_eq!(
        message(&v),
        "Job 'train' breaks the GPU admission rules (1 problem): 1) spec.activeDeadlineSeconds is not set: a Job (workload-type: batch) holds its GPUs until it ends, however long it idles or hangs; set spec.activeDeadlineSeconds (at most 86400)"
    );
    let v = evaluate(&create(job("training", Some(604800))), &on());
    assert!(message(&v).ends_with("1) spec.activeDeadlineSeconds is 604800, more than the 86400 s allowed (workload-type: training): lower it to 86400 or less"), "{v:?}");
    assert!(evaluate(&create(job("training", Some(3600))), &on()).allowed);
    assert!(evaluate(&create(job("batch", None)), &off()).allowed);
    assert!(evaluate(&create(job("interactive", None)), &on()).allowed);
    // Without maxSeconds any deadline will do.
    let mut r = rules();
    r["activeDeadline"] = json!({"workloadTypes": ["batch"]});
    assert!(
        evaluate(
            &create(job("batch", Some(10_000_000))),
            &settings_with(r.clone())
        )
        .allowed
    );
    assert!(
        message(&evaluate(&create(job("batch", None)), &settings_with(r)))
            .ends_with("set spec.activeDeadlineSeconds")
    );
}

#[test]
fn cron_jobs_and_pytorch_jobs_keep_their_deadlines_elsewhere() {
    let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly", "namespace": "ml"},
        "spec": {"schedule": "0 2 * * *", "jobTemplate": {"spec": {"template": {"metadata": {"labels": labels("batch")},
          "spec": {"restartPolicy": "Never", "containers": [server(json!({}))]}}}}}});
    let v = evaluate(&create(cron.clone()), &on());
    says(
        &v,
        "spec.jobTemplate.spec.activeDeadlineSeconds is not set: a CronJob",
    );
    let mut ok = cron;
    ok["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] = json!(7200);
    assert!(evaluate(&create(ok), &on()).allowed);
    let pytorch = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "ft", "namespace": "ml"},
        "spec": {"runPolicy": {"activeDeadlineSeconds": 3600}, "pytorchReplicaSpecs": {"Worker": {"replicas": 2,
          "template": {"metadata": {"labels": labels("batch")}, "spec": {"containers": [server(json!({}))]}}}}}});
    assert!(evaluate(&create(pytorch), &on()).allowed);
}

fn training_pod(gpus: &str, volume: Option<Value>, mount: bool) -> Value {
    let mut c = server(json!({"name": "trainer"}));
    c["resources"]["limits"]["nvidia.com/gpu"] = json!(gpus);
    if mount {
        c["volumeMounts"] = json!([{"name": "dshm", "mountPath": "/dev/shm"}]);
    }
    let mut spec = json!({"restartPolicy": "Never", "containers": [c]});
    if let Some(v) = volume {
        spec["volumes"] = json!([v]);
    }
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"activeDeadlineSeconds": 3600, "template": {"metadata": {"labels": labels("training")}, "spec": spec}}})
}

#[rstest]
#[case::none(
    None,
    false,
    Some(
        "1) container 'trainer' holds 8 GPUs with no memory-backed /dev/shm (the container runtime gives 64 MiB, too little for NCCL and DataLoader workers): add the volume {name: dshm, emptyDir: {medium: Memory, sizeLimit: 16Gi}} and mount it in the container at /dev/shm"
    )
)]
#[case::disk(Some(json!({"name": "dshm", "emptyDir": {}})), true, Some("1) container 'trainer' mounts volume 'dshm' at /dev/shm, which is not memory-backed: make it emptyDir: {medium: Memory, sizeLimit: 16Gi}"))]
#[case::host(Some(json!({"name": "dshm", "hostPath": {"path": "/dev/shm"}})), true, Some("mounts volume 'dshm' at /dev/shm, which is not memory-backed"))]
#[case::small(Some(json!({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}})), true, Some("1) the /dev/shm of container 'trainer' (volume 'dshm') is limited to 1Gi, less than 16Gi: set its emptyDir.sizeLimit to 16Gi or more"))]
#[case::small_by_memory_limit(Some(json!({"name": "dshm", "emptyDir": {"medium": "Memory"}})), true, None)]
#[case::enough(Some(json!({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}})), true, None)]
fn multi_gpu_training_pods_need_a_memory_backed_dev_shm(
    #[case] volume: Option<Value>,
    #[case] mount: bool,
    #[case] problem: Option<&str>,
) {
    let v = evaluate(&create(training_pod("8", volume.clone(), mount)), &on());
    match problem {
        Some(text) => assert!(message(&v).contains(text), "{}", message(&v)),
        None => assert!(v.allowed, "{v:?}"),
    }
    assert!(evaluate(&create(training_pod("8", volume, mount)), &off()).allowed);
}

#[test]
fn without_size_limit_the_pods_memory_limit_bounds_dev_shm() {
    // 64Gi of container memory limit: a memory-backed emptyDir without sizeLimit is bounded
    // by it, so a 128Gi minimum is not met.
    let mut r = rules();
    r["sharedMemory"]["minSize"] = json!("128Gi");
    let v = evaluate(
        &create(training_pod(
            "8",
            Some(json!({"name": "dshm", "emptyDir": {"medium": "Memory"}})),
            true,
        )),
        &settings_with(r),
    );
    says(&v, "is limited to the pod's memory limit, less than 128Gi");
}

#[test]
fn single_gpu_pods_need_no_dev_shm() {
    assert!(evaluate(&create(training_pod("1", None, false)), &on()).allowed);
}

#[test]
fn kserve_model_containers_are_found_for_probes() {
    let isvc = json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "llama", "namespace": "ml", "labels": labels("interactive")},
        "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"},
            "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "8", "memory": "64Gi"}}}}}});
    let v = evaluate(&create(isvc.clone()), &on());
    says(
        &v,
        "container 'model' serves (workload-type: interactive) without a readinessProbe",
    );
    let mut ready = isvc;
    for (k, p) in ready_probes().as_object().unwrap() {
        ready["spec"]["predictor"]["model"][k] = p.clone();
    }
    assert!(evaluate(&create(ready), &on()).allowed);
}

#[test]
fn a_strategy_change_is_judged_even_when_the_template_is_unchanged() {
    let old = deployment("interactive", server(ready_probes()), safe_strategy());
    let new = deployment(
        "interactive",
        server(ready_probes()),
        json!({"type": "Recreate"}),
    );
    let update = |new: Value, old: Value| -> AdmissionRequest {
        serde_json::from_value(json!({"uid": "u", "operation": "UPDATE", "namespace": "ml",
            "userInfo": {"username": "alice"}, "object": new, "oldObject": old}))
        .unwrap()
    };
    let v = evaluate(&update(new, old.clone()), &on());
    assert!(!v.allowed && message(&v).contains("Recreate"), "{v:?}");
    // A legacy Recreate Deployment scaled (replicas only) is let through with a warning.
    let legacy = deployment(
        "interactive",
        server(ready_probes()),
        json!({"type": "Recreate"}),
    );
    let mut scaled = legacy.clone();
    scaled["spec"]["replicas"] = json!(6);
    let v = evaluate(&update(scaled, legacy), &on());
    assert!(v.allowed && !v.warnings.is_empty(), "{v:?}");
}

#[rstest]
#[case::empty_types(json!({"readinessProbe": {"workloadTypes": []}}), "workloadRules.readinessProbe.workloadTypes: name the values of workload-type this rule applies to")]
#[case::not_allowed(json!({"startupProbe": {"workloadTypes": ["serving"]}}), "workloadRules.startupProbe.workloadTypes[0]: 'serving' is not a value the workload-type label may take (requiredLabels allows interactive, batch, training), so the rule would never apply")]
#[case::twice(json!({"sharedMemory": {"workloadTypes": ["training", "training"]}}), "workloadRules.sharedMemory.workloadTypes[1]: 'training' is listed twice")]
#[case::zero_budget(json!({"startupProbe": {"workloadTypes": ["interactive"], "minFailureBudgetSeconds": 0}}), "workloadRules.startupProbe.minFailureBudgetSeconds: must be at least 1")]
#[case::zero_deadline(json!({"activeDeadline": {"workloadTypes": ["batch"], "maxSeconds": 0}}), "workloadRules.activeDeadline.maxSeconds: must be at least 1")]
#[case::bad_size(json!({"sharedMemory": {"workloadTypes": ["training"], "minSize": "lots"}}), "workloadRules.sharedMemory.minSize: 'lots' is not a quantity")]
#[case::zero_size(json!({"sharedMemory": {"workloadTypes": ["training"], "minSize": "0"}}), "workloadRules.sharedMemory.minSize: must be more than 0")]
#[case::zero_gpus(json!({"sharedMemory": {"workloadTypes": ["training"], "minGpus": 0}}), "workloadRules.sharedMemory.minGpus: must be at least 1")]
#[case::bad_key(json!({"labelKey": "bad key"}), "workloadRules.labelKey: 'bad key'")]
#[case::other_rules_parameter(json!({"readinessProbe": {"workloadTypes": ["interactive"], "max": 0}}), "workloadRules.readinessProbe.max: not a parameter of this rule (it takes workloadTypes)")]
#[case::shm_parameter_on_deadline(json!({"activeDeadline": {"workloadTypes": ["batch"], "minSize": "1Gi"}}), "workloadRules.activeDeadline.minSize: not a parameter of this rule (it takes workloadTypes, maxSeconds)")]
fn invalid_rules_name_the_field(#[case] rules: Value, #[case] start: &str) {
    let s: Settings = serde_json::from_value(json!({"workloadRules": rules})).unwrap();
    let err = s.validate().unwrap_err().to_string();
    assert!(err.starts_with(start), "{err}");
}

#[test]
fn rule_types_follow_the_label_they_key_on() {
    // Another label, with other values: no requiredLabels entry constrains it.
    let s: Settings = serde_json::from_value(json!({"workloadRules": {
        "labelKey": "example.com/role", "readinessProbe": {"workloadTypes": ["serving"]}}}))
    .unwrap();
    s.validate().unwrap();
    let typo: Result<Settings, _> =
        serde_json::from_value(json!({"workloadRules": {"readinessprobe": {}}}));
    assert!(
        typo.unwrap_err()
            .to_string()
            .contains("unknown field `readinessprobe`")
    );
    let defaults = settings_with(json!({"sharedMemory": {"workloadTypes": ["training"]}}));
    let shm = defaults.workload_rules.shared_memory.unwrap();
    assert_eq!((shm.shm_size(), shm.shm_min_gpus()), ("1Gi", 2));
    let startup = settings_with(json!({"startupProbe": {"workloadTypes": ["interactive"]}}));
    assert_eq!(
        startup
            .workload_rules
            .startup_probe
            .unwrap()
            .failure_budget(),
        300
    );
}
