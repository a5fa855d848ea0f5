#!/usr/bin/env bats
# kwctl checks over test_data/ (the same cases as e2e/tests/gpu_autoscaler_policy.rs).
# Context-aware calls are replayed from test_data/session_*.yml (kwctl's session format).
# Needs kwctl on PATH; skipped cleanly without it.

load ../../e2e/bats/kwctl

setup() {
  if ! command -v kwctl >/dev/null 2>&1; then
    skip "kwctl is not on PATH"
  fi
  POLICY="${POLICY_WASM:-annotated-policy.wasm}"
  DATA="$BATS_TEST_DIRNAME/test_data"
  cd "$BATS_TEST_DIRNAME"
}

# run_policy <request> <settings> [<session>]
run_policy() {
  # With --allow-context-aware, kwctl needs a cluster or a session to replay: a case that
  # makes no host call gets the empty session (a call would then fail the case).
  local args=(run --request-path "$DATA/$1" --settings-path "$DATA/$2" --allow-context-aware
    --replay-host-capabilities-interactions "$DATA/${3:-session_no_calls.yml}")
  run kwctl "${args[@]}" "$POLICY"
}

@test "HPA on cpu only for a GPU Deployment: denied with the fix" {
  run_policy hpa_cpu_gpu_deployment.json settings.yml session_deployment_a100.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*on cpu only, and CPU utilization does not follow GPU inference load. Scale on requests per second.*') -ne 0 ]
}

@test "HPA on an External metric within the pool: accepted" {
  run_policy hpa_external_gpu_deployment.json settings.yml session_deployment_a100.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*a100: 64 nvidia.com/gpu (nodes), 32 fit.*') -ne 0 ]
}

@test "maxReplicas above the pool: denied with the largest that fits" {
  run_policy hpa_max_replicas_over_pool.json settings.yml session_deployment_a100.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*maxReplicas 40 x 2 nvidia.com/gpu per replica = 80 nvidia.com/gpu, more than pool a100 can ever hold.*') -ne 0 ]
  [ $(expr "$output" : '.*The largest maxReplicas that fits is 32: set maxReplicas to 32 or less.*') -ne 0 ]
}

@test "KEDA ScaledObject with a prometheus trigger: accepted without warning" {
  run_policy scaledobject_prometheus.json settings.yml session_deployment_a100.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*"warnings":null.*') -ne 0 ]
}

@test "KEDA ScaledObject with a cpu trigger: accepted with a warning" {
  run_policy scaledobject_cpu.json settings.yml session_deployment_a100.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*"warnings":\["ScaledObject ml-serving/llm-a100: it scales Deployment llm-a100 (2 nvidia.com/gpu per replica) on cpu triggers only.*') -ne 0 ]
}

@test "non-GPU target: accepted after the target lookup alone" {
  # The session holds only the get of the Deployment: any further call would fail the case.
  run_policy hpa_cpu_web.json settings.yml session_deployment_web.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*Deployment frontend/web: no GPU.*') -ne 0 ]
}

@test "per-namespace maximum: denied with the largest that fits" {
  run_policy hpa_research_namespace_max.json settings.yml session_deployment_research.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*more than the 16 GPUs one autoscaler may scale to in namespace research-nlp.*') -ne 0 ]
}

@test "custom kind target (LeaderWorkerSet) in a declared pool: accepted" {
  run_policy hpa_leaderworkerset.json settings.yml session_leaderworkerset.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*16 nvidia.com/gpu per replica, maxReplicas 3.*') -ne 0 ]
}

@test "ScaledJob over a declared capacity: denied without a host call" {
  run_policy scaledjob_over_declared_capacity.json settings.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*The largest maxReplicaCount that fits is 8.*') -ne 0 ]
}

@test "target missing: fails closed" {
  run_policy hpa_external_gpu_deployment.json settings.yml session_deployment_not_found.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*its target Deployment ml-serving/llm-a100 was not found.*') -ne 0 ]
}

@test "target not readable (RBAC): fails closed naming the permission" {
  run_policy hpa_external_gpu_deployment.json settings.yml session_deployment_forbidden.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : ".*grant the policy-server's ServiceAccount get on deployments (apiGroup apps).*") -ne 0 ]
}

@test "target not granted: fails closed naming the contextAwareResources entry" {
  run_policy hpa_external_gpu_deployment.json settings.yml session_deployment_not_granted.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*add {apiVersion: apps/v1, kind: Deployment} to the ClusterAdmissionPolicy.s contextAwareResources.*') -ne 0 ]
}

@test "pool Nodes not granted: fails closed" {
  run_policy hpa_external_gpu_deployment.json settings.yml session_nodes_not_granted.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*pool a100: cannot list v1/Node.*') -ne 0 ]
}

@test "failOpen: accepted with a warning" {
  run_policy hpa_external_gpu_deployment.json settings_fail_open.yml session_deployment_forbidden.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*GPU limits were not checked.*') -ne 0 ]
}

@test "resourceMetricsOnly: warn turns the HPA denial into a warning" {
  run_policy hpa_cpu_gpu_deployment.json settings_warn_only.yml session_deployment_a100.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*"warnings":\["HorizontalPodAutoscaler ml-serving/llm-a100: it scales.*') -ne 0 ]
}

@test "unknown target kind, metadata-only update: accepted without host calls" {
  run_policy hpa_unknown_target_kind.json settings.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*are not counted: Rollout is not a Deployment.*') -ne 0 ]
  run_policy hpa_update_metadata_only.json settings.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
}

@test "malformed autoscaler: denied with code 400" {
  run_policy hpa_malformed.json settings.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*"code":400.*') -ne 0 ]
}

@test "invalid settings exit 1" {
  run kwctl run --request-path "$DATA/hpa_cpu_gpu_deployment.json" --settings-path "$DATA/settings_invalid.yml" "$POLICY"
  [ "$status" -eq 1 ]
  [ $(expr "$output" : ".*Provided settings are not valid: pools\[1\].name: 'a100' is already the name of pools\[0\].*") -ne 0 ]
}

@test "DRA target: 4 devices per replica from its claim template bound maxReplicas" {
  run_policy hpa_max_replicas_over_pool.json settings.yml session_deployment_a100_dra.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*maxReplicas 40 x 4 nvidia.com/gpu per replica = 160 nvidia.com/gpu.*The largest maxReplicas that fits is 16.*') -ne 0 ]
  run_policy hpa_max_replicas_over_pool.json settings.yml session_deployment_a100_dra_not_found.yml
  [ $(expr "$output" : '.*the GPUs of Deployment llm-a100 cannot be counted, so this autoscaler cannot be checked.*') -ne 0 ]
}
