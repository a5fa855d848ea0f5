#!/usr/bin/env bats
# kwctl checks over test_data/ (the same cases as e2e/tests/gpu_capacity_gate_policy.rs).
# Context-aware calls are replayed from test_data/session_*.yml (kwctl's session format).
# Needs kwctl on PATH; skipped cleanly without it.

load ../../e2e/bats/kwctl

@test "below the threshold: accepted with the numbers" {
  run_replayed deployment_a100_4x2.json settings.yml session_a100_below.yml
  allowed 'used 40 + incoming 8 = 48 of 56 allocatable (85.7%), threshold 90%, fits'
}

@test "over the threshold: denied with the numbers" {
  run_replayed deployment_a100_4x2.json settings.yml session_a100_over.yml
  denied "pool a100: nvidia.com/gpu would be 58 of 64 allocatable (90.6%) with this workload's 8 (50 in use), above the 90% threshold"
}

@test "exactly at the threshold: accepted" {
  run_replayed deployment_a100_4x2.json settings.yml session_a100_exact.yml
  allowed '72 of 80 allocatable (90.0%)'
}

@test "empty pool: denied, no division by zero" {
  run_replayed deployment_a100_4x2.json settings.yml session_a100_empty.yml
  denied 'no schedulable node offers nvidia.com/gpu'
}

@test "host call error: fails closed naming the contextAwareResources entry" {
  run_replayed deployment_a100_4x2.json settings.yml session_a100_nodes_not_granted.yml
  denied 'add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy.s contextAwareResources'
}

@test "RBAC error on pods: fails closed naming the permission" {
  run_replayed deployment_a100_4x2.json settings.yml session_a100_pods_forbidden.yml
  denied "forbidden by RBAC: grant the policy-server's ServiceAccount list and watch on pods"
}

@test "unreadableCluster: warn: accepted with a warning" {
  run_replayed deployment_a100_4x2.json settings_fail_open.yml session_a100_nodes_not_granted.yml
  allowed 'GPU capacity was not checked: .*(accepted because unreadableCluster is warn)'
}

@test "failOpen: true, the old spelling of unreadableCluster: warn: accepted with a warning" {
  run_replayed deployment_a100_4x2.json settings_fail_open_old_spelling.yml session_a100_nodes_not_granted.yml
  allowed 'GPU capacity was not checked: .*(accepted because unreadableCluster is warn)'
}

@test "update: only the increase is charged" {
  run_replayed deployment_update_more_replicas.json settings.yml session_a100_over.yml
  allowed 'used 50 + incoming 2 = 52 of 64'
}

@test "update of the image: the rollout's maxSurge pod is charged" {
  run_replayed deployment_update_image_only.json settings.yml session_a100_over.yml
  allowed 'used 50 + incoming 2 = 52 of 64' \
    '1 extra pod charged (maxSurge 25% (the default) of 4 replicas, rounded up'
}

@test "update of the image with chargeRolloutSurge false: accepted without host calls" {
  run_replayed deployment_update_image_only.json settings_no_surge.yml
  allowed
}

@test "rollout of 10 replicas with maxSurge 25%: 3 pods charged" {
  run_replayed deployment_update_rollout_10.json settings.yml session_a100_below.yml
  allowed 'used 40 + incoming 6 = 46 of 56 allocatable' \
    '3 extra pods charged (maxSurge 25% (the default) of 10 replicas, rounded up'
}

@test "scale subresource: the parent is read and the added replicas charged" {
  run_replayed deployment_scale_up.json settings.yml session_scale_a100_over.yml
  denied "with this workload's 8 (50 in use)"
}

@test "scale subresource: cannot read the Deployment, fails closed" {
  run_replayed deployment_scale_up.json settings.yml session_scale_deployment_forbidden.yml
  denied 'get on deployments (apiGroup apps)'
}

@test "scale down: accepted without host calls" {
  run_replayed deployment_scale_down.json settings.yml
  allowed
}

@test "time-sliced pool: replicas on both sides" {
  run_replayed deployment_l4_timesliced.json settings.yml session_l4_timesliced.yml
  allowed '116 of 128 allocatable (90.6%), threshold 95%'
}

@test "MIG pool: checked per profile" {
  run_replayed job_mig_3g.json settings.yml session_a100_mig.yml
  denied 'nvidia.com/mig-3g.40gb would be 15 of 16 allocatable (93.8%)'
}

@test "custom kind (KServe InferenceService)" {
  run_replayed inferenceservice_h100.json settings.yml session_h100_below.yml
  allowed 'h100: nvidia.com/gpu used 16 + incoming 8'
}

@test "pod of a gated controller: not charged twice" {
  run_replayed pod_owned_by_replicaset.json settings.yml
  allowed 'created by ReplicaSet llm-a100-7d9f8c6b5'
}

@test "chargePods all: the same pod is charged" {
  run_replayed pod_owned_by_replicaset.json settings_charge_all.yml session_a100_over.yml
  allowed 'used 50 + incoming 2 = 52 of 64'
}

@test "no GPU, no pool, exempt namespace: accepted without host calls" {
  for r in deployment_cpu_only.json deployment_no_pool.json deployment_exempt_namespace.json; do
    run_replayed "$r" settings.yml
    allowed
  done
}

@test "malformed object: denied with code 400" {
  run_replayed deployment_malformed.json settings.yml
  denied '"code":400'
}

@test "usage from ResourceQuotas, capacity declared: accepted, saying where the numbers come from" {
  run_replayed deployment_a100_4x2_priority.json settings_quotas.yml session_quotas_found.yml
  allowed 'used 40 from 6 ResourceQuotas + incoming 8 = 48 of capacity 64 declared in settings (75.0%)'
}

@test "usage from ResourceQuotas over the threshold: denied" {
  run_replayed deployment_a100_4x2_priority.json settings_quotas.yml session_quotas_over.yml
  denied 'would be 58 of capacity 64 declared in settings (90.6%) with this workload.s 8 (50 in use from 6 ResourceQuotas)'
}

@test "no ResourceQuota in the namespace: denied with the quota to create" {
  run_replayed deployment_a100_4x2_priority.json settings_quotas.yml session_quotas_none.yml
  denied 'namespace ml-serving has no ResourceQuota labelled gpu-admission/pool=a100.*Create it: {apiVersion: v1, kind: ResourceQuota'
}

@test "a ResourceQuota without the pool's PriorityClass scope: denied naming it" {
  run_replayed deployment_a100_4x2_priority.json settings_quotas.yml session_quotas_unscoped.yml
  denied "ResourceQuota ml-training/gpu-a100 is not scoped to the pool's priority classes"
}

@test "ResourceQuotas forbidden: fails closed naming the permission" {
  run_replayed deployment_a100_4x2_priority.json settings_quotas.yml session_quotas_forbidden.yml
  denied "forbidden by RBAC: grant the policy-server's ServiceAccount list and watch on resourcequotas"
}

@test "quota pool, template without the pool's PriorityClass: denied without host calls" {
  run_replayed deployment_a100_4x2.json settings_quotas.yml
  denied 'spec.template.spec has no priorityClassName'
}

@test "pods with capacity declared: only the Pods are listed" {
  run_replayed deployment_l4_timesliced.json settings_quotas.yml session_l4_pods_declared.yml
  allowed '116 of capacity 128 declared in settings (90.6%)'
}

@test "invalid settings exit 1" {
  run kwctl run --request-path "$DATA/deployment_a100_4x2.json" --settings-path "$DATA/settings_invalid.yml" "$POLICY"
  [ "$status" -eq 1 ]
  matches "Provided settings are not valid: pools\[1\].name: 'a100' is already the name of pools\[0\]"
}

@test "DRA: 3 replicas x 4 devices of a claim template, under and over the threshold" {
  run_replayed deployment_dra_a100_3x4.json settings_quotas.yml session_dra_quotas_found.yml
  allowed 'incoming 12 = 52 of capacity 64 declared in settings (81.3%)'
  run_replayed deployment_dra_a100_3x4.json settings_quotas.yml session_dra_quotas_over.yml
  denied "pool a100: nvidia.com/gpu would be 62 of capacity 64 declared in settings (96.9%) with this workload's 12"
  run_replayed deployment_dra_a100_3x4.json settings.yml session_dra_a100_over.yml
  matches "would be 62 of 64 allocatable (96.9%) with this workload's 12 (50 in use)"
}

@test "DRA: a claim that cannot be counted is denied before the pool is read, even with unreadableCluster: warn" {
  for case in "settings_quotas.yml session_dra_not_found.yml" "settings.yml session_dra_not_granted.yml" \
              "settings_fail_open.yml session_dra_not_granted.yml" "settings.yml session_dra_allocation_all.yml"; do
    run_replayed deployment_dra_a100_3x4.json $case
    denied 'the capacity gate cannot count the GPUs of this workload, so it cannot admit it: spec.template.spec: resource claim .gpus. (ResourceClaimTemplate four-gpus)'
  done
}

@test "KAI Scheduler: 3 pods of gpu-fraction 0.5 are charged 2 GPUs" {
  run_replayed deployment_kai_fraction_3x.json settings.yml session_a100_below.yml
  allowed 'used 40 + incoming 2 = 42 of 56 allocatable (75.0%)'
}

@test "pool scaled to zero with a static ceiling: accepted under the ceiling" {
  run_replayed deployment_a100_4x2.json settings_static_ceiling.yml session_a100_empty.yml
  allowed '8 of 64 it can grow to (12.5%), threshold 90%, fits (ceiling 64 from maxAllocatable in settings, 0 allocatable now)'
}

@test "pool scaled to zero with a Karpenter NodePool: its spec.limits is the ceiling" {
  run_replayed deployment_a100_4x2.json settings_karpenter.yml session_karpenter_zero_nodes.yml
  allowed '8 of 64 it can grow to (12.5%).*ceiling 64 from NodePool gpu-a100 spec.limits'
}

@test "Karpenter NodePool not found or not granted: fails closed" {
  run_replayed deployment_a100_4x2.json settings_karpenter.yml session_karpenter_not_found.yml
  denied 'cannot get karpenter.sh/v1/NodePool gpu-a100: not found'
  run_replayed deployment_a100_4x2.json settings_karpenter.yml session_karpenter_not_granted.yml
  denied 'add {apiVersion: karpenter.sh/v1, kind: NodePool} to the ClusterAdmissionPolicy.s contextAwareResources'
}

@test "suspended Job: not charged at create, charged in full when unsuspended" {
  run_replayed job_a100_suspended.json settings.yml
  allowed 'is suspended (spec.suspend: true): not charged until the update that unsuspends it'
  run_replayed job_a100_unsuspended.json settings.yml session_a100_over.yml
  denied 'unsuspended (spec.suspend: true -> false): charged in full'
}

@test "the Kueue label excuses nothing by itself: no LocalQueue, denied over the team budget; with one, left to the queue" {
  run_replayed job_kueue_unsuspended.json settings_team_budgets.yml session_kueue_local_queue_missing.yml
  denied 'team ml-a would hold 20 of its 16 nvidia.com/gpu'
  says 'LocalQueue ml-serving/team-a does not exist: gated like any workload'
  run_replayed job_kueue_unsuspended.json settings_team_budgets.yml session_kueue_local_queue_found.yml
  allowed 'LocalQueue ml-serving/team-a exists and Kueue holds the Job (suspended), so its queue admits it'
  run_replayed job_kueue_unsuspended.json settings_team_budgets.yml session_kueue_local_queue_not_granted.yml
  denied 'team ml-a would hold 20 of its 16 nvidia.com/gpu'
  run_replayed job_kueue_a100.json settings.yml
  allowed 'is suspended (spec.suspend: true): not charged until the update that unsuspends it'
}

@test "a 16-GPU pod on 8-GPU nodes: never schedulable, the largest node named" {
  run_replayed pod_a100_16gpu.json settings.yml session_a100_8gpu_nodes.yml
  denied 'the largest, gpu-a100-0, has 8 nvidia.com/gpu allocatable), so it can never be scheduled'
}

@test "fragmentation: warned by default, denied with fragmentation deny" {
  run_replayed deployment_a100_1x4.json settings.yml session_a100_fragmented.yml
  allowed '"warnings":\[".*the largest free block is 3 nvidia.com/gpu on gpu-a100-0'
  run_replayed deployment_a100_1x4.json settings_fragmentation_deny.yml session_a100_fragmented.yml
  denied '(fragmentation: deny)'
}

@test "alternatives: the first with room is named, or none has room" {
  run_replayed deployment_a100_4x2.json settings_alternatives.yml session_alternatives_batch_room.yml
  denied 'Pool batch has room for 20 nvidia.com/gpu'
  run_replayed deployment_a100_4x2.json settings_alternatives.yml session_alternatives_none.yml
  [ "$status" -eq 0 ]
  matches 'No alternative pool has room: h100 (room for 1 nvidia.com/gpu), batch (room for 0 nvidia.com/gpu)'
}

@test "threshold by schedule window: the module reads the host clock and names the window" {
  run_replayed deployment_a100_4x2.json settings_peak.yml session_a100_below.yml
  denied 'threshold 80% in window peak, over'
}

@test "exception: the over-threshold Deployment excused, then named expired" {
  run_replayed deployment_a100_4x2.json settings_exceptions.yml session_a100_over.yml
  allowed '"exception":"exception=llm-a100-launch owner=serving-team@example.com expires=2027-09-28T00:00:00Z"'
  run_replayed deployment_a100_4x2.json settings_exceptions_expired.yml session_a100_over.yml
  denied '(exception llm-a100-launch (owner serving-team@example.com) expired at 2026-11-16T00:00:00Z; renew it or fix the workload)'
}

@test "namespace ResourceQuota: over it denied with the numbers, exactly at it accepted" {
  run_replayed deployment_a100_4x2.json settings_namespace_quotas.yml session_ns_quota_over.yml
  denied 'ResourceQuota gpu-quota would hold 20 of its 16 requests.nvidia.com/gpu (12 used + 8 incoming): 2 of the 4 incoming replicas (2 nvidia.com/gpu each) fit'
  run_replayed deployment_a100_4x2.json settings_namespace_quotas.yml session_ns_quota_within.yml
  allowed 'gpu-quota: requests.nvidia.com/gpu used 8 + incoming 8 = 16 of 16, fits'
}

@test "namespace ResourceQuota: a PriorityClass scope counts its class only; scale-up over it denied" {
  run_replayed deployment_a100_4x2_priority.json settings_namespace_quotas.yml session_ns_quota_priority.yml
  denied 'ResourceQuota a100-high-gpus would hold 8 of its 4'
  run_replayed deployment_a100_4x2.json settings_namespace_quotas.yml session_ns_quota_priority.yml
  allowed
  run_replayed deployment_scale_up.json settings_namespace_quotas.yml session_ns_quota_scale_over.yml
  denied 'ResourceQuota gpu-quota would hold 20 of its 16'
}

@test "namespace ResourceQuotas not granted: accepted with a warning naming the grant" {
  run_replayed deployment_a100_4x2.json settings_namespace_quotas.yml session_ns_quota_not_granted.yml
  allowed 'its ResourceQuotas were not checked: cannot list v1/ResourceQuota: not granted to this policy: add {apiVersion: v1, kind: ResourceQuota}'
}

@test "upgrade: the namespace-quota check on by default warns until granted; switched on explicitly it denies" {
  run_replayed deployment_a100_4x2.json settings_namespace_quotas_default.yml session_ns_quota_not_granted.yml
  allowed 'checkNamespaceQuotas is on by default and only warns until it is granted'
  run_replayed deployment_a100_4x2.json settings_namespace_quotas_explicit.yml session_ns_quota_not_granted.yml
  denied "namespace ml-serving: its ResourceQuotas: cannot list v1/ResourceQuota: not granted to this policy: add {apiVersion: v1, kind: ResourceQuota} to the ClusterAdmissionPolicy's contextAwareResources"
  run_replayed deployment_a100_4x2.json settings_namespace_quotas_default.yml session_ns_quota_within.yml
  allowed 'gpu-quota: requests.nvidia.com/gpu used 8 + incoming 8 = 16 of 16, fits'
}

@test "team budget: over the team's GPUs across namespaces, over its pool limit" {
  run_replayed deployment_a100_4x2.json settings_team_budgets.yml session_team_over.yml
  denied 'team ml-a would hold 20 of its 16 nvidia.com/gpu (12 used + 8 incoming)'
  run_replayed deployment_a100_4x2.json settings_team_budgets.yml session_team_pool_over.yml
  matches 'team ml-a would hold 12 of its 8 nvidia.com/gpu in pool a100 (4 used + 8 incoming)'
  run_replayed deployment_a100_4x2.json settings_team_budgets.yml session_team_within.yml
  allowed
}

@test "team budgets ConfigMap: read; missing, not granted or malformed denied naming it" {
  run_replayed deployment_a100_4x2.json settings_team_budgets_configmap.yml session_team_configmap.yml
  matches 'budget in ConfigMap gpu-system/gpu-team-budgets'
  run_replayed deployment_a100_4x2.json settings_team_budgets_configmap.yml session_team_configmap_missing.yml
  denied 'cannot get v1/ConfigMap gpu-system/gpu-team-budgets: not found'
  run_replayed deployment_a100_4x2.json settings_team_budgets_configmap.yml session_team_configmap_not_granted.yml
  matches 'add {apiVersion: v1, kind: ConfigMap} to the ClusterAdmissionPolicy'
  run_replayed deployment_a100_4x2.json settings_team_budgets_configmap.yml session_team_configmap_malformed.yml
  matches 'the team budgets ConfigMap gpu-system/gpu-team-budgets is malformed'
}
