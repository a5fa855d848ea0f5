#!/usr/bin/env bats
# kwctl checks of gpu-vram-fit-policy over test_data/ (the same files as
# e2e/tests/gpu_vram_fit_policy.rs). Needs kwctl on PATH and an annotated module:
#   make annotate && cd policies/gpu-vram-fit-policy && bats e2e.bats
# POLICY_WASM overrides the module (default: annotated-policy.wasm in this directory).

load ../../e2e/bats/kwctl

@test "a 70B model on two A10G is denied with the fix" {
  run_policy deployment_llama_70b_on_2_a10g.json settings.yml
  denied
  says 'model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB GPU memory (weights 132 GiB bf16, KV cache 20 GiB for 8 x 8192 tokens, overhead 10%); the pod asks for 2 x NVIDIA-A10G = 40 GiB usable at 90%.'
  says 'Request nvidia.com/gpu: 2 on NVIDIA-H100-NVL, or 2 on NVIDIA-H200 (nodeSelector nvidia.com/gpu.product).'
}

@test "an 8B model on one L4 fits, with audit annotations" {
  run_policy deployment_llama_8b_on_l4.json settings.yml
  allowed
  says '"vram-need-mib":"17975"'
  says '"vram-available-mib":"20730"'
}

@test "the 70B model on four H100 fits" {
  run_policy deployment_llama_70b_on_4_h100.json settings.yml
  allowed
}

@test "an unknown model is denied, or warned about" {
  run_policy deployment_unknown_model.json settings.yml
  denied
  says "model 'EleutherAI/gpt-j-6b' (argument --model of container vllm on spec.template.spec) is not in the model registry"
  run_policy deployment_unknown_model.json settings_warn.yml
  allowed
  says "GPU memory not checked: model 'EleutherAI/gpt-j-6b' is not in the model registry (unknownModel: warn)"
}

@test "an unknown GPU is denied, or warned about" {
  run_policy deployment_unknown_gpu.json settings.yml
  denied
  says 'the GPU type is unknown: select one with nodeSelector nvidia.com/gpu.product: <product>'
  run_policy deployment_unknown_gpu.json settings_warn.yml
  allowed
  says 'GPU memory not checked: the GPU type of spec.template.spec is unknown (unknownGpu: warn)'
}

@test "a GPU workload naming no model is allowed by default" {
  run_policy deployment_no_model.json settings.yml
  allowed
  says 'not checked: the workload names no model'
}

@test "MIG slices: profile memory, and slices do not combine" {
  run_policy pod_mig_3g_40gb_llama_8b.json settings.yml
  allowed
  run_policy pod_mig_1g_10gb_llama_8b.json settings.yml
  denied
  says 'Request nvidia.com/mig-1g.20gb: 1'
  run_policy pod_four_mig_slices.json settings.yml
  denied
  says 'MIG devices do not combine'
}

@test "time-sliced GPUs count once" {
  run_policy pod_time_sliced_gpus.json settings.yml
  denied
  says "4 x NVIDIA-A10G-SHARED (time-sliced: counted as one GPU's memory per pod)"
}

@test "node affinity with two products is judged on the smaller" {
  run_policy statefulset_affinity_two_products.json settings.yml
  denied
  says 'the pod asks for 1 x NVIDIA-A10G'
}

@test "pools give the product and are suggested" {
  run_policy deployment_pool_small.json settings_pools.yml
  denied
  says '2 in pool large (NVIDIA-H100-80GB-HBM3)'
  run_policy deployment_pool_large.json settings_pools.yml
  allowed
}

@test "a LeaderWorkerSet is judged on its whole group" {
  run_policy leaderworkerset_llama_70b_fits.json settings.yml
  allowed
  run_policy leaderworkerset_llama_70b_too_small.json settings.yml
  denied
  says 'the LeaderWorkerSet group of 4 pods (1 leader + 3 workers) asks for 8 x NVIDIA-A10G'
}

@test "KServe: the storageUri wins over the label; multi-node counts head and workers" {
  run_policy inferenceservice_llama_70b_on_2_l40s.json settings.yml
  denied
  says 'model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB'
  run_policy inferenceservice_multinode_llama_70b.json settings.yml
  allowed
}

@test "a RayCluster is one group" {
  run_policy raycluster_llama_70b.json settings.yml
  allowed
}

@test "interactive models are capped" {
  run_policy deployment_interactive_70b_capped.json settings_caps.yml
  denied
  says 'more than the 40 GiB allowed for gpu-admission/workload-type=interactive workloads'
}

@test "an UPDATE that changes nothing relevant passes; one that changes GPUs is judged" {
  run_policy deployment_update_unchanged.json settings.yml
  allowed
  run_policy deployment_update_changes_gpus.json settings.yml
  denied
}

@test "exempt namespaces, DELETE, request problems, malformed objects" {
  run_policy pod_in_exempt_namespace.json settings.yml
  allowed
  run_policy pod_delete.json settings.yml
  allowed
  run_policy pod_gpu_request_without_limit.json settings.yml
  denied
  says 'set resources.limits.nvidia.com/gpu: 1'
  run_policy deployment_malformed.json settings.yml
  denied
  says 'Deployment ml-serving/broken cannot be read, so it is denied'
  run_policy cronjob_qwen_on_a10g.json settings.yml
  denied
}

@test "a tensor-parallel size that does not divide the heads is warned about" {
  run_policy deployment_three_gpus_tp_warning.json settings.yml
  allowed
  says 'tensor parallel size 3 does not divide the 32 attention heads'
}

@test "replay: the registry ConfigMap is read" {
  run_policy deployment_registry_model.json settings_registry.yml session_registry_found.yml
  allowed
  says '"vram-model":"microsoft/phi-4"'
  run_policy deployment_registry_model_too_big.json settings_registry.yml session_registry_found.yml
  denied
  says 'model microsoft/phi-4 needs ~34 GiB GPU memory'
}

@test "replay: a missing registry ConfigMap is a clear denial" {
  run_policy deployment_registry_model.json settings_registry.yml session_registry_not_found.yml
  denied
  says "the model registry ConfigMap gpu-system/gpu-models cannot be read"
}

@test "replay: a malformed registry ConfigMap is a clear denial" {
  run_policy deployment_registry_model.json settings_registry.yml session_registry_malformed.yml
  denied
  says 'the model registry ConfigMap gpu-system/gpu-models is malformed: models.yaml: line 1'
}

@test "server arguments: a label contradicting --model is denied" {
  run_policy deployment_vllm_label_8b_runs_70b.json settings.yml
  denied
  says "names model 'llama-3.1-8b', but the argument --model of container vllm on spec.template.spec names 'meta-llama/Llama-3.1-70B-Instruct'"
}

@test "server arguments: context length and sequences from args and env are counted" {
  run_policy deployment_vllm_long_context.json settings.yml
  denied
  says 'KV cache 1024 GiB for 64 x 131072 tokens, overhead 10%; --max-model-len 131072, --max-num-seqs 64 from container vllm'
  run_policy pod_vllm_shell_script.json settings.yml
  denied
  says 'KV cache 28 GiB for 8 x 65536 tokens'
}

@test "server arguments: tensor parallel size must match the GPUs" {
  run_policy deployment_vllm_tp_mismatch.json settings.yml
  denied
  says 'container vllm runs --tensor-parallel-size 4, but the pod has 2 GPUs'
}

@test "server arguments: a malformed value of a known flag is denied" {
  run_policy deployment_vllm_bad_max_model_len.json settings.yml
  denied
  says "the server arguments cannot be read: container vllm: --max-model-len is 'lots'"
}

@test "server arguments: vLLM, SGLang, TGI and KServe, both spellings" {
  for f in deployment_vllm_flags_spaced.json deployment_vllm_flags_equals.json; do
    run_policy "$f" settings.yml
    allowed
    says '"vram-need-mib":"12930"'
  done
  for f in deployment_sglang_spaced.json deployment_sglang_equals.json; do
    run_policy "$f" settings.yml
    allowed
    says '"vram-need-mib":"19888"'
  done
  run_policy deployment_tgi_env.json settings.yml
  allowed
  says '"vram-need-mib":"100234"'
  for f in deployment_tgi_args_spaced.json deployment_tgi_args_equals.json; do
    run_policy "$f" settings.yml
    denied
    says '--max-total-tokens 8192 from container tgi'
  done
  for f in inferenceservice_hf_runtime_args_spaced.json inferenceservice_hf_runtime_args_equals.json; do
    run_policy "$f" settings.yml
    denied
    says '--max_model_len 4096 from container model'
  done
}

@test "requested-memory caps, with and without a model" {
  run_policy deployment_interactive_8_h100_no_model.json settings_requested_caps.yml
  denied
  says 'more than the 40 GiB allowed for gpu-admission/workload-type=interactive workloads'
  says 'Need more VRAM? Talk to the platform team.'
  run_policy deployment_interactive_8b_on_h100.json settings_requested_caps.yml
  denied
  run_policy deployment_interactive_8b_on_l4.json settings_requested_caps.yml
  allowed
}

@test "over-provisioning is warned about, or denied" {
  run_policy deployment_llama_8b_on_h100.json settings.yml
  allowed
  says 'over-provisioned: model meta-llama/Llama-3.1-8B-Instruct needs ~18 GiB'
  run_policy deployment_llama_8b_on_h100.json settings_overprovision_deny.yml
  denied
}

@test "replay: image labels name the model, are missing, or cannot be read" {
  run_policy deployment_image_labelled.json settings_image_labels.yml session_image_labels_found.yml
  allowed
  says '"vram-model":"acme/support-bot-13b"'
  run_policy deployment_image_labelled.json settings_image_labels.yml session_image_labels_missing.yml
  allowed
  says 'not checked: the workload names no model'
  run_policy deployment_image_labelled.json settings_image_labels.yml session_image_registry_error.yml
  denied
  says 'the config of image registry.example.com/ml/support-bot:2024.10 cannot be read'
}

@test "invalid settings name the field" {
  run kwctl run --request-path "$DATA/deployment_llama_8b_on_l4.json" \
    --settings-path "$DATA/settings_invalid.yml" "$POLICY"
  [ "$status" -ne 0 ]
  says "models[meta-llama/Llama-3.1-8B-Instruct].dtype: 'bf17' is not a dtype"
  run kwctl run --request-path "$DATA/deployment_llama_8b_on_l4.json" \
    --settings-path "$DATA/settings_invalid_percent.yml" "$POLICY"
  [ "$status" -ne 0 ]
  says 'usableMemoryPercent: give a whole percentage such as 90'
}

@test "DRA: 4 H100 from the claim template's productName selector fit a 70B model, 1 does not" {
  run_policy deployment_dra_llama_70b.json settings.yml session_dra_four_h100_selector.yml
  allowed
  says "4 x NVIDIA-H100-80GB-HBM3 = 286 GiB usable at 90%"
  run_policy deployment_dra_llama_70b.json settings.yml session_dra_one_h100_selector.yml
  denied
  says "the pod asks for 1 x NVIDIA-H100-80GB-HBM3 = 71 GiB usable at 90%"
  run_policy deployment_dra_claim_llama_70b_on_h100.json settings.yml session_dra_claim_four_gpus.yml
  allowed
}

@test "DRA: a malformed claim template is denied" {
  run_policy deployment_dra_llama_70b.json settings.yml session_dra_malformed.yml
  denied
  says "is not a readable ResourceClaimTemplate: invalid type: map, expected a sequence"
}

@test "HAMi: a vGPU of 3000 MiB holds a 0.5B model, not an 8B one" {
  run_policy pod_hami_gpumem_qwen_0_5b.json settings_fractional.yml
  allowed
  run_policy pod_hami_gpumem_llama_8b.json settings_fractional.yml
  denied
  says "It does not fit in 3000 MiB of one GPU through HAMi: ask the scheduler for at least 19973 MiB of each GPU"
}

@test "an exception lets the 70B Deployment on two A10G through; expired, the denial says so" {
  run_policy deployment_llama_70b_on_2_a10g.json settings_exceptions.yml
  allowed
  says '"exception":"exception=llama-70b-a10g-trial owner=serving-team@example.com expires=2027-09-28T00:00:00Z"'
  run_policy deployment_llama_70b_on_2_a10g.json settings_exceptions_expired.yml
  denied
  says "(exception llama-70b-a10g-trial (owner serving-team@example.com) expired at 2026-11-16T00:00:00Z; renew it or fix the workload)"
}

@test "nodeInventory: the memory the nodes report sizes the GPUs, and the message says so" {
  run_policy deployment_nodes_70g_on_a100_80gb.json settings_nodes.yml session_nodes_gfd_a100_80gb.yml
  denied
  says 'the pod asks for 1 x NVIDIA-A100-SXM4-80GB (76000 MiB per GPU, reported by 2 nodes) = 66 GiB usable at 90%'
  run_policy deployment_nodes_70g_on_rtx_pro.json settings_nodes.yml session_nodes_gfd.yml
  allowed
  says '1 x NVIDIA-RTX-PRO-6000-Blackwell (97887 MiB per GPU, reported by 1 node)'
}

@test "nodeInventory: what no node offers is denied with what the nodes offer" {
  run_policy deployment_nodes_product_typo.json settings_nodes.yml session_nodes_gfd.yml
  denied
  says "no node offers GPU product 'NVIDIA-A100-SXM4-40G' (nvidia.com/gpu.product) (did you mean 'NVIDIA-A100-SXM4-40GB'?)"
  run_policy pod_mig_3g_40gb_llama_8b.json settings_nodes.yml session_nodes_gfd.yml
  denied
  says 'no node offers MIG profile 3g.40gb (nvidia.com/mig-3g.40gb)'
  run_policy deployment_nodes_two_l4_per_pod.json settings_nodes.yml session_nodes_gfd_l4.yml
  denied
  says 'no node of NVIDIA-L4 has more than 1 allocatable'
  run_policy deployment_nodes_driver_too_old.json settings_nodes.yml session_nodes_gfd_a100_40gb.yml
  denied
  says 'the newest driver on the nodes of NVIDIA-A100-SXM4-40GB that offer its GPUs is 535.104.05'
}

@test "nodeInventory: Nodes not granted deny, naming the grant" {
  run_policy deployment_nodes_8b_on_a100_40gb.json settings_nodes.yml session_nodes_not_granted.yml
  denied
  says 'cannot list v1/Node: not granted to this policy: add {apiVersion: v1, kind: Node}'
}
