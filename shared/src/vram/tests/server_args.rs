//! What the pod runs: server arguments, image labels, requested-memory caps and
//! over-provisioning, end to end on admission requests.

use super::*;
use crate::testing::{
    allows_recording, allows_warning, audit, denies, denies_saying, denies_starting, ends_saying,
    starts_saying,
};

fn server(args: &[&str]) -> Value {
    json!({"name": "server", "image": "vllm/vllm-openai:v0.6.3", "args": args})
}

/// A pod spec whose GPU container runs with `args`.
fn running(args: &[&str], gpus: u64, product: &str) -> Value {
    let mut c = server(args);
    c["resources"] = json!({"limits": {"nvidia.com/gpu": gpus.to_string()}});
    json!({"containers": [c], "nodeSelector": {"nvidia.com/gpu.product": product}})
}

fn unlabelled(spec: Value) -> Value {
    deployment(json!({}), json!({}), spec)
}

/// llama-3.1-8b, labelled, its server run with `args` on `gpus` x `product`.
fn llama_8b_running(args: &[&str], gpus: u64, product: &str) -> Value {
    labelled("llama-3.1-8b", running(args, gpus, product))
}

#[test]
fn the_arguments_name_the_model_without_a_label() {
    let v = judge(unlabelled(running(
        &["--model", "meta-llama/Llama-3.1-8B-Instruct"],
        1,
        "NVIDIA-L4",
    )));
    allows_recording(&v, AUDIT_MODEL, "meta-llama/Llama-3.1-8B-Instruct");
    assert_eq!(
        audit(&v, AUDIT_MODEL_SOURCE),
        "argument --model of container server on spec.template.spec"
    );
    assert!(!v.audit_annotations.contains_key(AUDIT_SERVER_ARGS));
}

#[test]
fn a_longer_context_and_more_sequences_are_counted() {
    // 8B on one L4 fits at the registry's 8192 tokens x 1; 131072 tokens x 64 sequences is
    // 131,072 B/token x 8,388,608 tokens = 1 TiB of KV cache.
    let v = judge(llama_8b_running(
        &["--max-model-len", "131072", "--max-num-seqs=64"],
        1,
        "NVIDIA-L4",
    ));
    denies_starting(
        &v,
        "model meta-llama/Llama-3.1-8B-Instruct needs ~1143 GiB GPU memory (weights 15 GiB bf16, KV cache 1024 GiB for 64 x 131072 tokens, overhead 10%; --max-model-len 131072, --max-num-seqs 64 from container server); the pod asks for 1 x NVIDIA-L4 = 20 GiB usable at 90%.",
    );
    // A shorter context is counted too: accepted, and the audit says from where.
    let v = judge(llama_8b_running(
        &["--max-model-len", "4096"],
        1,
        "NVIDIA-L4",
    ));
    allows_recording(
        &v,
        AUDIT_FIT,
        "model meta-llama/Llama-3.1-8B-Instruct needs ~18 GiB (--max-model-len 4096 from container server); the pod asks for 1 x NVIDIA-L4 = 20 GiB usable at 90%",
    );
    assert_eq!(
        audit(&v, AUDIT_SERVER_ARGS),
        "counted: --max-model-len 4096 from container server"
    );
}

#[test]
fn gpu_memory_utilization_replaces_the_usable_percentage() {
    // 17,975 MiB needed; one L4 gives floor(23,034 x 75%) = 17,275.
    denies_saying(
        &judge(llama_8b_running(
            &["--gpu-memory-utilization", "0.75"],
            1,
            "NVIDIA-L4",
        )),
        "the pod asks for 1 x NVIDIA-L4 = 16 GiB usable at 75% (--gpu-memory-utilization 0.75 of container server). Request nvidia.com/gpu: 2 on NVIDIA-L4",
    );
}

#[test]
fn a_label_and_arguments_naming_different_models_are_denied() {
    let object = llama_8b_running(
        &["--model", "meta-llama/Llama-3.1-70B-Instruct"],
        1,
        "NVIDIA-L4",
    );
    denies(
        &judge(object.clone()),
        "the label gpu-admission/model on spec.template.spec names model 'llama-3.1-8b', but the argument --model of container server on spec.template.spec names 'meta-llama/Llama-3.1-70B-Instruct': label the workload with the model it serves, or serve the model it is labelled with (modelMismatch: deny)",
    );
    // warn: judged on what the server runs, which does not fit.
    let v = run(&settings_with(json!({"modelMismatch": "warn"})), object);
    denies_starting(&v, "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB");
    assert_eq!(
        v.warnings,
        vec![
            "the label gpu-admission/model on spec.template.spec names model 'llama-3.1-8b', but the argument --model of container server on spec.template.spec names 'meta-llama/Llama-3.1-70B-Instruct': judged as 'meta-llama/Llama-3.1-70B-Instruct', what the server runs (modelMismatch: warn)"
        ]
    );
}

#[rstest]
// An alias and its id.
#[case::alias("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct")]
// Unregistered both, the same repository name.
#[case::unregistered("gpt-j-6b", "EleutherAI/gpt-j-6b")]
// The label is the registered id's name without its organisation.
#[case::name_of_the_id("Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct")]
fn the_same_model_named_two_ways_is_no_contradiction(#[case] label: &str, #[case] arg: &str) {
    let v = run(
        &settings_with(json!({"unknownModel": "allow"})),
        labelled(label, running(&["--model", arg], 1, "NVIDIA-L4")),
    );
    assert!(v.allowed, "{v:?}");
}

#[test]
fn a_registered_short_name_judges_an_unregistered_id() {
    // The registry knows the model by its label-friendly name only.
    let s: Settings =
        serde_json::from_value(json!({"models": {"llama-3.1-8b": {"vramGiB": 18}}})).unwrap();
    let serving = |id: &str| run(&s, llama_8b_running(&["--model", id], 1, "NVIDIA-L4"));
    let v = serving("meta-llama/Llama-3.1-8B-Instruct");
    allows_recording(&v, AUDIT_MODEL, "llama-3.1-8b");
    assert_eq!(
        audit(&v, AUDIT_MODEL_SOURCE),
        "label gpu-admission/model on spec.template.spec; the argument --model of container server on spec.template.spec names it 'meta-llama/Llama-3.1-8B-Instruct'"
    );
    // An unregistered id that is not the labelled model is a contradiction.
    ends_saying(
        &serving("meta-llama/Llama-3.1-70B-Instruct"),
        "names 'meta-llama/Llama-3.1-70B-Instruct': label the workload with the model it serves, or serve the model it is labelled with (modelMismatch: deny)",
    );
}

#[test]
fn a_model_loaded_from_a_path_is_named_by_the_label() {
    let spec = running(
        &["--model", "/mnt/models", "--max-model-len", "4096"],
        1,
        "NVIDIA-L4",
    );
    allows_recording(
        &judge(labelled("llama-3.1-8b", spec.clone())),
        AUDIT_MODEL_SOURCE,
        "label gpu-admission/model on spec.template.spec",
    );
    let v = run(&settings_with(json!({"noModel": "deny"})), unlabelled(spec));
    denies(
        &v,
        "this GPU workload names no model the policy can see (container server loads its model from /mnt/models, a path in the container), so its GPU memory cannot be checked: add the pod-template label gpu-admission/model: <model> or the annotation gpu-admission/model (for ids with '/', like meta-llama/Llama-3.1-8B-Instruct)",
    );
}

#[test]
fn a_registered_served_model_name_names_the_model_last() {
    let spec = running(
        &[
            "--model",
            "/mnt/models",
            "--served-model-name",
            "qwen2.5-7b",
        ],
        1,
        "NVIDIA-L40S",
    );
    allows_recording(
        &judge(unlabelled(spec.clone())),
        AUDIT_MODEL,
        "Qwen/Qwen2.5-7B-Instruct",
    );
    // An unregistered name is only a name: the workload names no model.
    let mut other = spec;
    other["containers"][0]["args"][3] = json!("chat");
    allows_recording(
        &judge(unlabelled(other)),
        AUDIT_FIT,
        "not checked: the workload names no model (container server loads its model from /mnt/models)",
    );
}

#[test]
fn tensor_parallel_must_match_the_gpus() {
    denies(
        &judge(llama_8b_running(
            &["--tensor-parallel-size", "4"],
            2,
            "NVIDIA-L4",
        )),
        "container server runs --tensor-parallel-size 4, but the pod has 2 GPUs: the server needs exactly as many GPUs as it shards the model over. Set --tensor-parallel-size 2, or request nvidia.com/gpu: 4.",
    );
    // No model needed to see it.
    starts_saying(
        &judge(unlabelled(running(&["--num-shard=1"], 2, "NVIDIA-L4"))),
        "container server runs --num-shard 1, but the pod has 2 GPUs",
    );
    let v = judge(llama_8b_running(
        &["--tensor-parallel-size", "2"],
        2,
        "NVIDIA-L4",
    ));
    assert!(v.allowed, "{v:?}");
}

#[test]
fn tensor_times_pipeline_parallel_is_the_group_s_gpus() {
    let lws = |args: &[&str]| {
        let leader = running(args, 4, "NVIDIA-L40S");
        let mut worker = running(&[], 4, "NVIDIA-L40S");
        worker["containers"][0]["command"] = json!(["ray", "start", "--block"]);
        json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "spec": {"leaderWorkerTemplate": {"size": 2,
                "leaderTemplate": {"metadata": {"labels": {"gpu-admission/model": "llama-3.1-70b"}}, "spec": leader},
                "workerTemplate": {"metadata": {"labels": {"gpu-admission/model": "llama-3.1-70b"}}, "spec": worker}}}})
    };
    let v = judge(lws(&[
        "--tensor-parallel-size",
        "4",
        "--pipeline-parallel-size",
        "2",
    ]));
    assert!(v.allowed, "{v:?}");
    denies(
        &judge(lws(&["--tensor-parallel-size", "4"])),
        "container server in spec.leaderWorkerTemplate.leaderTemplate.spec runs --tensor-parallel-size 4, but the LeaderWorkerSet group has 8 GPUs over 2 pods: the server needs exactly as many GPUs as it shards the model over. Set --tensor-parallel-size 8, or request nvidia.com/gpu: 2 per pod.",
    );
}

#[test]
fn malformed_arguments_are_denied_and_unknown_ones_ignored() {
    denies(
        &judge(llama_8b_running(
            &["--max-model-len", "lots"],
            1,
            "NVIDIA-L4",
        )),
        "the server arguments cannot be read: container server: --max-model-len is 'lots', not a number of tokens from 1 to 100000000 (like 8192 or 32k)",
    );
    let v = judge(llama_8b_running(
        &[
            "--enable-chunked-prefill",
            "--port",
            "8000",
            "--swap-space=4",
        ],
        1,
        "NVIDIA-L4",
    ));
    assert!(v.allowed, "{v:?}");
}

#[test]
fn an_update_that_changes_the_arguments_is_judged_again() {
    let s = settings_with(json!({}));
    let old = llama_8b_running(&[], 1, "NVIDIA-L4");
    let new = llama_8b_running(&["--max-model-len", "131072"], 1, "NVIDIA-L4");
    let mut update = request("UPDATE", new);
    update.old_object = old.clone();
    assert!(!evaluate(&update, &s, &FakeCluster::none()).allowed);
    let mut same = request("UPDATE", old.clone());
    same.old_object = old;
    assert!(evaluate(&same, &s, &FakeCluster::none()).allowed);
}

#[test]
fn kserve_model_id_beats_the_storage_uri() {
    let mut isvc = inference_service(
        "hf://meta-llama/Llama-3.1-70B-Instruct",
        1,
        "NVIDIA-L40S",
        None,
    );
    isvc["spec"]["predictor"]["model"]["args"] = json!([
        "--model_name=chat",
        "--model_id=meta-llama/Llama-3.1-8B-Instruct",
        "--max_model_len=8192"
    ]);
    // The helper labels it bge-large: a label naming another model than --model_id.
    denies(
        &judge(isvc.clone()),
        "the label gpu-admission/model on spec.predictor names model 'bge-large', but the argument --model_id of container model on spec.predictor names 'meta-llama/Llama-3.1-8B-Instruct': label the workload with the model it serves, or serve the model it is labelled with (modelMismatch: deny)",
    );
    isvc["metadata"]["labels"] = json!({});
    allows_recording(
        &judge(isvc),
        AUDIT_MODEL,
        "meta-llama/Llama-3.1-8B-Instruct",
    );
}

// Requested-memory caps.

fn capped(extra: Value) -> Settings {
    let mut caps = json!({"requestedMemoryCaps": {"labelKey": "gpu-admission/workload-type",
        "maxGiB": {"interactive": 40, "batch": 400},
        "message": "Need more VRAM? Talk to the platform team."}});
    if let (Some(c), Some(e)) = (caps.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    settings_with(caps)
}

fn interactive(labels: Value, spec: Value) -> Value {
    let mut l = json!({"gpu-admission/workload-type": "interactive"});
    if let (Some(l), Some(extra)) = (l.as_object_mut(), labels.as_object()) {
        l.extend(extra.clone());
    }
    deployment(l, json!({}), spec)
}

/// The policy, with the caps, on an interactive Deployment labelled `labels` too.
fn capped_interactive(labels: Value, spec: Value) -> Verdict {
    run(&capped(json!({})), interactive(labels, spec))
}

#[test]
fn requested_memory_is_capped_without_a_model() {
    denies(
        &capped_interactive(
            json!({}),
            pod_spec("nvidia.com/gpu", 8, Some("NVIDIA-H100-80GB-HBM3")),
        ),
        "the pod asks for 8 x NVIDIA-H100-80GB-HBM3 = 638 GiB of GPU memory, more than the 40 GiB allowed for gpu-admission/workload-type=interactive workloads: one NVIDIA-H100-80GB-HBM3 already holds more; use a smaller GPU or a MIG slice. Need more VRAM? Talk to the platform team.",
    );
    denies(
        &capped_interactive(json!({}), pod_spec("nvidia.com/gpu", 4, Some("NVIDIA-L4"))),
        "the pod asks for 4 x NVIDIA-L4 = 90 GiB of GPU memory, more than the 40 GiB allowed for gpu-admission/workload-type=interactive workloads: request at most nvidia.com/gpu: 1 of NVIDIA-L4. Need more VRAM? Talk to the platform team.",
    );
    // Within the cap, or another label value, or no label: judged as before.
    for (labels, gpus) in [
        (json!({"gpu-admission/workload-type": "interactive"}), 1),
        (json!({"gpu-admission/workload-type": "batch"}), 8),
        (json!({}), 8),
    ] {
        let v = run(
            &capped(json!({})),
            deployment(
                labels,
                json!({}),
                pod_spec("nvidia.com/gpu", gpus, Some("NVIDIA-L4")),
            ),
        );
        assert!(v.allowed, "{gpus}: {v:?}");
    }
}

#[test]
fn requested_memory_is_capped_with_a_model_that_fits() {
    denies_starting(
        &capped_interactive(
            json!({"gpu-admission/model": "llama-3.1-8b"}),
            pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-H100-80GB-HBM3")),
        ),
        "the pod asks for 1 x NVIDIA-H100-80GB-HBM3 = 80 GiB of GPU memory, more than the 40 GiB allowed",
    );
    // MIG devices count each; time-sliced replicas count once.
    starts_saying(
        &capped_interactive(json!({}), pod_spec("nvidia.com/mig-3g.40gb", 2, None)),
        "the pod asks for 2 x MIG 3g.40gb",
    );
    let v = capped_interactive(
        json!({}),
        pod_spec("nvidia.com/gpu", 4, Some("NVIDIA-L4-SHARED")),
    );
    assert!(v.allowed, "four replicas of one L4 are 22.5 GiB: {v:?}");
}

#[test]
fn an_unknown_gpu_under_a_cap_follows_unknown_gpu() {
    starts_saying(
        &capped_interactive(json!({}), pod_spec("nvidia.com/gpu", 1, None)),
        "cannot check the GPU memory cap of gpu-admission/workload-type=interactive workloads: the GPU type is unknown",
    );
    let v = run(
        &capped(json!({"unknownGpu": "allow"})),
        interactive(json!({}), pod_spec("nvidia.com/gpu", 1, None)),
    );
    assert!(v.allowed);
}

// Over-provisioning.

#[test]
fn a_model_in_half_the_gpus_is_over_provisioned() {
    let object = llama_8b_running(&["--tensor-parallel-size", "4"], 4, "NVIDIA-L4");
    allows_warning(
        &judge(object.clone()),
        &[
            "over-provisioned: model meta-llama/Llama-3.1-8B-Instruct needs ~18 GiB, and the pod asks for 4 x NVIDIA-L4 = 80 GiB usable at 90%; nvidia.com/gpu: 1 on NVIDIA-L4 with --tensor-parallel-size 1 holds it in half the GPU memory or less (20 GiB usable): request that instead (overprovision: warn)",
        ],
    );
    let v = run(
        &settings_with(json!({"overprovision": "deny"})),
        object.clone(),
    );
    denies_starting(
        &v,
        "over-provisioned: model meta-llama/Llama-3.1-8B-Instruct needs ~18 GiB",
    );
    let v = run(&settings_with(json!({"overprovision": "allow"})), object);
    allows_warning(&v, &[]);
}

#[test]
fn a_model_on_a_smaller_product_is_over_provisioned() {
    allows_warning(
        &judge(model_on("llama-3.1-8b", 1, "NVIDIA-H100-80GB-HBM3")),
        &[
            "over-provisioned: model meta-llama/Llama-3.1-8B-Instruct needs ~18 GiB, and the pod asks for 1 x NVIDIA-H100-80GB-HBM3 = 71 GiB usable at 90%; nvidia.com/gpu: 1 on NVIDIA-A10G (nodeSelector nvidia.com/gpu.product) holds it in half the GPU memory or less (20 GiB usable): request that instead (overprovision: warn)",
        ],
    );
    // With pools, a pool is proposed.
    let s = settings_with(
        json!({"poolProducts": {"small": "NVIDIA-L4", "large": "NVIDIA-H100-80GB-HBM3"}}),
    );
    let v = run(
        &s,
        deployment(
            json!({"gpu-admission/model": "llama-3.1-8b", "gpu-admission/pool": "large"}),
            json!({}),
            pod_spec("nvidia.com/gpu", 1, None),
        ),
    );
    assert!(
        v.warnings[0].contains(
            "; nvidia.com/gpu: 1 in pool small (NVIDIA-L4, pod label gpu-admission/pool) holds it"
        ),
        "{v:?}"
    );
    // A model that needs more than half is not over-provisioned.
    allows_warning(&judge(model_on("qwen2.5-7b", 1, "NVIDIA-L40S")), &[]);
}

// Image labels.

fn with_images() -> Settings {
    settings_with(json!({"imageLabels": {"enabled": true}}))
}

/// A cluster whose image vllm/vllm-openai:v0.6.3 has the labels `labels`.
fn image_labelled(labels: Value) -> FakeCluster {
    FakeCluster::images(vec![("vllm/vllm-openai:v0.6.3", Ok(labels))])
}

/// The policy, reading image labels from `cluster`, on `object`.
fn judge_images(cluster: &FakeCluster, object: Value) -> Verdict {
    evaluate(&request("CREATE", object), &with_images(), cluster)
}

#[test]
fn image_labels_name_the_model_after_the_arguments() {
    let cluster = image_labelled(json!({"io.gpu-admission.model": "qwen2.5-7b"}));
    let v = judge_images(&cluster, unlabelled(running(&[], 1, "NVIDIA-L40S")));
    allows_recording(&v, AUDIT_MODEL, "Qwen/Qwen2.5-7B-Instruct");
    assert_eq!(
        audit(&v, AUDIT_MODEL_SOURCE),
        "label io.gpu-admission.model of image vllm/vllm-openai:v0.6.3"
    );
    assert_eq!(*cluster.image_calls.borrow(), ["vllm/vllm-openai:v0.6.3"]);
    // The arguments win; the image label and a pod label that disagree with them are
    // contradictions only for the pod label.
    let object = unlabelled(running(
        &["--model", "meta-llama/Llama-3.1-8B-Instruct"],
        1,
        "NVIDIA-L40S",
    ));
    assert_eq!(
        audit(&judge_images(&cluster, object), AUDIT_MODEL),
        "meta-llama/Llama-3.1-8B-Instruct"
    );
    // A pod label naming another model than the image: modelMismatch.
    let object = labelled("llama-3.1-70b", running(&[], 1, "NVIDIA-L40S"));
    starts_saying(
        &judge_images(&cluster, object),
        "the label gpu-admission/model on spec.template.spec names model 'llama-3.1-70b', but the label io.gpu-admission.model of image vllm/vllm-openai:v0.6.3 names 'qwen2.5-7b'",
    );
}

#[test]
fn image_memory_serves_models_the_registry_does_not_know() {
    let on_one_l4 = |labels: Value| {
        judge_images(
            &image_labelled(labels),
            unlabelled(running(&[], 1, "NVIDIA-L4")),
        )
    };
    denies(
        &on_one_l4(
            json!({"io.gpu-admission.model": "acme/chat-13b", "io.gpu-admission.vram-gib": "30"}),
        ),
        "model acme/chat-13b needs 30 GiB GPU memory (as given by label io.gpu-admission.vram-gib of image vllm/vllm-openai:v0.6.3); the pod asks for 1 x NVIDIA-L4 = 20 GiB usable at 90%. Request nvidia.com/gpu: 2 on NVIDIA-L4, or 1 on NVIDIA-A100-SXM4-40GB, or 1 on NVIDIA-L40S (nodeSelector nvidia.com/gpu.product).",
    );
    // A registered model keeps its registry entry.
    let v = on_one_l4(
        json!({"io.gpu-admission.model": "llama-3.1-8b", "io.gpu-admission.vram-gib": "60"}),
    );
    assert!(v.allowed, "{v:?}");
    // Memory alone, for an image that names no model.
    allows_recording(
        &on_one_l4(json!({"io.gpu-admission.vram-gib": "12"})),
        AUDIT_FIT,
        "model of image vllm/vllm-openai:v0.6.3 needs 12 GiB; the pod asks for 1 x NVIDIA-L4 = 20 GiB usable at 90%",
    );
}

#[rstest]
#[case::deny(json!({}), false, 0)]
#[case::warn(json!({"unknownModel": "warn"}), true, 1)]
#[case::allow(json!({"unknownModel": "allow"}), true, 0)]
fn an_unreadable_image_follows_unknown_model(
    #[case] extra: Value,
    #[case] allowed: bool,
    #[case] warnings: usize,
) {
    let mut s = json!({"imageLabels": {"enabled": true}});
    s.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let cluster = FakeCluster::images(vec![(
        "vllm/vllm-openai:v0.6.3",
        Err("Host error: unauthorized: authentication required".into()),
    )]);
    let v = evaluate(
        &request(
            "CREATE",
            labelled("llama-3.1-8b", running(&[], 1, "NVIDIA-L4")),
        ),
        &settings_with(s),
        &cluster,
    );
    assert_eq!(v.allowed, allowed, "{v:?}");
    assert_eq!(v.warnings.len(), warnings, "{v:?}");
    let text = "the config of image vllm/vllm-openai:v0.6.3 cannot be read (unauthorized: authentication required): check that the image exists and that the policy server can pull from its registry (imageLabels)";
    if allowed {
        if warnings > 0 {
            assert_eq!(v.warnings[0], format!("{text} (unknownModel: warn)"));
        }
        assert_eq!(audit(&v, AUDIT_MODEL), "meta-llama/Llama-3.1-8B-Instruct");
    } else {
        denies(&v, text);
    }
}

#[test]
fn each_image_is_read_once_and_only_when_enabled() {
    let cluster = image_labelled(json!({}));
    let lws = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "spec": {"leaderWorkerTemplate": {"size": 4,
            "leaderTemplate": {"metadata": {"labels": {"gpu-admission/model": "llama-3.1-70b"}}, "spec": running(&[], 2, "NVIDIA-A10G")},
            "workerTemplate": {"metadata": {"labels": {"gpu-admission/model": "llama-3.1-70b"}}, "spec": running(&[], 2, "NVIDIA-A10G")}}}});
    judge_images(&cluster, lws.clone());
    assert_eq!(cluster.image_calls.borrow().len(), 1);
    let cluster = FakeCluster::none();
    evaluate(&request("CREATE", lws), &settings_with(json!({})), &cluster);
    assert!(cluster.image_calls.borrow().is_empty());
}
