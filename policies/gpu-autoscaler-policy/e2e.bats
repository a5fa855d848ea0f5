#!/usr/bin/env bats
# kwctl checks over test_data/ (the same cases as e2e/tests/gpu_autoscaler_policy.rs).
# Context-aware calls are replayed from test_data/session_*.yml (kwctl's session format).
# Needs kwctl on PATH; skipped cleanly without it.

load ../../e2e/bats/kwctl

@test "HPA on cpu only for a GPU Deployment: denied with the fix" {
  run_replayed hpa_cpu_gpu_deployment.json settings.yml session_deployment_a100.yml
  denied 'on cpu only, and CPU utilization does not follow GPU inference load. Scale on requests per second'
}

@test "HPA on an External metric within the pool: accepted" {
  run_replayed hpa_external_gpu_deployment.json settings.yml session_deployment_a100.yml
  allowed 'a100: 64 nvidia.com/gpu (nodes), 32 fit'
}

@test "maxReplicas above the pool: denied with the largest that fits" {
  run_replayed hpa_max_replicas_over_pool.json settings.yml session_deployment_a100.yml
  denied 'maxReplicas 40 x 2 nvidia.com/gpu per replica = 80 nvidia.com/gpu, more than pool a100 can ever hold' \
    'The largest maxReplicas that fits is 32: set maxReplicas to 32 or less'
}

@test "KEDA ScaledObject with a prometheus trigger: accepted without warning" {
  run_replayed scaledobject_prometheus.json settings.yml session_deployment_a100.yml
  allowed '"warnings":null'
}

@test "KEDA ScaledObject with a cpu trigger: accepted with a warning" {
  run_replayed scaledobject_cpu.json settings.yml session_deployment_a100.yml
  allowed '"warnings":\["ScaledObject ml-serving/llm-a100: it scales Deployment llm-a100 (2 nvidia.com/gpu per replica) on cpu triggers only'
}

@test "non-GPU target: accepted after the target lookup alone" {
  # The session holds only the get of the Deployment: any further call would fail the case.
  run_replayed hpa_cpu_web.json settings.yml session_deployment_web.yml
  allowed 'Deployment frontend/web: no GPU'
}

@test "per-namespace maximum: denied with the largest that fits" {
  run_replayed hpa_research_namespace_max.json settings.yml session_deployment_research.yml
  denied 'more than the 16 GPUs one autoscaler may scale to in namespace research-nlp'
}

@test "custom kind target (LeaderWorkerSet) in a declared pool: accepted" {
  run_replayed hpa_leaderworkerset.json settings.yml session_leaderworkerset.yml
  allowed '16 nvidia.com/gpu per replica, maxReplicas 3'
}

@test "ScaledJob over a declared capacity: denied without a host call" {
  run_replayed scaledjob_over_declared_capacity.json settings.yml
  denied 'The largest maxReplicaCount that fits is 8'
}

@test "target missing: fails closed" {
  run_replayed hpa_external_gpu_deployment.json settings.yml session_deployment_not_found.yml
  denied 'its target Deployment ml-serving/llm-a100 was not found'
}

@test "target not readable (RBAC): fails closed naming the permission" {
  run_replayed hpa_external_gpu_deployment.json settings.yml session_deployment_forbidden.yml
  denied "forbidden by RBAC: grant the policy-server's ServiceAccount get on deployments (apiGroup apps)"
}

@test "target not granted: fails closed naming the contextAwareResources entry" {
  run_replayed hpa_external_gpu_deployment.json settings.yml session_deployment_not_granted.yml
  denied 'add {apiVersion: apps/v1, kind: Deployment} to the ClusterAdmissionPolicy.s contextAwareResources'
}

@test "pool Nodes not granted: fails closed" {
  run_replayed hpa_external_gpu_deployment.json settings.yml session_nodes_not_granted.yml
  denied 'pool a100: cannot list v1/Node'
}

@test "unreadableCluster: warn: accepted with a warning" {
  run_replayed hpa_external_gpu_deployment.json settings_fail_open.yml session_deployment_forbidden.yml
  allowed 'GPU limits were not checked: .*(accepted because unreadableCluster is warn)'
}

@test "failOpen: true, the old spelling of unreadableCluster: warn: accepted with a warning" {
  run_replayed hpa_external_gpu_deployment.json settings_fail_open_old_spelling.yml session_deployment_forbidden.yml
  allowed 'GPU limits were not checked: .*(accepted because unreadableCluster is warn)'
}

@test "resourceMetricsOnly: warn turns the HPA denial into a warning" {
  run_replayed hpa_cpu_gpu_deployment.json settings_warn_only.yml session_deployment_a100.yml
  allowed '"warnings":\["HorizontalPodAutoscaler ml-serving/llm-a100: it scales'
}

@test "unknown target kind, metadata-only update: accepted without host calls" {
  run_replayed hpa_unknown_target_kind.json settings.yml
  allowed 'are not counted: Rollout is not a Deployment'
  run_replayed hpa_update_metadata_only.json settings.yml
  allowed
}

@test "malformed autoscaler: denied with code 400" {
  run_replayed hpa_malformed.json settings.yml
  denied '"code":400'
}

@test "invalid settings exit 1" {
  run kwctl run --request-path "$DATA/hpa_cpu_gpu_deployment.json" --settings-path "$DATA/settings_invalid.yml" "$POLICY"
  [ "$status" -eq 1 ]
  matches "Provided settings are not valid: pools\[1\].name: 'a100' is already the name of pools\[0\]"
}

@test "DRA target: 4 devices per replica from its claim template bound maxReplicas" {
  run_replayed hpa_max_replicas_over_pool.json settings.yml session_deployment_a100_dra.yml
  denied 'maxReplicas 40 x 4 nvidia.com/gpu per replica = 160 nvidia.com/gpu.*The largest maxReplicas that fits is 16'
  run_replayed hpa_max_replicas_over_pool.json settings.yml session_deployment_a100_dra_not_found.yml
  matches 'the GPUs of Deployment llm-a100 cannot be counted, so this autoscaler cannot be checked'
}
