#!/usr/bin/env bats
# kwctl checks over test_data/ (the same cases as e2e/tests/gpu_capacity_gate_policy.rs).
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

@test "below the threshold: accepted with the numbers" {
  run_policy deployment_a100_4x2.json settings.yml session_a100_below.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*used 40 + incoming 8 = 48 of 56 allocatable (85.7%), threshold 90%, fits.*') -ne 0 ]
}

@test "over the threshold: denied with the numbers" {
  run_policy deployment_a100_4x2.json settings.yml session_a100_over.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : ".*pool a100: nvidia.com/gpu would be 58 of 64 allocatable (90.6%) with this workload's 8 (50 in use), above the 90% threshold.*") -ne 0 ]
}

@test "exactly at the threshold: accepted" {
  run_policy deployment_a100_4x2.json settings.yml session_a100_exact.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*72 of 80 allocatable (90.0%).*') -ne 0 ]
}

@test "empty pool: denied, no division by zero" {
  run_policy deployment_a100_4x2.json settings.yml session_a100_empty.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*no schedulable node offers nvidia.com/gpu.*') -ne 0 ]
}

@test "host call error: fails closed naming the contextAwareResources entry" {
  run_policy deployment_a100_4x2.json settings.yml session_a100_nodes_not_granted.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy.s contextAwareResources.*') -ne 0 ]
}

@test "RBAC error on pods: fails closed naming the permission" {
  run_policy deployment_a100_4x2.json settings.yml session_a100_pods_forbidden.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : ".*grant the policy-server's ServiceAccount list and watch on pods.*") -ne 0 ]
}

@test "failOpen: accepted with a warning" {
  run_policy deployment_a100_4x2.json settings_fail_open.yml session_a100_nodes_not_granted.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*GPU capacity was not checked.*') -ne 0 ]
}

@test "update: only the increase is charged" {
  run_policy deployment_update_more_replicas.json settings.yml session_a100_over.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*used 50 + incoming 2 = 52 of 64.*') -ne 0 ]
}

@test "update without growth: accepted without host calls" {
  run_policy deployment_update_image_only.json settings.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
}

@test "scale subresource: the parent is read and the added replicas charged" {
  run_policy deployment_scale_up.json settings.yml session_scale_a100_over.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : ".*with this workload's 8 (50 in use).*") -ne 0 ]
}

@test "scale subresource: cannot read the Deployment, fails closed" {
  run_policy deployment_scale_up.json settings.yml session_scale_deployment_forbidden.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*get on deployments (apiGroup apps).*') -ne 0 ]
}

@test "scale down: accepted without host calls" {
  run_policy deployment_scale_down.json settings.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
}

@test "time-sliced pool: replicas on both sides" {
  run_policy deployment_l4_timesliced.json settings.yml session_l4_timesliced.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*116 of 128 allocatable (90.6%), threshold 95%.*') -ne 0 ]
}

@test "MIG pool: checked per profile" {
  run_policy job_mig_3g.json settings.yml session_a100_mig.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*nvidia.com/mig-3g.40gb would be 15 of 16 allocatable (93.8%).*') -ne 0 ]
}

@test "custom kind (KServe InferenceService)" {
  run_policy inferenceservice_h100.json settings.yml session_h100_below.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*h100: nvidia.com/gpu used 16 + incoming 8.*') -ne 0 ]
}

@test "pod of a gated controller: not charged twice" {
  run_policy pod_owned_by_replicaset.json settings.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*created by ReplicaSet llm-a100-7d9f8c6b5.*') -ne 0 ]
}

@test "chargePods all: the same pod is charged" {
  run_policy pod_owned_by_replicaset.json settings_charge_all.yml session_a100_over.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*used 50 + incoming 2 = 52 of 64.*') -ne 0 ]
}

@test "no GPU, no pool, exempt namespace: accepted without host calls" {
  for r in deployment_cpu_only.json deployment_no_pool.json deployment_exempt_namespace.json; do
    run_policy "$r" settings.yml
    [ "$status" -eq 0 ]
    [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  done
}

@test "malformed object: denied with code 400" {
  run_policy deployment_malformed.json settings.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*"code":400.*') -ne 0 ]
}

@test "usage from ResourceQuotas, capacity declared: accepted, saying where the numbers come from" {
  run_policy deployment_a100_4x2_priority.json settings_quotas.yml session_quotas_found.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*used 40 from 6 ResourceQuotas + incoming 8 = 48 of capacity 64 declared in settings (75.0%).*') -ne 0 ]
}

@test "usage from ResourceQuotas over the threshold: denied" {
  run_policy deployment_a100_4x2_priority.json settings_quotas.yml session_quotas_over.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*would be 58 of capacity 64 declared in settings (90.6%) with this workload.s 8 (50 in use from 6 ResourceQuotas).*') -ne 0 ]
}

@test "no ResourceQuota in the namespace: denied with the quota to create" {
  run_policy deployment_a100_4x2_priority.json settings_quotas.yml session_quotas_none.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*namespace ml-serving has no ResourceQuota labelled gpu-admission/pool=a100.*Create it: {apiVersion: v1, kind: ResourceQuota.*') -ne 0 ]
}

@test "a ResourceQuota without the pool's PriorityClass scope: denied naming it" {
  run_policy deployment_a100_4x2_priority.json settings_quotas.yml session_quotas_unscoped.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : ".*ResourceQuota ml-training/gpu-a100 is not scoped to the pool's priority classes.*") -ne 0 ]
}

@test "ResourceQuotas forbidden: fails closed naming the permission" {
  run_policy deployment_a100_4x2_priority.json settings_quotas.yml session_quotas_forbidden.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : ".*grant the policy-server's ServiceAccount list and watch on resourcequotas.*") -ne 0 ]
}

@test "quota pool, template without the pool's PriorityClass: denied without host calls" {
  run_policy deployment_a100_4x2.json settings_quotas.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*spec.template.spec has no priorityClassName.*') -ne 0 ]
}

@test "pods with capacity declared: only the Pods are listed" {
  run_policy deployment_l4_timesliced.json settings_quotas.yml session_l4_pods_declared.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*116 of capacity 128 declared in settings (90.6%).*') -ne 0 ]
}

@test "invalid settings exit 1" {
  run kwctl run --request-path "$DATA/deployment_a100_4x2.json" --settings-path "$DATA/settings_invalid.yml" "$POLICY"
  [ "$status" -eq 1 ]
  [ $(expr "$output" : ".*Provided settings are not valid: pools\[1\].name: 'a100' is already the name of pools\[0\].*") -ne 0 ]
}

@test "DRA: 3 replicas x 4 devices of a claim template, under and over the threshold" {
  run_policy deployment_dra_a100_3x4.json settings_quotas.yml session_dra_quotas_found.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*incoming 12 = 52 of capacity 64 declared in settings (81.3%).*') -ne 0 ]
  run_policy deployment_dra_a100_3x4.json settings_quotas.yml session_dra_quotas_over.yml
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : ".*pool a100: nvidia.com/gpu would be 62 of capacity 64 declared in settings (96.9%) with this workload's 12.*") -ne 0 ]
  run_policy deployment_dra_a100_3x4.json settings.yml session_dra_a100_over.yml
  [ $(expr "$output" : ".*would be 62 of 64 allocatable (96.9%) with this workload's 12 (50 in use).*") -ne 0 ]
}

@test "DRA: a claim that cannot be counted is denied before the pool is read, even with failOpen" {
  for case in "settings_quotas.yml session_dra_not_found.yml" "settings.yml session_dra_not_granted.yml" \
              "settings_fail_open.yml session_dra_not_granted.yml" "settings.yml session_dra_allocation_all.yml"; do
    run_policy deployment_dra_a100_3x4.json $case
    [ "$status" -eq 0 ]
    [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
    [ $(expr "$output" : '.*the capacity gate cannot count the GPUs of this workload, so it cannot admit it: spec.template.spec: resource claim .gpus. (ResourceClaimTemplate four-gpus).*') -ne 0 ]
  done
}

@test "KAI Scheduler: 3 pods of gpu-fraction 0.5 are charged 2 GPUs" {
  run_policy deployment_kai_fraction_3x.json settings.yml session_a100_below.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*used 40 + incoming 2 = 42 of 56 allocatable (75.0%).*') -ne 0 ]
}
