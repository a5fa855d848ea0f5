#!/usr/bin/env bats
# gpu-labels-policy through kwctl, on the same test_data the Rust e2e tests use
# (e2e/tests/gpu_labels_policy.rs). Needs kwctl on PATH and an annotated module:
#   make annotate && cd policies/gpu-labels-policy && bats e2e.bats
# POLICY_WASM overrides the module (default: annotated-policy.wasm in this directory).

load ../../e2e/bats/kwctl

@test "labelled GPU workloads are accepted" {
  for r in pod_gpu_labelled deployment_labelled job_labelled cronjob_labelled; do
    run_policy "$r.json"
    allowed
  done
}

@test "workloads without GPUs pass untouched" {
  run_policy deployment_no_gpu.json
  allowed
  run_policy pod_delete.json
  allowed
}

@test "a GPU pod without labels gets every problem in one message" {
  run_policy pod_gpu_missing_labels.json
  denied
  says "Pod 'llm-chat' breaks the GPU admission rules (3 problems): 1) label 'workload-type' is missing (GPU pods must carry it): add workload-type: <one of interactive, batch, training> to metadata.labels; 2) label 'team' is missing"
  says "3) container 'vllm' holds GPUs but requests no cpu and no memory"
}

@test "a Deployment missing team is told where to add it" {
  run_policy deployment_missing_team.json
  denied
  says "1) label 'team' is missing (GPU pods must carry it): add team: <a non-empty value> to spec.template.metadata.labels"
}

@test "labels on the Deployment but not its template: put them on the template" {
  run_policy deployment_label_on_object_only.json
  denied
  says "put team: ml-platform on spec.template.metadata.labels"
}

@test "a CronJob with a value in the wrong case" {
  run_policy cronjob_bad_workload_type.json
  denied
  says "label workload-type=Batch is not allowed: set workload-type to one of interactive, batch, training in spec.jobTemplate.spec.template.metadata.labels (values are case-sensitive: did you mean batch?)"
}

@test "a pattern label" {
  run_policy pod_gpu_labelled.json settings_cost_center.yml
  denied
  says "add cost-center: <a value matching cc-????> to metadata.labels"
}

@test "KServe InferenceService via customKinds" {
  run_policy inferenceservice_labelled.json settings_custom_kinds.yml
  allowed
  run_policy inferenceservice_missing_labels.json settings_custom_kinds.yml
  denied
  says "InferenceService 'llama-3-8b' breaks the GPU admission rules (1 problem): 1) label 'workload-type' is missing"
}

@test "LeaderWorkerSet via customKinds" {
  run_policy leaderworkerset_labelled.json settings_custom_kinds.yml
  allowed
  run_policy leaderworkerset_worker_unlabelled.json settings_custom_kinds.yml
  denied
  says "1) spec.leaderWorkerTemplate.workerTemplate.spec: label 'workload-type' is missing"
}

@test "RayCluster workers via customKinds; not inspected without them" {
  run_policy raycluster_worker_unlabelled.json settings_custom_kinds.yml
  denied
  says "spec.workerGroupSpecs[0].template.spec: label 'workload-type' is missing"
  run_policy raycluster_worker_unlabelled.json
  allowed
}

@test "GPUs in init containers, other vendors and MIG slices still need labels" {
  for r in pod_gpu_in_init_container pod_amd_gpu_unlabelled pod_mig_slice_unlabelled; do
    run_policy "$r.json"
    denied
    says "1) label 'workload-type' is missing"
  done
}

@test "GPU request hygiene" {
  run_policy pod_gpu_request_without_limit.json
  denied
  says "container 'vllm' requests nvidia.com/gpu: 1 without a limit: put nvidia.com/gpu: 1 in its resources.limits"
  run_policy pod_gpu_request_not_equal_limit.json
  denied
  says "GPU requests must equal limits"
  run_policy pod_fractional_gpu.json
  denied
  says "asks for nvidia.com/gpu: 0.5, which is not a whole number"
  run_policy pod_gpu_in_ephemeral_container.json
  denied
  says "ephemeral container 'debugger' asks for nvidia.com/gpu: 1, but ephemeral containers cannot hold resources"
}

@test "per-container and per-pod maximums" {
  run_policy pod_too_many_gpus.json settings_max_gpus.yml
  denied
  says "container 'vllm' asks for 8 GPUs (nvidia.com/gpu: 8), more than the 4 allowed per container"
  says "each pod holds 10 GPUs"
  run_policy pod_too_many_gpus.json
  allowed
}

@test "non-GPU pods stay off GPU nodes" {
  run_policy pod_no_gpu_tolerates_gpu_taint.json
  denied
  says "the pod requests no GPU but tolerates the GPU taint nvidia.com/gpu with tolerations[0]"
  run_policy pod_zero_gpu_tolerates_gpu_taint.json
  denied
  run_policy deployment_no_gpu_selects_gpu_nodes.json
  denied
  says "selects GPU nodes with required node affinity on nvidia.com/gpu.product"
}

@test "DaemonSets are node agents; a spoofed owner is not" {
  run_policy daemonset_node_agent.json
  allowed
  run_policy pod_from_daemonset_controller.json
  allowed
  run_policy pod_spoofed_daemonset_owner.json
  denied
  run_policy daemonset_node_agent.json settings_strict_daemonsets.yml
  denied
}

@test "UPDATE judges the new object" {
  run_policy deployment_update_removes_label.json
  denied
  says "label 'team' is missing"
  run_policy deployment_update_adds_gpus.json
  denied
}

@test "an UPDATE that changes no template or label is allowed with warnings" {
  run_policy deployment_update_scales_legacy.json
  allowed
  says "this update is allowed because it changes no pod template and no label"
  says "unchanged-noncompliant-object"
}

@test "exempt namespaces are allowed with an audit annotation" {
  run_policy pod_in_exempt_namespace.json
  denied
  run_policy pod_in_exempt_namespace.json settings_exempt.yml
  allowed
  says "namespace gpu-operator is in exemptNamespaces"
}

@test "malformed objects are denied" {
  run_policy deployment_malformed.json
  denied
  says "Deployment ml-serving/llm-server cannot be read, so it is denied: spec.template.spec: invalid type: map, expected a sequence"
}

@test "invalid settings name the field" {
  run kwctl run --request-path "$DATA/pod_gpu_labelled.json" --settings-path "$DATA/settings_invalid_both.yml" "$POLICY"
  [ "$status" -ne 0 ]
  says "requiredLabels[0]: give allowedValues or pattern, not both"
  run kwctl run --request-path "$DATA/pod_gpu_labelled.json" --settings-path "$DATA/settings_invalid_typo.yml" "$POLICY"
  [ "$status" -ne 0 ]
  says "unknown field \`requireGpuLimit\`"
}

@test "serving hygiene: probes and rollout, on when configured, off by default" {
  run_policy deployment_serving_safe.json settings_workload_rules.yml
  allowed
  run_policy deployment_serving_no_probes.json settings_workload_rules.yml
  denied
  says "container 'vllm' serves (workload-type: interactive) without a readinessProbe"
  says "has no startupProbe: add one whose failureThreshold x periodSeconds is at least 300 s"
  says "spec.strategy.rollingUpdate.maxUnavailable is 25% (the default, as it is not set): a rollout takes 1 of 4 replicas"
  run_policy deployment_serving_no_probes.json
  allowed
  run_policy deployment_serving_short_startup.json settings_workload_rules.yml
  denied
  says "gives the model 30 s to load (failureThreshold 3 x periodSeconds 10), less than the 300 s required: raise failureThreshold to 30"
  run_policy deployment_serving_recreate.json settings_workload_rules.yml
  denied
  says "spec.strategy.type is Recreate"
  run_policy deployment_serving_recreate.json
  allowed
}

@test "training hygiene: deadline and /dev/shm, on when configured, off by default" {
  run_policy job_training_bounded.json settings_workload_rules.yml
  allowed
  run_policy job_training_no_deadline.json settings_workload_rules.yml
  denied
  says "spec.activeDeadlineSeconds is not set: a Job (workload-type: training) holds its GPUs until it ends"
  run_policy job_training_deadline_too_long.json settings_workload_rules.yml
  denied
  says "spec.activeDeadlineSeconds is 1209600, more than the 86400 s allowed"
  run_policy job_training_no_shm.json settings_workload_rules.yml
  denied
  says "holds 8 GPUs with no memory-backed /dev/shm"
  run_policy job_training_small_shm.json settings_workload_rules.yml
  denied
  says "is limited to 1Gi, less than 16Gi"
  run_policy job_training_no_deadline.json
  allowed
  run_policy job_training_no_shm.json
  allowed
}

@test "workloadRules naming a workload type the label may not take are invalid" {
  run kwctl run --request-path "$DATA/deployment_serving_safe.json" --settings-path "$DATA/settings_invalid_workload_rules.yml" "$POLICY"
  [ "$status" -ne 0 ]
  says "workloadRules.readinessProbe.workloadTypes[0]: 'serving' is not a value the workload-type label may take"
}

@test "device variables are denied with or without a GPU request; narrowing ones pass" {
  run_policy pod_gpu_visible_devices_all.json
  denied
  says "container 'vllm' sets NVIDIA_VISIBLE_DEVICES=all, which makes the container runtime hand it the GPUs that value names"
  run_policy pod_no_gpu_visible_devices.json
  denied
  says "container 'worker' sets NVIDIA_VISIBLE_DEVICES=0,1"
  run_policy pod_gpu_cuda_visible_devices.json
  allowed
}

@test "privileged and device hostPath on GPU nodes are denied; GPU tooling is allow-listed" {
  run_policy pod_gpu_privileged.json
  denied
  says "container 'dcgm' is privileged (securityContext.privileged: true) in a pod that requests GPUs"
  run_policy pod_gpu_privileged.json settings_device_tooling.yml
  allowed
  run_policy pod_tolerates_gpu_host_path_nvidia0.json
  denied
  says "volume 'gpu0' mounts the host path /dev/nvidia0, a GPU device (deviceAccess.deviceHostPaths: /dev/nvidia)"
}

@test "a device node is GPU access: denied in a pod that targets no GPU; a node agent may mount /dev" {
  run_policy pod_no_gpu_device_nodes.json
  denied
  says "Pod 'cuda-sideload' breaks the GPU admission rules (3 problems): 1) volume 'gpu0' mounts the host path /dev/nvidia0, a GPU device (deviceAccess.deviceHostPaths: /dev/nvidia), into a pod that requests no GPU but can be scheduled onto any GPU node without a taint"
  says "2) volume 'ctl' mounts the host path /dev/nvidiactl"
  says "3) volume 'uvm' mounts the host path /dev/nvidia-uvm"
  run_policy daemonset_node_agent_mounts_dev.json
  allowed
}

@test "a GPU runtime class without a GPU is denied" {
  run_policy pod_no_gpu_runtime_class_nvidia.json
  denied
  says "the pod requests no GPU but sets runtimeClassName: nvidia"
}

@test "envFrom on a GPU pod is allowed with a warning" {
  run_policy pod_gpu_env_from.json
  allowed
  says "container 'vllm' takes variables from ConfigMap 'vllm-settings' (envFrom), which the GPU admission policy cannot read"
}

@test "a GPU Operator-like DaemonSet is a node agent" {
  run_policy daemonset_gpu_operator_like.json
  allowed
  run_policy daemonset_gpu_operator_like.json settings_strict_daemonsets.yml
  denied
  says "(6 problems)"
}

@test "KAI Scheduler's fractional pod: accepted with labels and what KAI writes, a GPU pod without labels, the spoofed form denied" {
  run_policy pod_kai_gpu_sharing_labelled.json
  allowed
  run_policy pod_kai_gpu_sharing_unlabelled.json
  denied
  says "1) label 'workload-type' is missing (GPU pods must carry it)"
  run_policy pod_kai_spoofed_visible_devices.json
  denied
  says "sets NVIDIA_VISIBLE_DEVICES from ConfigMap 'gpu-sharing-bq7kx2z-shared-gpu-0' key 'NVIDIA_VISIBLE_DEVICES' (valueFrom)"
}

@test "invalid deviceAccess settings name the field" {
  run kwctl run --request-path "$DATA/pod_gpu_labelled.json" --settings-path "$DATA/settings_invalid_device_access.yml" "$POLICY"
  [ "$status" -ne 0 ]
  says "deviceAccess.deviceHostPaths.paths[1]: '/dev/dri/' is not an absolute path"
}

@test "an exception for the label rules excuses them and nothing else; expired, the denial says so" {
  run_policy pod_mig_slice_unlabelled.json settings_exceptions.yml
  allowed
  says '"exception":"exception=serving-labels-migration owner=platform-team@example.com expires=2027-09-28T00:00:00Z"'
  run_policy pod_gpu_missing_labels.json settings_exceptions.yml
  denied
  says "(1 problem): 1) container 'vllm' holds GPUs but requests no cpu and no memory"
  run_policy pod_mig_slice_unlabelled.json settings_exceptions_expired.yml
  denied
  says "(exception serving-labels-migration (owner platform-team@example.com) expired at 2026-11-16T00:00:00Z; renew it or fix the workload)"
}

@test "an exception naming no rule of the policy is invalid settings" {
  run kwctl run --request-path "$DATA/pod_gpu_labelled.json" --settings-path "$DATA/settings_invalid_exceptions.yml" "$POLICY"
  [ "$status" -eq 1 ]
  says "exceptions[0].rules[0]: 'maxGpusPerPod' is not a rule of this policy"
}

@test "gpuAccessLabel: GPUs only in a namespace whose Namespace carries the label" {
  run_policy pod_gpu_labelled.json settings_gpu_access.yml session_namespace_gpu_access.yml
  allowed
  run_policy pod_gpu_labelled.json settings_gpu_access.yml session_namespace_no_gpu_access.yml
  denied
  says "1) namespace ml-serving may not use GPUs: its Namespace has no label gpu-admission/gpu-access (gpuAccessLabel)"
}

@test "gpuAccessLabel: a Namespace the policy may not read denies, naming the grant" {
  run_policy pod_gpu_labelled.json settings_gpu_access.yml session_namespace_not_granted.yml
  denied
  says "cannot get v1/Namespace ml-serving: not granted to this policy: add {apiVersion: v1, kind: Namespace} to the ClusterAdmissionPolicy's contextAwareResources"
}

@test "gpuSharing: a KAI fraction for interactive work, and for batch only in a trusted namespace" {
  run_policy pod_kai_gpu_sharing_labelled.json settings_gpu_sharing.yml
  allowed
  run_policy pod_kai_fraction_batch.json settings_gpu_sharing.yml session_namespace_untrusted.yml
  denied
  says "shares a GPU through KAI Scheduler fractions (0.5 of one GPU through KAI Scheduler), which gpuSharing.allow does not allow to workload-type=batch in namespace ml-research"
  run_policy pod_kai_fraction_batch.json settings_gpu_sharing.yml session_namespace_trusted.yml
  allowed
}
