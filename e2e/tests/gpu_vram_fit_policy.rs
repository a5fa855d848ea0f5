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

use std::collections::{BTreeSet, HashMap};

use common::PolicyUnderTest;
use common::dates::{
    DatedException, assert_more_than_30_days_ahead, civil_from_days, days_from_civil,
};
use common::manifests::yaml_documents;
use gpu_e2e::metadata::Metadata;
use gpu_e2e::{CallbackRequest, ContextAwareAccess, Exchange, RecordedResponse, ReplaySession};
use serde_json::{Value, json};

const POLICY: PolicyUnderTest = PolicyUnderTest("gpu-vram-fit-policy");

/// What one request must produce.
struct Case {
    request: &'static str,
    settings: &'static str,
    session: Option<&'static str>,
    /// `None`: allowed; `Some(message)`: denied with exactly this message.
    denied: Option<&'static str>,
    warnings: &'static [&'static str],
    /// Audit annotations that must be present with these values.
    audit: &'static [(&'static str, &'static str)],
    /// Quoted verbatim in the README.
    in_readme: bool,
}

const S: &str = "settings.yml";

const fn allowed(
    request: &'static str,
    settings: &'static str,
    audit: &'static [(&'static str, &'static str)],
) -> Case {
    Case {
        request,
        settings,
        session: None,
        denied: None,
        warnings: &[],
        audit,
        in_readme: false,
    }
}

const fn denied(
    request: &'static str,
    settings: &'static str,
    message: &'static str,
    in_readme: bool,
) -> Case {
    Case {
        request,
        settings,
        session: None,
        denied: Some(message),
        warnings: &[],
        audit: &[],
        in_readme,
    }
}

/// The denial of deployment_llama_70b_on_2_a10g.json under settings.yml.
const LLAMA_70B_ON_2_A10G: &str = "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB GPU memory (weights 132 GiB bf16, KV cache 20 GiB for 8 x 8192 tokens, overhead 10%); the pod asks for 2 x NVIDIA-A10G = 40 GiB usable at 90%. It does not fit on NVIDIA-A10G with up to 8 GPUs per pod. Request nvidia.com/gpu: 2 on NVIDIA-H100-NVL, or 2 on NVIDIA-H200 (nodeSelector nvidia.com/gpu.product).";
/// settings_exceptions.yml's exception (until 2027-09-27: renew the fixture before then).
const EXCEPTION_AUDIT: &str =
    "exception=llama-70b-a10g-trial owner=serving-team@example.com expires=2027-09-28T00:00:00Z";
/// The first second settings_exceptions.yml's exception no longer applies.
const FIXTURE_EXCEPTION_ENDS: &str = "2027-09-28T00:00:00Z";
const LLAMA_70B_EXPIRED: &str = "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB GPU memory (weights 132 GiB bf16, KV cache 20 GiB for 8 x 8192 tokens, overhead 10%); the pod asks for 2 x NVIDIA-A10G = 40 GiB usable at 90%. It does not fit on NVIDIA-A10G with up to 8 GPUs per pod. Request nvidia.com/gpu: 2 on NVIDIA-H100-NVL, or 2 on NVIDIA-H200 (nodeSelector nvidia.com/gpu.product). (exception llama-70b-a10g-trial (owner serving-team@example.com) expired at 2026-11-16T00:00:00Z; renew it or fix the workload)";

const CASES: &[Case] = &[
    // Exceptions: the denial below excused (accepted, with what was excused), then named
    // as expired.
    allowed(
        "deployment_llama_70b_on_2_a10g.json",
        "settings_exceptions.yml",
        &[
            ("exception", EXCEPTION_AUDIT),
            ("excused", LLAMA_70B_ON_2_A10G),
        ],
    ),
    denied(
        "deployment_llama_70b_on_2_a10g.json",
        "settings_exceptions_expired.yml",
        LLAMA_70B_EXPIRED,
        true,
    ),
    // The DESIGN.md example: a 70B model on two 24 GB cards.
    denied(
        "deployment_llama_70b_on_2_a10g.json",
        S,
        "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB GPU memory (weights 132 GiB bf16, KV cache 20 GiB for 8 x 8192 tokens, overhead 10%); the pod asks for 2 x NVIDIA-A10G = 40 GiB usable at 90%. It does not fit on NVIDIA-A10G with up to 8 GPUs per pod. Request nvidia.com/gpu: 2 on NVIDIA-H100-NVL, or 2 on NVIDIA-H200 (nodeSelector nvidia.com/gpu.product).",
        true,
    ),
    allowed(
        "deployment_llama_8b_on_l4.json",
        S,
        &[
            (
                "vram-fit",
                "model meta-llama/Llama-3.1-8B-Instruct needs ~18 GiB; the pod asks for 1 x NVIDIA-L4 = 20 GiB usable at 90%",
            ),
            ("vram-model", "meta-llama/Llama-3.1-8B-Instruct"),
            ("vram-need-mib", "17975"),
            ("vram-available-mib", "20730"),
        ],
    ),
    allowed(
        "deployment_llama_70b_on_4_h100.json",
        S,
        &[
            ("vram-need-mib", "170653"),
            ("vram-available-mib", "293612"),
        ],
    ),
    denied(
        "deployment_unknown_model.json",
        S,
        "model 'EleutherAI/gpt-j-6b' (argument --model of container vllm on spec.template.spec) is not in the model registry, so its GPU memory cannot be checked: name a registered model, or ask the cluster admins to add it to the policy's models setting (vramGiB, or parametersBillions, dtype, layers, kvHeads, headDim, contextLength)",
        true,
    ),
    Case {
        warnings: &[
            "GPU memory not checked: model 'EleutherAI/gpt-j-6b' is not in the model registry (unknownModel: warn)",
        ],
        audit: &[(
            "vram-fit",
            "not checked: model 'EleutherAI/gpt-j-6b' is not in the model registry",
        )],
        in_readme: true,
        ..allowed("deployment_unknown_model.json", "settings_warn.yml", &[])
    },
    denied(
        "deployment_unknown_gpu.json",
        S,
        "cannot check that model meta-llama/Llama-3.1-8B-Instruct fits: the GPU type is unknown: select one with nodeSelector nvidia.com/gpu.product: <product> (e.g. NVIDIA-L4, NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3) or a pool with the pod label gpu-admission/pool",
        true,
    ),
    Case {
        warnings: &[
            "GPU memory not checked: the GPU type of spec.template.spec is unknown (unknownGpu: warn)",
        ],
        in_readme: true,
        ..allowed("deployment_unknown_gpu.json", "settings_warn.yml", &[])
    },
    allowed(
        "deployment_no_model.json",
        S,
        &[("vram-fit", "not checked: the workload names no model")],
    ),
    Case {
        warnings: &["GPU memory not checked: the workload names no model (noModel: warn)"],
        in_readme: true,
        ..allowed("deployment_no_model.json", "settings_warn.yml", &[])
    },
    denied(
        "pod_mig_1g_10gb_llama_8b.json",
        S,
        "model meta-llama/Llama-3.1-8B-Instruct needs ~18 GiB GPU memory (weights 15 GiB bf16, KV cache 1 GiB for 1 x 8192 tokens, overhead 10%); the pod asks for 1 x MIG 1g.10gb = 9 GiB usable at 90%. Request nvidia.com/mig-1g.20gb: 1, or nvidia.com/gpu: 1 on NVIDIA-A10G, or 1 on NVIDIA-L4 (nodeSelector nvidia.com/gpu.product).",
        true,
    ),
    allowed(
        "pod_mig_3g_40gb_llama_8b.json",
        S,
        &[(
            "vram-fit",
            "model meta-llama/Llama-3.1-8B-Instruct needs ~18 GiB; the pod asks for 1 x MIG 3g.40gb = 36 GiB usable at 90%",
        )],
    ),
    denied(
        "pod_four_mig_slices.json",
        S,
        "model meta-llama/Llama-3.1-8B-Instruct needs ~18 GiB GPU memory (weights 15 GiB bf16, KV cache 1 GiB for 1 x 8192 tokens, overhead 10%); the pod asks for 4 x MIG 1g.10gb (MIG devices do not combine: counted as one per pod) = 9 GiB usable at 90%. Request nvidia.com/mig-1g.20gb: 1, or nvidia.com/gpu: 1 on NVIDIA-A10G, or 1 on NVIDIA-L4 (nodeSelector nvidia.com/gpu.product).",
        true,
    ),
    denied(
        "pod_time_sliced_gpus.json",
        S,
        "model Qwen/Qwen2.5-7B-Instruct needs ~24 GiB GPU memory (weights 15 GiB bf16, KV cache 7 GiB for 4 x 32768 tokens, overhead 10%); the pod asks for 4 x NVIDIA-A10G-SHARED (time-sliced: counted as one GPU's memory per pod) = 20 GiB usable at 90%. Request nvidia.com/gpu: 1 on NVIDIA-A100-SXM4-40GB, or 1 on NVIDIA-L40S (nodeSelector nvidia.com/gpu.product).",
        true,
    ),
    denied(
        "statefulset_affinity_two_products.json",
        S,
        "model Qwen/Qwen2.5-7B-Instruct needs ~24 GiB GPU memory (weights 15 GiB bf16, KV cache 7 GiB for 4 x 32768 tokens, overhead 10%); the pod asks for 1 x NVIDIA-A10G = 20 GiB usable at 90%. Request nvidia.com/gpu: 2 on NVIDIA-A10G, or 1 on NVIDIA-A100-SXM4-40GB, or 1 on NVIDIA-L40S (nodeSelector nvidia.com/gpu.product).",
        true,
    ),
    denied(
        "deployment_pool_small.json",
        "settings_pools.yml",
        "model mistralai/Mixtral-8x7B-Instruct-v0.1 needs ~101 GiB GPU memory (weights 87 GiB bf16, KV cache 4 GiB for 1 x 32768 tokens, overhead 10%); the pod asks for 1 x NVIDIA-L4 = 20 GiB usable at 90%. Request nvidia.com/gpu: 8 on NVIDIA-L4, or 2 in pool large (NVIDIA-H100-80GB-HBM3), or 4 in pool medium (NVIDIA-L40S) (pod label gpu-admission/pool); counts are tensor-parallel sizes that divide the model's 32 attention heads.",
        true,
    ),
    allowed(
        "deployment_pool_large.json",
        "settings_pools.yml",
        &[(
            "vram-fit",
            "model mistralai/Mixtral-8x7B-Instruct-v0.1 needs ~101 GiB; the pod asks for 2 x NVIDIA-H100-80GB-HBM3 = 143 GiB usable at 90%",
        )],
    ),
    allowed(
        "leaderworkerset_llama_70b_fits.json",
        S,
        &[(
            "vram-fit",
            "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB; the LeaderWorkerSet group of 5 pods (1 leader + 4 workers) asks for 10 x NVIDIA-A10G = 202 GiB usable at 90%",
        )],
    ),
    denied(
        "leaderworkerset_llama_70b_too_small.json",
        S,
        "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB GPU memory (weights 132 GiB bf16, KV cache 20 GiB for 8 x 8192 tokens, overhead 10%); the LeaderWorkerSet group of 4 pods (1 leader + 3 workers) asks for 8 x NVIDIA-A10G = 161 GiB usable at 90%. Request nvidia.com/gpu: 4 per pod on NVIDIA-A10G, or 1 per pod on NVIDIA-H100-80GB-HBM3, or 1 per pod on NVIDIA-A100-SXM4-80GB (nodeSelector nvidia.com/gpu.product); counts are tensor-parallel sizes that divide the model's 64 attention heads.",
        true,
    ),
    // The label names an 8B model; the storageUri (what is loaded) names the 70B one.
    denied(
        "inferenceservice_llama_70b_on_2_l40s.json",
        S,
        "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB GPU memory (weights 132 GiB bf16, KV cache 20 GiB for 8 x 8192 tokens, overhead 10%); the pod asks for 2 x NVIDIA-L40S = 80 GiB usable at 90%. Request nvidia.com/gpu: 8 on NVIDIA-L40S, or 2 on NVIDIA-H100-NVL, or 2 on NVIDIA-H200 (nodeSelector nvidia.com/gpu.product); counts are tensor-parallel sizes that divide the model's 64 attention heads.",
        true,
    ),
    allowed(
        "inferenceservice_multinode_llama_70b.json",
        S,
        &[(
            "vram-fit",
            "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB; the multi-node predictor of 3 pods (1 head + 2 workers) asks for 6 x NVIDIA-L40S = 242 GiB usable at 90%",
        )],
    ),
    allowed(
        "raycluster_llama_70b.json",
        S,
        &[(
            "vram-fit",
            "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB; the RayCluster of 3 pods (1 head + 2 workers) asks for 4 x NVIDIA-A100-SXM4-80GB = 288 GiB usable at 90%",
        )],
    ),
    denied(
        "deployment_interactive_70b_capped.json",
        "settings_caps.yml",
        "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB GPU memory (weights 132 GiB bf16, KV cache 20 GiB for 8 x 8192 tokens, overhead 10%), more than the 40 GiB allowed for gpu-admission/workload-type=interactive workloads: serve a smaller or quantized model, lower its contextLength or concurrency, or use another gpu-admission/workload-type",
        true,
    ),
    allowed(
        "deployment_update_unchanged.json",
        S,
        &[(
            "vram-fit",
            "not checked again: this update changes none of its GPUs, GPU products, pools or model",
        )],
    ),
    denied(
        "deployment_update_changes_gpus.json",
        S,
        "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB GPU memory (weights 132 GiB bf16, KV cache 20 GiB for 8 x 8192 tokens, overhead 10%); the pod asks for 2 x NVIDIA-L4 = 40 GiB usable at 90%. It does not fit on NVIDIA-L4 with up to 8 GPUs per pod. Request nvidia.com/gpu: 2 on NVIDIA-H100-NVL, or 2 on NVIDIA-H200 (nodeSelector nvidia.com/gpu.product).",
        false,
    ),
    allowed(
        "pod_in_exempt_namespace.json",
        S,
        &[(
            "exempt",
            "namespace gpu-operator is in exemptNamespaces: not checked",
        )],
    ),
    Case {
        session: Some("session_registry_found.yml"),
        ..allowed(
            "deployment_registry_model.json",
            "settings_registry.yml",
            &[
                ("vram-model", "microsoft/phi-4"),
                ("vram-need-mib", "34362"),
                ("vram-available-mib", "41461"),
            ],
        )
    },
    Case {
        session: Some("session_registry_found.yml"),
        ..denied(
            "deployment_registry_model_too_big.json",
            "settings_registry.yml",
            "model microsoft/phi-4 needs ~34 GiB GPU memory (weights 28 GiB bf16, KV cache 3.2 GiB for 1 x 16384 tokens, overhead 10%); the pod asks for 1 x NVIDIA-L4 = 20 GiB usable at 90%. Request nvidia.com/gpu: 2 on NVIDIA-L4, or 1 on NVIDIA-A100-SXM4-40GB, or 1 on NVIDIA-L40S (nodeSelector nvidia.com/gpu.product).",
            false,
        )
    },
    Case {
        session: Some("session_registry_not_found.yml"),
        ..denied(
            "deployment_registry_model.json",
            "settings_registry.yml",
            "the model registry ConfigMap gpu-system/gpu-models cannot be read (Cannot find v1/ConfigMap named 'gpu-models' inside of namespace 'gpu-system'). Create it, list {apiVersion: v1, kind: ConfigMap} in the policy's contextAwareResources, and let the policy server's service account get configmaps in namespace gpu-system (settings.modelRegistry)",
            true,
        )
    },
    Case {
        session: Some("session_registry_malformed.yml"),
        ..denied(
            "deployment_registry_model.json",
            "settings_registry.yml",
            "the model registry ConfigMap gpu-system/gpu-models is malformed: models.yaml: line 1: expected ',' or '}' in a flow mapping; fix the ConfigMap",
            true,
        )
    },
    denied(
        "pod_gpu_request_without_limit.json",
        S,
        "the GPU request cannot be counted: container 'vllm' requests nvidia.com/gpu: 1 without a limit; set resources.limits.nvidia.com/gpu: 1",
        true,
    ),
    denied(
        "cronjob_qwen_on_a10g.json",
        S,
        "model Qwen/Qwen2.5-7B-Instruct needs ~24 GiB GPU memory (weights 15 GiB bf16, KV cache 7 GiB for 4 x 32768 tokens, overhead 10%); the pod asks for 1 x NVIDIA-A10G = 20 GiB usable at 90%. Request nvidia.com/gpu: 2 on NVIDIA-A10G, or 1 on NVIDIA-A100-SXM4-40GB, or 1 on NVIDIA-L40S (nodeSelector nvidia.com/gpu.product).",
        false,
    ),
    denied(
        "deployment_malformed.json",
        S,
        "Deployment ml-serving/broken cannot be read, so it is denied: spec.template.spec: invalid type: string \"vllm\", expected a sequence. Fix the manifest (for a custom resource, check its customKinds entry in the policy settings)",
        false,
    ),
    allowed("pod_delete.json", S, &[]),
    Case {
        warnings: &[
            "3 GPUs per pod: tensor parallel size 3 does not divide the 32 attention heads of meta-llama/Llama-3.1-8B-Instruct; vLLM refuses it (use 1, 2, 4, 8)",
            "over-provisioned: model meta-llama/Llama-3.1-8B-Instruct needs ~18 GiB, and the pod asks for 3 x NVIDIA-L4 = 60 GiB usable at 90%; nvidia.com/gpu: 1 on NVIDIA-L4 holds it in half the GPU memory or less (20 GiB usable): request that instead (overprovision: warn)",
        ],
        in_readme: true,
        ..allowed(
            "deployment_three_gpus_tp_warning.json",
            S,
            &[("vram-available-mib", "62190")],
        )
    },
    // What the pod runs: vLLM.
    denied(
        "deployment_vllm_label_8b_runs_70b.json",
        S,
        "the label gpu-admission/model on spec.template.spec names model 'llama-3.1-8b', but the argument --model of container vllm on spec.template.spec names 'meta-llama/Llama-3.1-70B-Instruct': label the workload with the model it serves, or serve the model it is labelled with (modelMismatch: deny)",
        true,
    ),
    // `vllm serve <model>`, `--max-model-len $(MAX_MODEL_LEN)` from the env, `--max-num-seqs=64`.
    denied(
        "deployment_vllm_long_context.json",
        S,
        "model meta-llama/Llama-3.1-8B-Instruct needs ~1143 GiB GPU memory (weights 15 GiB bf16, KV cache 1024 GiB for 64 x 131072 tokens, overhead 10%; --max-model-len 131072, --max-num-seqs 64 from container vllm); the pod asks for 1 x NVIDIA-L4 = 20 GiB usable at 90%. It does not fit on NVIDIA-L4 with up to 8 GPUs per pod. Request nvidia.com/gpu: 8 on NVIDIA-B200 (nodeSelector nvidia.com/gpu.product).",
        true,
    ),
    denied(
        "deployment_vllm_tp_mismatch.json",
        S,
        "container vllm runs --tensor-parallel-size 4, but the pod has 2 GPUs: the server needs exactly as many GPUs as it shards the model over. Set --tensor-parallel-size 2, or request nvidia.com/gpu: 4.",
        true,
    ),
    denied(
        "deployment_vllm_bad_max_model_len.json",
        S,
        "the server arguments cannot be read: container vllm: --max-model-len is 'lots', not a number of tokens from 1 to 100000000 (like 8192 or 32k)",
        true,
    ),
    allowed("deployment_vllm_flags_spaced.json", S, VLLM_FLAGS_AUDIT),
    allowed("deployment_vllm_flags_equals.json", S, VLLM_FLAGS_AUDIT),
    // `--model /mnt/models/...`: the label names the model.
    allowed(
        "deployment_vllm_model_path.json",
        S,
        &[
            ("vram-model", "meta-llama/Llama-3.1-8B-Instruct"),
            (
                "vram-model-source",
                "label gpu-admission/model on spec.template.spec",
            ),
            ("vram-need-mib", "17411"),
        ],
    ),
    // `sh -c` with `$(MODEL)` (Kubernetes) and `${MAX_LEN}`, `$SEQS` (the shell).
    denied(
        "pod_vllm_shell_script.json",
        S,
        "model Qwen/Qwen2.5-7B-Instruct needs ~47 GiB GPU memory (weights 15 GiB bf16, KV cache 28 GiB for 8 x 65536 tokens, overhead 10%; --max-model-len 65536, --max-num-seqs 8 from container vllm); the pod asks for 1 x NVIDIA-L40S = 40 GiB usable at 90%. Request nvidia.com/gpu: 2 on NVIDIA-L40S, or 1 on NVIDIA-H100-80GB-HBM3, or 1 on NVIDIA-A100-SXM4-80GB (nodeSelector nvidia.com/gpu.product).",
        false,
    ),
    // SGLang.
    allowed("deployment_sglang_spaced.json", S, SGLANG_AUDIT),
    allowed("deployment_sglang_equals.json", S, SGLANG_AUDIT),
    // TGI: its environment, and its flags.
    allowed(
        "deployment_tgi_env.json",
        S,
        &[
            (
                "vram-fit",
                "model mistralai/Mixtral-8x7B-Instruct-v0.1 needs ~98 GiB (env MAX_TOTAL_TOKENS=16384 from container tgi); the pod asks for 2 x NVIDIA-A100-SXM4-80GB = 144 GiB usable at 90%",
            ),
            (
                "vram-model-source",
                "env MODEL_ID of container tgi on spec.template.spec",
            ),
            (
                "vram-server-args",
                "counted: env MAX_TOTAL_TOKENS=16384 from container tgi",
            ),
        ],
    ),
    denied("deployment_tgi_args_spaced.json", S, TGI_ARGS_DENIED, false),
    denied("deployment_tgi_args_equals.json", S, TGI_ARGS_DENIED, false),
    // KServe's huggingface runtime (its own flags with `_`, vLLM's with `-`).
    denied(
        "inferenceservice_hf_runtime_args_spaced.json",
        S,
        KSERVE_ARGS_DENIED,
        true,
    ),
    denied(
        "inferenceservice_hf_runtime_args_equals.json",
        S,
        KSERVE_ARGS_DENIED,
        false,
    ),
    // Requested-memory caps, with and without a model.
    denied(
        "deployment_interactive_8_h100_no_model.json",
        "settings_requested_caps.yml",
        "the pod asks for 8 x NVIDIA-H100-80GB-HBM3 = 638 GiB of GPU memory, more than the 40 GiB allowed for gpu-admission/workload-type=interactive workloads: one NVIDIA-H100-80GB-HBM3 already holds more; use a smaller GPU or a MIG slice. Need more VRAM? Talk to the platform team.",
        true,
    ),
    denied(
        "deployment_interactive_8b_on_h100.json",
        "settings_requested_caps.yml",
        "the pod asks for 1 x NVIDIA-H100-80GB-HBM3 = 80 GiB of GPU memory, more than the 40 GiB allowed for gpu-admission/workload-type=interactive workloads: one NVIDIA-H100-80GB-HBM3 already holds more; use a smaller GPU or a MIG slice. Need more VRAM? Talk to the platform team.",
        false,
    ),
    allowed(
        "deployment_interactive_8b_on_l4.json",
        "settings_requested_caps.yml",
        &[("vram-need-mib", "17975")],
    ),
    // Over-provisioning: warned by default, denied with overprovision: deny.
    Case {
        warnings: &[
            "over-provisioned: model meta-llama/Llama-3.1-8B-Instruct needs ~18 GiB, and the pod asks for 1 x NVIDIA-H100-80GB-HBM3 = 71 GiB usable at 90%; nvidia.com/gpu: 1 on NVIDIA-A10G (nodeSelector nvidia.com/gpu.product) holds it in half the GPU memory or less (20 GiB usable): request that instead (overprovision: warn)",
        ],
        in_readme: true,
        ..allowed(
            "deployment_llama_8b_on_h100.json",
            S,
            &[("vram-available-mib", "73403")],
        )
    },
    denied(
        "deployment_llama_8b_on_h100.json",
        "settings_overprovision_deny.yml",
        "over-provisioned: model meta-llama/Llama-3.1-8B-Instruct needs ~18 GiB, and the pod asks for 1 x NVIDIA-H100-80GB-HBM3 = 71 GiB usable at 90%; nvidia.com/gpu: 1 on NVIDIA-A10G (nodeSelector nvidia.com/gpu.product) holds it in half the GPU memory or less (20 GiB usable): request that instead",
        false,
    ),
    // Image labels through oci/v1/oci_manifest_config: found, missing, a registry error.
    Case {
        session: Some("session_image_labels_found.yml"),
        ..allowed(
            "deployment_image_labelled.json",
            "settings_image_labels.yml",
            &[
                (
                    "vram-fit",
                    "model acme/support-bot-13b needs 19 GiB; the pod asks for 1 x NVIDIA-L4 = 20 GiB usable at 90%",
                ),
                ("vram-model", "acme/support-bot-13b"),
                (
                    "vram-model-source",
                    "label io.gpu-admission.model of image registry.example.com/ml/support-bot:2024.10",
                ),
                ("vram-need-mib", "19456"),
            ],
        )
    },
    Case {
        session: Some("session_image_labels_missing.yml"),
        ..allowed(
            "deployment_image_labelled.json",
            "settings_image_labels.yml",
            &[("vram-fit", "not checked: the workload names no model")],
        )
    },
    Case {
        session: Some("session_image_registry_error.yml"),
        ..denied(
            "deployment_image_labelled.json",
            "settings_image_labels.yml",
            "the config of image registry.example.com/ml/support-bot:2024.10 cannot be read (Cannot fetch manifest and config of registry.example.com/ml/support-bot:2024.10: unauthorized: authentication required): check that the image exists and that the policy server can pull from its registry (imageLabels)",
            true,
        )
    },
    // DRA: 4 gpu.nvidia.com devices from a shared ResourceClaim, the product from the
    // nodeSelector: the 70B model fits as on 4 x nvidia.com/gpu.
    Case {
        session: Some("session_dra_claim_four_gpus.yml"),
        ..allowed(
            "deployment_dra_claim_llama_70b_on_h100.json",
            S,
            DRA_FOUR_H100_AUDIT,
        )
    },
    // The product from the claim template's productName selector (no nodeSelector).
    Case {
        session: Some("session_dra_four_h100_selector.yml"),
        ..allowed("deployment_dra_llama_70b.json", S, DRA_FOUR_H100_AUDIT)
    },
    Case {
        session: Some("session_dra_one_h100_selector.yml"),
        ..denied("deployment_dra_llama_70b.json", S, DRA_ONE_H100, true)
    },
    Case {
        session: Some("session_dra_malformed.yml"),
        ..denied("deployment_dra_llama_70b.json", S, DRA_MALFORMED, true)
    },
    // HAMi: one vGPU of nvidia.com/gpumem 3000 MiB (extraGpuResources nvidia.com/* counts
    // no MiB as GPUs): a 0.5B model fits in it, the 8B one does not.
    allowed(
        "pod_hami_gpumem_qwen_0_5b.json",
        "settings_fractional.yml",
        &[
            (
                "vram-fit",
                "model Qwen/Qwen2.5-0.5B-Instruct needs ~1.1 GiB (--max-model-len 4096 from container vllm); the pod asks for 1 x 3000 MiB of one GPU through HAMi = 2.6 GiB usable at 90%",
            ),
            ("vram-available-mib", "2700"),
        ],
    ),
    denied(
        "pod_hami_gpumem_llama_8b.json",
        "settings_fractional.yml",
        HAMI_TOO_SMALL,
        true,
    ),
];

const SETTINGS_DRA_API: &str = "dra.apiVersion: 'resource.k8s.io/v2' is not a DRA API version (resource.k8s.io/v1, v1beta2 or v1beta1)";
const SETTINGS_DRA_CLASS: &str = "dra.gpuDeviceClasses.gpu.example.com: 'example.com/gpu x' is not a resource name (give the GPU resource its devices count as, e.g. nvidia.com/gpu, or \"\" to count the class as no GPU)";
const SETTINGS_KAI_NAMES: &str = "fractionalGpus.kai.schedulerNames: give at least one schedulerName, or set fractionalGpus.kai.enabled: false";

const DRA_FOUR_H100_AUDIT: &[(&str, &str)] = &[
    (
        "vram-fit",
        "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB; the pod asks for 4 x NVIDIA-H100-80GB-HBM3 = 286 GiB usable at 90%",
    ),
    ("vram-need-mib", "170653"),
    ("vram-available-mib", "293612"),
];

const DRA_ONE_H100: &str = "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB GPU memory (weights 132 GiB bf16, KV cache 20 GiB for 8 x 8192 tokens, overhead 10%); the pod asks for 1 x NVIDIA-H100-80GB-HBM3 = 71 GiB usable at 90%. Request nvidia.com/gpu: 4 on NVIDIA-H100-80GB-HBM3, or 2 on NVIDIA-H100-NVL, or 2 on NVIDIA-H200 (nodeSelector nvidia.com/gpu.product); counts are tensor-parallel sizes that divide the model's 64 attention heads.";

const DRA_MALFORMED: &str = "the GPU request cannot be counted: resource claim 'gpus' (ResourceClaimTemplate h100-gpus) is not a readable ResourceClaimTemplate: invalid type: map, expected a sequence at line 1 column 161";

const HAMI_TOO_SMALL: &str = "model meta-llama/Llama-3.1-8B-Instruct needs ~18 GiB GPU memory (weights 15 GiB bf16, KV cache 1 GiB for 1 x 8192 tokens, overhead 10%); the pod asks for 1 x 3000 MiB of one GPU through HAMi on NVIDIA-L4 = 2.6 GiB usable at 90%. It does not fit in 3000 MiB of one GPU through HAMi: ask the scheduler for at least 19973 MiB of each GPU (90% of it usable), or for whole GPUs without a share.";

/// Every vLLM flag the policy reads, spaced or with `=`: the same verdict.
const VLLM_FLAGS_AUDIT: &[(&str, &str)] = &[
    (
        "vram-fit",
        "model meta-llama/Llama-3.1-8B-Instruct needs ~13 GiB (--max-model-len 16384, --max-num-seqs 4, --quantization fp8, --dtype bfloat16, --kv-cache-dtype fp8 from container vllm); the pod asks for 1 x NVIDIA-L4 = 20 GiB usable at 92% (--gpu-memory-utilization 0.92 of container vllm)",
    ),
    ("vram-need-mib", "12930"),
    ("vram-available-mib", "21191"),
    (
        "vram-server-args",
        "counted: --max-model-len 16384, --max-num-seqs 4, --quantization fp8, --dtype bfloat16, --kv-cache-dtype fp8 from container vllm; usable memory: --gpu-memory-utilization 0.92 of container vllm",
    ),
];

const SGLANG_AUDIT: &[(&str, &str)] = &[
    (
        "vram-fit",
        "model Qwen/Qwen2.5-7B-Instruct needs ~20 GiB (--context-length 16384 from container sglang); the pod asks for 2 x NVIDIA-L4 = 38 GiB usable at 85% (--mem-fraction-static 0.85 of container sglang)",
    ),
    (
        "vram-model-source",
        "argument --model-path of container sglang on spec.template.spec",
    ),
    ("vram-need-mib", "19888"),
];

const TGI_ARGS_DENIED: &str = "model mistralai/Mixtral-8x7B-Instruct-v0.1 needs ~97 GiB GPU memory (weights 87 GiB bf16, KV cache 1 GiB for 1 x 8192 tokens, overhead 10%; --max-total-tokens 8192 from container tgi); the pod asks for 1 x NVIDIA-H100-NVL = 84 GiB usable at 90%. Request nvidia.com/gpu: 2 on NVIDIA-H100-NVL, or 1 on NVIDIA-H200, or 1 on NVIDIA-B200 (nodeSelector nvidia.com/gpu.product).";

const KSERVE_ARGS_DENIED: &str = "model meta-llama/Llama-3.1-70B-Instruct needs ~156 GiB GPU memory (weights 132 GiB bf16, KV cache 10 GiB for 8 x 4096 tokens, overhead 10%; --max_model_len 4096 from container model); the pod asks for 2 x NVIDIA-H100-80GB-HBM3 = 143 GiB usable at 90%. Request nvidia.com/gpu: 4 on NVIDIA-H100-80GB-HBM3, or 1 on NVIDIA-B200, or 2 on NVIDIA-H100-NVL (nodeSelector nvidia.com/gpu.product); counts are tensor-parallel sizes that divide the model's 64 attention heads.";

#[test]
fn every_test_data_request_gets_its_verdict_and_message() {
    let mut failures = Vec::new();
    for case in CASES {
        let what = format!("{} [{}] {:?}", case.request, case.settings, case.session);
        let e = POLICY.evaluate(case.request, case.settings, case.session);
        let r = &e.response;
        if r.allowed != case.denied.is_none() || r.message() != case.denied {
            failures.push(format!(
                "{what}: allowed={} message={:?}",
                r.allowed,
                r.message()
            ));
        }
        let warnings: Vec<&str> = r.warnings.iter().flatten().map(String::as_str).collect();
        if warnings != case.warnings {
            failures.push(format!("{what}: warnings {warnings:?}"));
        }
        let audit: HashMap<String, String> = r.audit_annotations.clone().unwrap_or_default();
        for (k, v) in case.audit {
            if audit.get(*k).map(String::as_str) != Some(*v) {
                failures.push(format!("{what}: audit {k} = {:?}", audit.get(*k)));
            }
        }
        if case.denied.is_some() && r.audit_annotations.is_some() {
            failures.push(format!("{what}: a rejection carries audit annotations"));
        }
        if r.patch.is_some() {
            failures.push(format!("{what}: the policy is not mutating"));
        }
        let expected_calls = case.session.map_or(0, |f| {
            ReplaySession::from_file(POLICY.data(f))
                .map(|s| s.len())
                .unwrap_or(usize::MAX)
        });
        if e.host_calls.len() != expected_calls || !e.unconsumed_exchanges.is_empty() {
            failures.push(format!(
                "{what}: {} host calls, {} exchanges left",
                e.host_calls.len(),
                e.unconsumed_exchanges.len()
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn the_registry_is_read_with_the_sdk_get_resource_request() {
    let e = POLICY.evaluate(
        "deployment_registry_model.json",
        "settings_registry.yml",
        Some("session_registry_found.yml"),
    );
    assert!(e.response.allowed, "{:?}", e.response);
    let call = &e.host_calls[0];
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
    let request = POLICY.request("deployment_dra_llama_70b.json");
    let r = POLICY
        .module()
        .with_context_aware_access(ContextAwareAccess::from_metadata(Some(
            &json!({"contextAwareResources": [{"apiVersion": "v1", "kind": "ConfigMap"}]}),
        )))
        .validate(
            &request,
            &POLICY.settings(S),
            Some(POLICY.session("session_dra_four_h100_selector.yml")),
        )
        .unwrap();
    assert!(!r.allowed);
    assert_eq!(
        r.message(),
        Some(
            "the GPU request cannot be counted: resource claim 'gpus' (ResourceClaimTemplate h100-gpus) cannot be read (Host error: Policy has not been granted access to Kubernetes resource.k8s.io/v1/ResourceClaimTemplate resources. The violation has been reported.); create it before the workload, and let the policy read it: contextAwareResources {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate} in the policy and get on resourceclaimtemplates.resource.k8s.io for the policy server's service account"
        )
    );
}

#[test]
fn image_labels_are_read_with_the_sdk_oci_manifest_config_request() {
    let e = POLICY.evaluate(
        "deployment_image_labelled.json",
        "settings_image_labels.yml",
        Some("session_image_labels_found.yml"),
    );
    assert!(e.response.allowed, "{:?}", e.response);
    let call = &e.host_calls[0];
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
    let request = POLICY.request("deployment_registry_model.json");
    let settings = POLICY.settings("settings_registry.yml");
    let r = POLICY.ungranted(&request, &settings, "session_registry_found.yml");
    assert!(!r.allowed);
    let message = r.message().unwrap();
    assert!(
        message.starts_with("the model registry ConfigMap gpu-system/gpu-models cannot be read ("),
        "{message}"
    );
    assert!(
        message.contains(
            "list {apiVersion: v1, kind: ConfigMap} in the policy's contextAwareResources"
        ),
        "{message}"
    );
}

#[test]
fn settings_files_are_valid_and_invalid_ones_name_the_field() {
    for file in [
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
    ] {
        let v = POLICY
            .module()
            .validate_settings(&POLICY.settings(file))
            .unwrap();
        assert!(v.valid, "{file}: {:?}", v.message);
    }
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
        let v = POLICY
            .module()
            .validate_settings(&POLICY.settings(file))
            .unwrap();
        assert!(!v.valid, "{file}");
        assert_eq!(v.message.as_deref(), Some(message), "{file}");
    }
    let empty = POLICY.module().validate_settings(&json!({})).unwrap();
    assert!(
        empty.valid,
        "defaults work out of the box: {:?}",
        empty.message
    );
    let typo = POLICY
        .module()
        .validate_settings(&json!({"usableMemoryPercentage": 90}))
        .unwrap();
    assert!(!typo.valid);
    assert!(
        typo.message.unwrap().contains("usableMemoryPercentage"),
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
        let v = POLICY.module().validate_settings(&settings).unwrap();
        assert!(!v.valid, "{settings}");
        assert_eq!(v.message.as_deref(), Some(message));
    }
    let zero_layers = POLICY
        .module()
        .validate_settings(
            &json!({"models": {"m": {"parametersBillions": 7, "dtype": "bf16",
            "layers": 0, "kvHeads": 8, "headDim": 128, "contextLength": 4096}}}),
        )
        .unwrap();
    assert_eq!(
        zero_layers.message.as_deref(),
        Some("models[m].layers: must be a whole number from 1 to 10000, got '0'")
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
               {"apiVersion": "v1", "kind": "ConfigMap"}])
    );
    assert_eq!(
        json["hostCapabilities"],
        json!(["kubernetes/get_resource", "oci/v1/oci_manifest_config"])
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
        CASES
            .iter()
            .filter(|c| c.in_readme)
            .flat_map(|c| c.denied.into_iter().chain(c.warnings.iter().copied()))
            .chain([SETTINGS_DRA_API, SETTINGS_DRA_CLASS, SETTINGS_KAI_NAMES])
            .chain([EXCEPTION_AUDIT]),
    );
}

#[test]
fn every_file_in_test_data_is_exercised() {
    let used: BTreeSet<&str> = CASES
        .iter()
        .flat_map(|c| [Some(c.request), Some(c.settings), c.session])
        .flatten()
        .chain(["settings_invalid.yml", "settings_invalid_percent.yml"])
        .collect();
    let unused: Vec<String> = POLICY
        .test_data_files()
        .into_iter()
        // The kwctl parity test's list of these cases (e2e/tests/kwctl.rs).
        .filter(|f| f != "cases.txt" && !used.contains(f.as_str()))
        .collect();
    assert!(unused.is_empty(), "not exercised: {unused:?}");
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
fn the_date_helpers_agree_with_known_dates() {
    assert_eq!(days_from_civil(2026, 12, 1) * 86_400, 1_796_083_200);
    assert_eq!(civil_from_days(days_from_civil(2028, 2, 29)), "2028-02-29");
    assert_eq!(civil_from_days(0), "1970-01-01");
}

#[test]
fn the_exception_fixture_is_renewed_in_time() {
    assert_more_than_30_days_ahead(
        days_from_civil(2027, 9, 28) * 86_400,
        &format!(
            "test_data/settings_exceptions.yml: the exception ends {FIXTURE_EXCEPTION_ENDS}, in less than 30 days; move its expires forward (at most maxExceptionDays from today) and EXCEPTION_AUDIT with it"
        ),
    );
}

#[test]
fn exceptions_dated_at_test_time_warn_in_their_last_week() {
    let exception = DatedException::new(
        "settings_exceptions.yml",
        "llama-70b-a10g-trial",
        "serving-team@example.com",
    );
    let until = |days: i64| exception.until(POLICY, days);
    let request = POLICY.request("deployment_llama_70b_on_2_a10g.json");
    let month = POLICY
        .module()
        .validate(&request, &until(30), None)
        .unwrap();
    assert!(month.allowed && month.warnings.is_none(), "{month:?}");
    assert_eq!(
        month
            .audit_annotations
            .as_ref()
            .and_then(|a| a.get("exception"))
            .cloned(),
        Some(exception.audit(30))
    );
    let soon = POLICY.module().validate(&request, &until(1), None).unwrap();
    assert!(soon.allowed);
    exception.last_week_warning(soon.warnings, 1);
    // Another workload of the namespace the selector does not match is still denied.
    let mut other = request.clone();
    other["object"]["spec"]["template"]["metadata"]["labels"]["app"] = json!("llama-70b-canary");
    assert!(
        !POLICY
            .module()
            .validate(&other, &until(30), None)
            .unwrap()
            .allowed
    );
}
