//! The rule end to end, on admission requests, with a fake cluster for the registry.

use super::*;
use crate::admission::AdmissionRequest;
use crate::cluster::{Cluster, ClusterRequest};
use crate::testing::{
    allows_noting, allows_recording, audit, denies, denies_saying, denies_starting, ends_saying,
    says, starts_saying,
};
use rstest::rstest;
use serde_json::{Value, json};
use std::cell::RefCell;

/// Serves the registry ConfigMap (or an error) and image configs, and records the calls.
struct FakeCluster {
    answer: Result<Value, String>,
    calls: RefCell<Vec<ClusterRequest>>,
    /// Image -> the labels of its config, or the host's error.
    images: Vec<(&'static str, Result<Value, String>)>,
    /// Image -> the `Env` of its config (none when not listed).
    envs: Vec<(&'static str, Value)>,
    image_calls: RefCell<Vec<String>>,
}

impl FakeCluster {
    fn none() -> Self {
        FakeCluster {
            answer: Err("no host calls expected".into()),
            calls: RefCell::new(Vec::new()),
            images: Vec::new(),
            envs: Vec::new(),
            image_calls: RefCell::new(Vec::new()),
        }
    }

    fn registry(models_yaml: &str) -> Self {
        FakeCluster {
            answer: Ok(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "gpu-models", "namespace": "gpu-system"},
                "data": {"models.yaml": models_yaml}})),
            ..FakeCluster::none()
        }
    }

    fn images(images: Vec<(&'static str, Result<Value, String>)>) -> Self {
        FakeCluster {
            images,
            ..FakeCluster::none()
        }
    }

    fn calls(&self) -> usize {
        self.calls.borrow().len()
    }
}

impl Cluster for FakeCluster {
    fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
        self.calls.borrow_mut().push(request.clone());
        self.answer.clone().map(|v| v.to_string().into_bytes())
    }

    fn oci_manifest_config(
        &self,
        request: &crate::cluster::OciManifestConfig,
    ) -> Result<Vec<u8>, String> {
        self.image_calls.borrow_mut().push(request.image.clone());
        match self.images.iter().find(|(i, _)| *i == request.image) {
            Some((_, Ok(labels))) => {
                let mut config = json!({"Labels": labels});
                if let Some((_, env)) = self.envs.iter().find(|(i, _)| *i == request.image) {
                    config["Env"] = env.clone();
                }
                Ok(
                    json!({"manifest": {}, "digest": "sha256:0", "config": {"config": config}})
                        .to_string()
                        .into_bytes(),
                )
            }
            Some((_, Err(e))) => Err(e.clone()),
            None => Err(format!("manifest unknown: {}", request.image)),
        }
    }
}

/// A models entry in bf16 with heads 128 wide: `billions` of parameters, `layers`, `kv_heads`,
/// `heads` attention heads, `context` tokens x `concurrency` sequences, also named `alias`.
fn bf16_model(
    billions: f64,
    [layers, kv_heads, heads]: [u64; 3],
    [context, concurrency]: [u64; 2],
    alias: &str,
) -> Value {
    let mut entry = json!({"parametersBillions": billions, "dtype": "bf16", "layers": layers,
        "kvHeads": kv_heads, "headDim": 128, "contextLength": context, "attentionHeads": heads,
        "aliases": [alias]});
    if concurrency > 1 {
        entry["concurrency"] = json!(concurrency);
    }
    entry
}

fn base_settings() -> Value {
    json!({
        "models": {
            "meta-llama/Llama-3.1-8B-Instruct": bf16_model(8.03, [32, 8, 32], [8192, 1], "llama-3.1-8b"),
            "meta-llama/Llama-3.1-70B-Instruct": bf16_model(70.6, [80, 8, 64], [8192, 8], "llama-3.1-70b"),
            "mistralai/Mixtral-8x7B-Instruct-v0.1": bf16_model(46.7, [32, 8, 32], [32768, 1], "mixtral-8x7b"),
            "Qwen/Qwen2.5-7B-Instruct": bf16_model(7.6, [28, 4, 28], [32768, 4], "qwen2.5-7b"),
            "bge-large": {"vramGiB": 2}
        },
        "customKinds": crate::workload::presets::all()
    })
}

/// The settings `base`, with the keys of `extra` set over it.
fn merged(mut base: Value, extra: Value) -> Settings {
    if let (Some(s), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(base).unwrap()
}

fn settings_with(extra: Value) -> Settings {
    merged(base_settings(), extra)
}

fn request(operation: &str, object: Value) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u", "operation": operation, "namespace": "ml",
        "kind": {"group": "", "version": "v1", "kind": object["kind"].clone()},
        "object": object
    }))
    .unwrap()
}

fn gpu_container(resource: &str, n: u64) -> Value {
    json!({"name": "server", "image": "vllm/vllm-openai", "resources": {"limits": {resource: n.to_string()}}})
}

fn pod_spec(resource: &str, n: u64, product: Option<&str>) -> Value {
    let mut spec = json!({"containers": [gpu_container(resource, n)]});
    if let Some(p) = product {
        spec["nodeSelector"] = json!({"nvidia.com/gpu.product": p});
    }
    spec
}

fn deployment(labels: Value, annotations: Value, spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llm", "namespace": "ml"},
        "spec": {"replicas": 2, "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec}}})
}

fn labelled(model: &str, spec: Value) -> Value {
    deployment(json!({"gpu-admission/model": model}), json!({}), spec)
}

/// A Deployment labelled `model` on `gpus` x `product` (nvidia.com/gpu).
fn model_on(model: &str, gpus: u64, product: &str) -> Value {
    labelled(model, pod_spec("nvidia.com/gpu", gpus, Some(product)))
}

/// The policy on `request`, with `settings` checked.
fn evaluate(request: &AdmissionRequest, settings: &Settings, cluster: &dyn Cluster) -> Verdict {
    use crate::policy::{Policy, checked};
    policy::VramFit::evaluate(request, &checked::<policy::VramFit>(settings), cluster)
}

fn run(settings: &Settings, object: Value) -> Verdict {
    evaluate(&request("CREATE", object), settings, &FakeCluster::none())
}

/// The policy on `object`, with the default settings.
fn judge(object: Value) -> Verdict {
    run(&settings_with(json!({})), object)
}

#[test]
fn design_example_70b_on_two_a10g_is_rejected_with_the_fix() {
    let object = deployment(
        json!({}),
        json!({"gpu-admission/model": "meta-llama/Llama-3.1-70B-Instruct"}),
        pod_spec("nvidia.com/gpu", 2, Some("NVIDIA-A10G")),
    );
    let v = judge(object);
    denies(
        &v,
        "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB GPU memory (weights 132 GiB bf16, KV cache 20 GiB for 8 x 8192 tokens, overhead 10%); the pod asks for 2 x NVIDIA-A10G = 40 GiB usable at 90%. It does not fit on NVIDIA-A10G with up to 8 GPUs per pod. Request nvidia.com/gpu: 2 on NVIDIA-H100-NVL, or 2 on NVIDIA-H200 (nodeSelector nvidia.com/gpu.product).",
    );
}

#[test]
fn a_fitting_model_is_accepted_with_the_numbers() {
    let v = judge(model_on("llama-3.1-8b", 1, "NVIDIA-L4"));
    assert!(v.allowed, "{v:?}");
    assert!(v.warnings.is_empty(), "{v:?}");
    assert_eq!(audit(&v, AUDIT_MODEL), "meta-llama/Llama-3.1-8B-Instruct");
    assert_eq!(audit(&v, AUDIT_NEED_MIB), "17975");
    assert_eq!(audit(&v, AUDIT_AVAILABLE_MIB), "20730");
    assert_eq!(
        audit(&v, AUDIT_FIT),
        "model meta-llama/Llama-3.1-8B-Instruct needs ~18 GiB; the pod asks for 1 x NVIDIA-L4 = 20 GiB usable at 90%"
    );
}

#[test]
fn every_models_entry_is_read_and_checked_with_the_settings() {
    use crate::policy::Policy;
    let check = |models: Value| {
        policy::VramFit::check(Box::new(settings_with(json!({"models": models}))))
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let good = json!({"llama-3.1-8b": {"vramGiB": 18}});
    assert_eq!(check(good.clone()), Ok(()));
    let mut broken = good.clone();
    broken["broken"] = json!({"parametersBillions": 7, "dtype": "bf17"});
    let e = check(broken).unwrap_err();
    assert!(
        e.starts_with("models[broken].dtype: 'bf17' is not a dtype"),
        "{e}"
    );
    let mut typo = good;
    typo["typo"] = json!({"vram": 7, "aliases": ["misspelt"]});
    let e = check(typo).unwrap_err();
    assert!(e.starts_with("models[typo]: unknown field `vram`"), "{e}");
}

#[test]
fn a_request_reads_the_models_entry_it_names() {
    // The settings as a request prepares them (a host sends only settings that checked):
    // an entry is read when a request names it, so one that never checked is found then.
    use crate::policy::Policy;
    let settings = settings_with(json!({"models": {
        "llama-3.1-8b": {"vramGiB": 18},
        "broken": {"parametersBillions": 7, "dtype": "bf17"},
        "typo": {"vram": 7, "aliases": ["misspelt"]}
    }}));
    let prepared = policy::VramFit::prepare(Box::new(settings)).expect("prepared");
    let run = |model: &str| {
        let object = labelled(model, pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-L4")));
        policy::VramFit::evaluate(&request("CREATE", object), &prepared, &FakeCluster::none())
    };
    let v = run("llama-3.1-8b");
    allows_recording(&v, AUDIT_NEED_MIB, "18432");
    let v = run("broken");
    starts_saying(
        &v,
        "gpu-vram-fit-policy has invalid settings: models[broken].dtype: 'bf17' is not a dtype",
    );
    let v = run("misspelt");
    starts_saying(
        &v,
        "gpu-vram-fit-policy has invalid settings: models[typo]: unknown field `vram`",
    );
}

// Unit tests against hand-computed figures (see catalog::model for the arithmetic):
// need (MiB) vs GPUs x MiB x 90%.
#[rstest]
// Llama-3.1-8B: 17,975 MiB; one L4 gives 20,730 MiB.
#[case::llama_8b_on_l4("llama-3.1-8b", "nvidia.com/gpu", 1, "NVIDIA-L4", true)]
// ... one T4 gives 13,824 MiB.
#[case::llama_8b_on_t4("llama-3.1-8b", "nvidia.com/gpu", 1, "Tesla-T4", false)]
// Llama-3.1-70B (8 x 8k): 170,653 MiB at TP 2 and 4; four H100s give 293,612 MiB.
#[case::llama_70b_on_4_h100("llama-3.1-70b", "nvidia.com/gpu", 4, "NVIDIA-H100-80GB-HBM3", true)]
// ... two A100-80GB give 147,456 MiB.
#[case::llama_70b_on_2_a100("llama-3.1-70b", "nvidia.com/gpu", 2, "NVIDIA-A100-SXM4-80GB", false)]
// Mixtral-8x7B (all 46.7B parameters, 32k x 1): 102,487 MiB; two A100-80GB give 147,456.
#[case::mixtral_on_2_a100("mixtral-8x7b", "nvidia.com/gpu", 2, "NVIDIA-A100-SXM4-80GB", true)]
// ... one H100 NVL gives 86,247 MiB.
#[case::mixtral_on_1_h100_nvl("mixtral-8x7b", "nvidia.com/gpu", 1, "NVIDIA-H100-NVL", false)]
// Qwen2.5-7B (32k x 4, 4 KV heads): 23,831 MiB; two L4 give 41,460 (20,730 each).
#[case::qwen_on_2_l4("qwen2.5-7b", "nvidia.com/gpu", 2, "NVIDIA-L4", true)]
// ... one L40S gives 41,461 MiB.
#[case::qwen_on_l40s("qwen2.5-7b", "nvidia.com/gpu", 1, "NVIDIA-L40S", true)]
// ... one A10G gives 20,725 MiB.
#[case::qwen_on_a10g("qwen2.5-7b", "nvidia.com/gpu", 1, "NVIDIA-A10G", false)]
fn known_models_on_known_gpus(
    #[case] model: &str,
    #[case] resource: &str,
    #[case] n: u64,
    #[case] product: &str,
    #[case] fits: bool,
) {
    let v = judge(labelled(model, pod_spec(resource, n, Some(product))));
    assert_eq!(v.allowed, fits, "{v:?}");
}

#[test]
fn qwen_on_eight_gpus_replicates_kv_heads_and_warns_about_tensor_parallel() {
    // 8 GPUs > 4 KV heads: the KV cache doubles; 8 does not divide 28 attention heads.
    let v = judge(model_on("qwen2.5-7b", 8, "NVIDIA-L4"));
    allows_recording(&v, AUDIT_NEED_MIB, "31716");
    assert_eq!(
        v.warnings,
        vec![
            "8 GPUs per pod: tensor parallel size 8 does not divide the 28 attention heads of Qwen/Qwen2.5-7B-Instruct; vLLM refuses it (use 1, 2, 4, 7)",
            "over-provisioned: model Qwen/Qwen2.5-7B-Instruct needs ~31 GiB, and the pod asks for 8 x NVIDIA-L4 = 161 GiB usable at 90%; nvidia.com/gpu: 2 on NVIDIA-L4 holds it in half the GPU memory or less (40 GiB usable): request that instead (overprovision: warn)"
        ]
    );
}

#[rstest]
#[case::fits("nvidia.com/mig-3g.40gb", true)]
#[case::too_small("nvidia.com/mig-1g.10gb", false)]
fn mig_slices_give_their_profile_memory(#[case] resource: &str, #[case] fits: bool) {
    let v = judge(labelled("llama-3.1-8b", pod_spec(resource, 1, None)));
    assert_eq!(v.allowed, fits, "{v:?}");
    if !fits {
        denies(
            &v,
            "model meta-llama/Llama-3.1-8B-Instruct needs ~18 GiB GPU memory (weights 15 GiB bf16, KV cache 1 GiB for 1 x 8192 tokens, overhead 10%); the pod asks for 1 x MIG 1g.10gb = 9 GiB usable at 90%. Request nvidia.com/mig-1g.20gb: 1, or nvidia.com/gpu: 1 on NVIDIA-A10G, or 1 on NVIDIA-L4 (nodeSelector nvidia.com/gpu.product).",
        );
    }
}

#[test]
fn mig_slices_do_not_add_up() {
    // Four 1g.10gb slices are not 40 GB for one model server: a CUDA process sees one.
    let v = judge(labelled(
        "llama-3.1-8b",
        pod_spec("nvidia.com/mig-1g.10gb", 4, None),
    ));
    denies_saying(
        &v,
        "asks for 4 x MIG 1g.10gb (MIG devices do not combine: counted as one per pod) = 9 GiB usable",
    );
}

#[test]
fn mig_profile_memory_can_be_overridden() {
    let s = settings_with(json!({"migProfiles": {"3g.40gb": 19000}}));
    let v = run(
        &s,
        labelled("llama-3.1-8b", pod_spec("nvidia.com/mig-3g.40gb", 1, None)),
    );
    assert!(!v.allowed, "19000 MiB x 90% < 17975 MiB needed");
}

#[test]
fn time_sliced_gpus_count_once() {
    let v = judge(model_on("qwen2.5-7b", 4, "NVIDIA-A10G-SHARED"));
    denies_saying(
        &v,
        "4 x NVIDIA-A10G-SHARED (time-sliced: counted as one GPU's memory per pod) = 20 GiB usable",
    );
}

#[test]
fn time_sliced_replicas_are_one_device_for_tensor_parallelism() {
    // Found by the property tests: replicas of a time-sliced GPU were taken as the
    // tensor-parallel size (KV heads replicated up to it) while counting as one GPU's
    // memory, so 1 replica could fit and 2 not. Replicas of one GPU are one device.
    // Qwen2.5-7B has 4 KV heads: at tensor parallel 8 it would need 31,716 MiB.
    let s = settings_with(json!({}));
    for n in [1, 2, 8, 16] {
        let v = run(&s, model_on("qwen2.5-7b", n, "NVIDIA-L40S-SHARED"));
        assert!(v.allowed, "{n} replicas: {v:?}");
        assert_eq!(audit(&v, AUDIT_NEED_MIB), "23831", "{n} replicas");
        assert!(v.warnings.is_empty(), "no tensor-parallel warning: {v:?}");
    }
}

#[test]
fn required_affinity_with_several_products_is_judged_on_the_smallest() {
    let spec = json!({"containers": [gpu_container("nvidia.com/gpu", 1)],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
              "values": ["NVIDIA-L40S", "NVIDIA-A10G"]}]}]}}}});
    let v = judge(labelled("qwen2.5-7b", spec));
    assert!(!v.allowed, "would fit on L40S but may land on an A10G");
    says(&v, "1 x NVIDIA-A10G =");
}

#[test]
fn pools_give_the_product_and_are_suggested() {
    let s = settings_with(
        json!({"poolProducts": {"small": "NVIDIA-L4", "large": "NVIDIA-H100-80GB-HBM3"}}),
    );
    let object = deployment(
        json!({"gpu-admission/model": "mixtral-8x7b", "gpu-admission/pool": "small"}),
        json!({}),
        pod_spec("nvidia.com/gpu", 1, None),
    );
    let v = run(&s, object);
    assert!(!v.allowed);
    ends_saying(
        &v,
        "the pod asks for 1 x NVIDIA-L4 = 20 GiB usable at 90%. Request nvidia.com/gpu: 8 on NVIDIA-L4, or 2 in pool large (NVIDIA-H100-80GB-HBM3) (pod label gpu-admission/pool); counts are tensor-parallel sizes that divide the model's 32 attention heads.",
    );
}

/// What a verdict of [`what_is_not_checked_follows_the_setting`] says, checked whole.
enum Says {
    Message(&'static str),
    Fit(&'static str),
    Warning(&'static str),
    Nothing,
}

const UNKNOWN_GPU: &str = "cannot check that model meta-llama/Llama-3.1-8B-Instruct fits: the GPU type is unknown: select one with nodeSelector nvidia.com/gpu.product: <product> (e.g. NVIDIA-L4, NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3) or a pool with the pod label gpu-admission/pool";
const GPU_NOT_CHECKED: &str = "not checked: the GPU type of spec.template.spec is unknown";
const UNKNOWN_MODEL: &str = "model 'gpt-j-6b' (label gpu-admission/model on spec.template.spec) is not in the model registry, so its GPU memory cannot be checked: name a registered model, or ask the cluster admins to add it to the policy's models setting (vramGiB, or parametersBillions, dtype, layers, kvHeads, headDim, contextLength)";
const MODEL_NOT_CHECKED: &str =
    "GPU memory not checked: model 'gpt-j-6b' is not in the model registry (unknownModel: warn)";
const NO_MODEL: &str = "this GPU workload names no model, so its GPU memory cannot be checked: add the pod-template label gpu-admission/model: <model> or the annotation gpu-admission/model (for ids with '/', like meta-llama/Llama-3.1-8B-Instruct)";
const NO_MODEL_NOT_CHECKED: &str = "not checked: the workload names no model";

fn unknown_gpu() -> Value {
    labelled("llama-3.1-8b", pod_spec("nvidia.com/gpu", 1, None))
}

fn unknown_model() -> Value {
    model_on("gpt-j-6b", 1, "NVIDIA-L4")
}

fn no_model() -> Value {
    deployment(
        json!({"app": "train"}),
        json!({}),
        pod_spec("nvidia.com/gpu", 8, None),
    )
}

#[rstest]
#[case::unknown_gpu_deny(unknown_gpu(), json!({}), false, 0, Says::Message(UNKNOWN_GPU))]
#[case::unknown_gpu_warn(unknown_gpu(), json!({"unknownGpu": "warn"}), true, 1, Says::Fit(GPU_NOT_CHECKED))]
#[case::unknown_gpu_allow(unknown_gpu(), json!({"unknownGpu": "allow"}), true, 0, Says::Fit(GPU_NOT_CHECKED))]
#[case::unknown_model_deny(unknown_model(), json!({}), false, 0, Says::Message(UNKNOWN_MODEL))]
#[case::unknown_model_warn(unknown_model(), json!({"unknownModel": "warn"}), true, 1, Says::Warning(MODEL_NOT_CHECKED))]
#[case::unknown_model_allow(unknown_model(), json!({"unknownModel": "allow"}), true, 0, Says::Nothing)]
#[case::no_model_allow_by_default(no_model(), json!({}), true, 0, Says::Fit(NO_MODEL_NOT_CHECKED))]
#[case::no_model_warn(no_model(), json!({"noModel": "warn"}), true, 1, Says::Fit(NO_MODEL_NOT_CHECKED))]
#[case::no_model_deny(no_model(), json!({"noModel": "deny"}), false, 0, Says::Message(NO_MODEL))]
fn what_is_not_checked_follows_the_setting(
    #[case] object: Value,
    #[case] extra: Value,
    #[case] allowed: bool,
    #[case] warnings: usize,
    #[case] says: Says,
) {
    let v = run(&settings_with(extra), object);
    assert_eq!((v.allowed, v.warnings.len()), (allowed, warnings), "{v:?}");
    match says {
        Says::Message(m) => denies(&v, m),
        Says::Fit(fit) => assert_eq!(audit(&v, AUDIT_FIT), fit),
        Says::Warning(w) => assert_eq!(v.warnings[0], w),
        Says::Nothing => {}
    }
}

#[test]
fn label_wins_over_annotation_and_custom_keys_work() {
    let object = deployment(
        json!({"gpu-admission/model": "llama-3.1-8b"}),
        json!({"gpu-admission/model": "meta-llama/Llama-3.1-70B-Instruct"}),
        pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-L4")),
    );
    assert!(judge(object).allowed);
    let custom =
        settings_with(json!({"modelLabelKey": "", "modelAnnotationKey": "example.com/model"}));
    let object = deployment(
        json!({"gpu-admission/model": "llama-3.1-8b"}),
        json!({"example.com/model": "meta-llama/Llama-3.1-70B-Instruct"}),
        pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-L4")),
    );
    assert!(!run(&custom, object).allowed);
}

#[test]
fn caps_by_workload_type() {
    let s = settings_with(
        json!({"modelMemoryCaps": {"labelKey": "gpu-admission/workload-type",
        "maxGiB": {"interactive": 40, "batch": 400}}}),
    );
    let object = |kind: &str| {
        deployment(
            json!({"gpu-admission/model": "llama-3.1-70b", "gpu-admission/workload-type": kind}),
            json!({}),
            pod_spec("nvidia.com/gpu", 4, Some("NVIDIA-H100-80GB-HBM3")),
        )
    };
    let v = run(&s, object("interactive"));
    denies(
        &v,
        "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB GPU memory (weights 132 GiB bf16, KV cache 20 GiB for 8 x 8192 tokens, overhead 10%), more than the 40 GiB allowed for gpu-admission/workload-type=interactive workloads: serve a smaller or quantized model, lower its contextLength or concurrency, or use another gpu-admission/workload-type",
    );
    assert!(run(&s, object("batch")).allowed);
    assert!(run(&s, object("training")).allowed, "no cap for that value");
}

#[rstest]
// Found by the property tests (shared/tests/vram_properties.rs): one KV head, so every GPU
// added replicates it and the need grows by ~44,042 MiB per GPU. With the usable
// percentage taken of the sum, 7 H100s at 54% gave 308,293 MiB (7 x 81,559 x 0.54 =
// 308,293.02) for a need of 308,293, but 8 gave 352,334 for 352,335: accepted on 7,
// denied on 8. Per device (44,041 MiB each) the model fits on no count.
#[case::at_the_old_limit(59_634_655, None)]
#[case::just_below(59_630_000, Some(1))]
fn one_more_gpu_never_turns_a_fit_into_a_misfit(
    #[case] context_length: u64,
    #[case] fits_from: Option<u64>,
) {
    let s = settings_with(json!({
        "models": {"m": {"parametersBillions": "0.001", "dtype": "fp8", "layers": 2,
            "kvHeads": 1, "headDim": 88, "contextLength": context_length}},
        "usableMemoryPercent": 54
    }));
    let accepted: Vec<u64> = (1..=10)
        .filter(|n| {
            let object = model_on("m", *n, "NVIDIA-H100-80GB-HBM3");
            run(&s, object).allowed
        })
        .collect();
    let expected: Vec<u64> = fits_from.map(|n| (n..=10).collect()).unwrap_or_default();
    assert_eq!(accepted, expected);
}

#[test]
fn leader_worker_set_is_judged_on_the_whole_group() {
    let lws = |size: u64| {
        let template = json!({"metadata": {"labels": {"gpu-admission/model": "llama-3.1-70b"}},
            "spec": pod_spec("nvidia.com/gpu", 2, Some("NVIDIA-A10G"))});
        json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "llama"},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": size,
                "leaderTemplate": template, "workerTemplate": template}}})
    };
    let s = settings_with(json!({}));
    let small = run(&s, lws(4));
    denies_saying(
        &small,
        "the LeaderWorkerSet group of 4 pods (1 leader + 3 workers) asks for 8 x NVIDIA-A10G = 161 GiB usable at 90%. Request nvidia.com/gpu: 4 per pod on NVIDIA-A10G, or 1 per pod on NVIDIA-H100-80GB-HBM3, or 1 per pod on NVIDIA-A100-SXM4-80GB (nodeSelector nvidia.com/gpu.product); counts are tensor-parallel sizes that divide the model's 64 attention heads.",
    );
    let big = run(&s, lws(5));
    allows_recording(
        &big,
        AUDIT_FIT,
        "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB; the LeaderWorkerSet group of 5 pods (1 leader + 4 workers) asks for 10 x NVIDIA-A10G = 202 GiB usable at 90%",
    );
}

/// The 70B model on 2 L40S per pod, from its storageUri (`workers`: pipeline size, GPUs each).
fn kserve_70b_on_l40s(s: &Settings, workers: Option<(u64, u64)>) -> Verdict {
    run(
        s,
        inference_service(
            "hf://meta-llama/Llama-3.1-70B-Instruct",
            2,
            "NVIDIA-L40S",
            workers,
        ),
    )
}

fn inference_service(
    storage_uri: &str,
    gpus: u64,
    product: &str,
    workers: Option<(u64, u64)>,
) -> Value {
    let mut predictor = json!({
        "nodeSelector": {"nvidia.com/gpu.product": product},
        "model": {"modelFormat": {"name": "huggingface"}, "storageUri": storage_uri,
                  "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}
    });
    if let Some((pipeline, worker_gpus)) = workers {
        predictor["workerSpec"] = json!({"pipelineParallelSize": pipeline,
            "nodeSelector": {"nvidia.com/gpu.product": product},
            "containers": [gpu_container("nvidia.com/gpu", worker_gpus)]});
    }
    json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "llm", "namespace": "ml", "labels": {"gpu-admission/model": "bge-large"}},
        "spec": {"predictor": predictor}})
}

#[test]
fn kserve_model_uri_and_model_resources_are_read() {
    let s = settings_with(json!({}));
    // The label names a 2 GiB model, but the URI is what is loaded.
    let v = kserve_70b_on_l40s(&s, None);
    denies_starting(&v, "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB");
    let fits = run(
        &s,
        inference_service(
            "hf://meta-llama/Llama-3.1-8B-Instruct",
            1,
            "NVIDIA-L40S",
            None,
        ),
    );
    assert!(fits.allowed, "{fits:?}");
    let unknown = run(
        &s,
        inference_service("s3://models/llama-70b/", 1, "NVIDIA-L40S", None),
    );
    starts_saying(
        &unknown,
        "model 's3://models/llama-70b/' (spec.predictor.model.storageUri) is not in the model registry",
    );
}

#[test]
fn kserve_multi_node_is_judged_on_head_and_workers() {
    let s = settings_with(json!({}));
    // 1 head + 2 workers, 2 L40S each: 6 x 46,068 x 90% = 248,767 MiB >= 170,653.
    let v = kserve_70b_on_l40s(&s, Some((3, 2)));
    allows_noting(
        &v,
        AUDIT_FIT,
        "the multi-node predictor of 3 pods (1 head + 2 workers) asks for 6 x NVIDIA-L40S",
    );
}

#[test]
fn ray_cluster_is_one_group() {
    let s = settings_with(json!({}));
    let labels = json!({"gpu-admission/model": "llama-3.1-70b"});
    let ray = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"},
        "spec": {"headGroupSpec": {"template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "head"}]}}},
                 "workerGroupSpecs": [{"replicas": 2, "template": {"spec": pod_spec("nvidia.com/gpu", 2, Some("NVIDIA-A100-SXM4-80GB"))}}]}});
    let v = run(&s, ray);
    allows_noting(
        &v,
        AUDIT_FIT,
        "the RayCluster of 3 pods (1 head + 2 workers) asks for 4 x NVIDIA-A100-SXM4-80GB",
    );
}

#[test]
fn a_group_naming_two_models_is_rejected() {
    let s = settings_with(json!({}));
    let lws = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "spec": {"leaderWorkerTemplate": {"size": 2,
            "leaderTemplate": {"metadata": {"labels": {"gpu-admission/model": "llama-3.1-8b"}}, "spec": pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-L4"))},
            "workerTemplate": {"metadata": {"labels": {"gpu-admission/model": "qwen2.5-7b"}}, "spec": pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-L4"))}}}});
    let v = run(&s, lws);
    denies(
        &v,
        "the LeaderWorkerSet group names several models ('llama-3.1-8b' (label gpu-admission/model on spec.leaderWorkerTemplate.leaderTemplate.spec), 'qwen2.5-7b' (label gpu-admission/model on spec.leaderWorkerTemplate.workerTemplate.spec)); the pods of one serving unit serve one model: name the same model on every template",
    );
}

#[rstest]
#[case::pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"gpu-admission/model": "qwen2.5-7b"}},
    "spec": pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-A10G"))}))]
#[case::statefulset(json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"template": {"metadata": {"labels": {"gpu-admission/model": "qwen2.5-7b"}},
    "spec": pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-A10G"))}}}))]
#[case::daemonset(json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "spec": {"template": {"metadata": {"labels": {"gpu-admission/model": "qwen2.5-7b"}},
    "spec": pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-A10G"))}}}))]
#[case::replicaset(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "spec": {"replicas": 0, "template": {"metadata": {"labels": {"gpu-admission/model": "qwen2.5-7b"}},
    "spec": pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-A10G"))}}}))]
#[case::replication_controller(json!({"apiVersion": "v1", "kind": "ReplicationController", "spec": {"template": {"metadata": {"labels": {"gpu-admission/model": "qwen2.5-7b"}},
    "spec": pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-A10G"))}}}))]
#[case::job(json!({"apiVersion": "batch/v1", "kind": "Job", "spec": {"parallelism": 3, "template": {"metadata": {"labels": {"gpu-admission/model": "qwen2.5-7b"}},
    "spec": pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-A10G"))}}}))]
#[case::cronjob(json!({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"metadata": {"labels": {"gpu-admission/model": "qwen2.5-7b"}},
    "spec": pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-A10G"))}}}}}))]
#[case::pytorch_job(json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4, "template": {"metadata": {"labels": {"gpu-admission/model": "qwen2.5-7b"}},
    "spec": pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-A10G"))}}}}}))]
fn every_kind_is_checked(#[case] object: Value) {
    // Qwen2.5-7B (23,831 MiB) does not fit one A10G (20,725 MiB usable), whatever the kind.
    let v = judge(object);
    denies_saying(
        &v,
        "the pod asks for 1 x NVIDIA-A10G = 20 GiB usable at 90%. Request nvidia.com/gpu: 2 on NVIDIA-A10G",
    );
}

#[test]
fn gpus_in_init_and_ephemeral_containers_count_and_request_problems_are_denied() {
    let s = settings_with(json!({}));
    let spec = json!({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
        "containers": [{"name": "app"}], "initContainers": [gpu_container("nvidia.com/gpu", 2)]});
    let v = run(&s, labelled("qwen2.5-7b", spec));
    assert!(
        v.allowed,
        "the init container's 2 L4s are the pod's GPUs: {v:?}"
    );
    // The 8B model, its one container c on an L4 with `resources`.
    let asking = |resources: Value| {
        let spec = json!({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
            "containers": [{"name": "c", "resources": resources}]});
        run(&s, labelled("llama-3.1-8b", spec))
    };
    denies(
        &asking(json!({"requests": {"nvidia.com/gpu": "1"}})),
        "the GPU request cannot be counted: container 'c' requests nvidia.com/gpu: 1 without a limit; set resources.limits.nvidia.com/gpu: 1",
    );
    denies_starting(
        &asking(json!({"limits": {"nvidia.com/gpu": "0.5"}})),
        "the GPU request cannot be counted: container 'c' asks for nvidia.com/gpu:",
    );
}

#[test]
fn non_gpu_workloads_and_other_operations_pass_without_host_calls() {
    let s =
        settings_with(json!({"modelRegistry": {"namespace": "gpu-system", "name": "gpu-models"}}));
    let cluster = FakeCluster::none();
    let cpu = deployment(
        json!({"gpu-admission/model": "llama-3.1-8b"}),
        json!({}),
        json!({"containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}}}]}),
    );
    let v = evaluate(&request("CREATE", cpu.clone()), &s, &cluster);
    assert!(v.allowed && v.audit_annotations.is_empty(), "{v:?}");
    let v = evaluate(&request("DELETE", Value::Null), &s, &cluster);
    assert!(v.allowed);
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {}});
    assert!(evaluate(&request("CREATE", svc), &s, &cluster).allowed);
    assert_eq!(cluster.calls(), 0);
}

#[test]
fn exempt_namespaces_are_not_checked() {
    let s = settings_with(json!({"exemptNamespaces": ["ml"]}));
    let v = run(&s, model_on("llama-3.1-70b", 1, "Tesla-T4"));
    allows_recording(
        &v,
        crate::policy::AUDIT_EXEMPT,
        "namespace ml is in exemptNamespaces: not checked",
    );
}

#[test]
fn unconfigured_custom_kinds_are_noted() {
    let s: Settings = serde_json::from_value(json!({})).unwrap();
    let isvc = inference_service("hf://x/y", 1, "NVIDIA-L4", None);
    let v = run(&s, isvc);
    allows_recording(
        &v,
        AUDIT_FIT,
        "not checked: serving.kserve.io/InferenceService is not in customKinds, so its pod templates are unknown",
    );
}

#[test]
fn updates_that_change_nothing_relevant_pass_and_others_are_judged() {
    let s = settings_with(json!({}));
    let old = model_on("llama-3.1-70b", 1, "NVIDIA-L4");
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"team": "a"});
    relabelled["spec"]["replicas"] = json!(0);
    let mut update = request("UPDATE", relabelled);
    update.old_object = old.clone();
    let v = evaluate(&update, &s, &FakeCluster::none());
    allows_recording(
        &v,
        AUDIT_FIT,
        "not checked again: this update changes none of its GPUs, GPU products, pools or model",
    );
    let mut more_gpus = old.clone();
    more_gpus["spec"]["template"]["spec"] = pod_spec("nvidia.com/gpu", 2, Some("NVIDIA-L4"));
    let mut update = request("UPDATE", more_gpus);
    update.old_object = old;
    assert!(!evaluate(&update, &s, &FakeCluster::none()).allowed);
}

#[test]
fn the_registry_configmap_is_read_once_and_only_when_needed() {
    let s =
        settings_with(json!({"modelRegistry": {"namespace": "gpu-system", "name": "gpu-models"}}));
    let cluster = FakeCluster::registry("phi-4: {vramGiB: 32}\nllama-3.1-8b: {vramGiB: 64}\n");
    let job = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": {
        "Master": {"template": {"metadata": {"labels": {"gpu-admission/model": "phi-4"}}, "spec": pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-A100-SXM4-80GB"))}},
        "Worker": {"template": {"metadata": {"labels": {"gpu-admission/model": "phi-4"}}, "spec": pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-L4"))}}}}});
    let v = evaluate(&request("CREATE", job), &s, &cluster);
    assert_eq!(cluster.calls(), 1, "two units, one host call");
    denies_starting(
        &v,
        "spec.pytorchReplicaSpecs.Worker.template.spec: model phi-4 needs 32 GiB GPU memory (as given in the model registry); the pod asks for 1 x NVIDIA-L4",
    );
    // The ConfigMap overrides the settings entry of the same alias.
    let cluster = FakeCluster::registry("llama-3.1-8b: {vramGiB: 64}\n");
    let v = evaluate(
        &request("CREATE", model_on("llama-3.1-8b", 1, "NVIDIA-L4")),
        &s,
        &cluster,
    );
    denies_starting(&v, "model llama-3.1-8b needs 64 GiB");
}

#[test]
fn a_missing_registry_configmap_is_a_clear_denial() {
    let s =
        settings_with(json!({"modelRegistry": {"namespace": "gpu-system", "name": "gpu-models"}}));
    let cluster = FakeCluster {
        answer: Err(
            "Cannot find v1/ConfigMap named 'gpu-models' inside of namespace 'gpu-system'".into(),
        ),
        ..FakeCluster::none()
    };
    let v = evaluate(
        &request("CREATE", model_on("llama-3.1-8b", 1, "NVIDIA-L4")),
        &s,
        &cluster,
    );
    denies_starting(
        &v,
        "the model registry ConfigMap gpu-system/gpu-models cannot be read (not found)",
    );
}

#[rstest]
#[case::containers_not_a_list(json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": {"containers": "x"}}}}),
    "Deployment cannot be read, so it is denied: spec.template.spec: invalid type")]
#[case::no_kind(json!({"spec": {}}), "object cannot be read, so it is denied: the object has no kind or apiVersion")]
#[case::replicas_string(json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "spec": {"leaderWorkerTemplate": {"size": "four", "workerTemplate": {"spec": {}}}}}),
    "LeaderWorkerSet cannot be read, so it is denied: spec.leaderWorkerTemplate.size: must be a non-negative integer")]
#[case::kserve_model_garbage(json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "spec": {"predictor": {"model": {"resources": {"limits": "x"}}}}}),
    "InferenceService cannot be read, so it is denied: spec.predictor.model: invalid type")]
fn malformed_objects_are_rejected_not_panics(#[case] object: Value, #[case] prefix: &str) {
    let v = judge(object);
    denies_starting(&v, prefix);
}

#[test]
fn invalid_settings_reject_rather_than_guess() {
    // Refused before the rules run (the waPC glue says `gpu-vram-fit-policy has invalid
    // settings: <this>`), so the rules never guess a percentage.
    use crate::policy::Policy;
    let s: Settings = serde_json::from_value(json!({"usableMemoryPercent": 0})).unwrap();
    let Err(e) = policy::VramFit::check(Box::new(s)) else {
        panic!("0% usable memory checks");
    };
    assert_eq!(
        e.to_string(),
        "usableMemoryPercent: must be a whole number from 1 to 100, got '0'"
    );
}

#[test]
fn usable_percent_changes_the_verdict() {
    // Llama-3.1-8B needs 17,975 MiB; one L4 is 23,034 MiB: fits at 90% (20,730), not at 75% (17,275).
    let object = model_on("llama-3.1-8b", 1, "NVIDIA-L4");
    assert!(
        run(
            &settings_with(json!({"usableMemoryPercent": 90})),
            object.clone()
        )
        .allowed
    );
    assert!(!run(&settings_with(json!({"usableMemoryPercent": 75})), object).allowed);
}

#[test]
fn custom_products_from_settings() {
    let s = settings_with(json!({"gpuProducts": {"NVIDIA-RTX-PRO-6000": 97887}}));
    let v = run(&s, model_on("mixtral-8x7b", 2, "NVIDIA-RTX-PRO-6000"));
    assert!(v.allowed, "{v:?}");
}

#[test]
fn kserve_model_gpus_count_with_a_written_out_description_too() {
    // A description without `containers` must not hide spec.predictor.model's GPUs.
    let mut kserve = crate::workload::presets::kserve_inference_service();
    for t in &mut kserve.templates {
        t.containers.clear();
    }
    let s = settings_with(json!({"customKinds": [kserve]}));
    let v = kserve_70b_on_l40s(&s, None);
    denies_saying(
        &v,
        "the pod asks for 2 x NVIDIA-L40S = 80 GiB usable at 90%",
    );
}

mod inventory;
mod server_args;
