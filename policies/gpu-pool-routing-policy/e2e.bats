#!/usr/bin/env bats
# kwctl checks over test_data/, the same requests e2e/tests/gpu_pool_routing_policy.rs runs
# through the project's harness. Needs kwctl on PATH and an annotated module:
#   kwctl annotate -m metadata.yml -u README.md -o annotated-policy.wasm \
#     ../../target/wasm32-wasip1/release/gpu_pool_routing_policy.wasm
# Skipped cleanly when kwctl is not installed.

load ../../e2e/bats/kwctl

setup() {
  if ! command -v kwctl >/dev/null 2>&1; then
    skip "kwctl is not on PATH"
  fi
  POLICY="${POLICY_WASM:-annotated-policy.wasm}"
  DATA="$BATS_TEST_DIRNAME/test_data"
  SETTINGS="$DATA/settings.yml"
}

# Runs kwctl on a request with settings.yml (or $2); output in $output.
route() {
  run kwctl run --request-path "$DATA/$1" --settings-path "${2:-$SETTINGS}" "$POLICY"
}

# The decoded JSONPatch of the last kwctl run.
patch_ops() {
  echo "$output" | sed -n 's/.*"patch":"\([^"]*\)".*/\1/p' | base64 -d
}

@test "Pod is routed: pool label, nodeSelector, toleration" {
  route pod_batch.json
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*"patchType":"JSONPatch".*') -ne 0 ]
  ops="$(patch_ops)"
  [ $(expr "$ops" : '.*"path":"/metadata/labels/gpu-admission~1pool","value":"batch".*') -ne 0 ]
  [ $(expr "$ops" : '.*"path":"/spec/nodeSelector","value":{"gpu-admission/node-pool":"batch"}.*') -ne 0 ]
  [ $(expr "$output" : '.*a Pod.s priority is resolved before this policy runs.*') -ne 0 ]
}

@test "Deployment is routed with affinity and priority class" {
  route deployment_interactive.json
  [ "$status" -eq 0 ]
  ops="$(patch_ops)"
  [ $(expr "$ops" : '.*"path":"/spec/template/spec/priorityClassName","value":"interactive-high".*') -ne 0 ]
  [ $(expr "$ops" : '.*"path":"/spec/template/spec/affinity".*NVIDIA-L4.*') -ne 0 ]
}

@test "Job, CronJob, InferenceService and RayCluster are routed" {
  for request in job_batch.json cronjob_batch.json inferenceservice_interactive.json raycluster_batch.json deployment_gpu_in_init_container.json; do
    route "$request"
    [ "$status" -eq 0 ]
    [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
    [ $(expr "$output" : '.*"patchType":"JSONPatch".*') -ne 0 ]
  done
  route cronjob_batch.json
  [ $(expr "$(patch_ops)" : '.*"path":"/spec/jobTemplate/spec/template/spec/nodeSelector/gpu-admission~1node-pool".*') -ne 0 ]
  route raycluster_batch.json
  [ $(expr "$(patch_ops)" : '.*/spec/headGroupSpec.*') -eq 0 ]
}

@test "routed, non-GPU, exempt and controller-owned objects get no patch" {
  for request in deployment_routed_update.json deployment_no_gpu.json pod_exempt_namespace.json pod_update_finalizer_removed.json replicaset_owned_unrouted.json; do
    route "$request"
    [ "$status" -eq 0 ]
    [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
    [ $(expr "$output" : '.*"patch":.*') -eq 0 ]
  done
}

@test "default pool routes what matches no pool, with a warning" {
  route deployment_no_pool.json "$DATA/settings_default_pool.yml"
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*runs in the default pool batch.*') -ne 0 ]
}

@test "no pool and no default pool is denied" {
  route deployment_no_pool.json
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*matches no GPU pool; pool interactive takes workload-type=interactive.*') -ne 0 ]
}

@test "contradictions are denied with the pool and the fix" {
  route deployment_nodeselector_other_pool.json
  [ $(expr "$output" : ".*'interactive' points at the nodes of pool interactive, but the workload belongs to pool batch.*") -ne 0 ]
  route deployment_affinity_other_pool.json
  [ $(expr "$output" : '.*gpu-admission/node-pool In (training) points at the nodes of pool training.*') -ne 0 ]
  route deployment_pool_label_spoofed.json
  [ $(expr "$output" : '.*names pool interactive, but the workload.s labels place it in pool batch.*') -ne 0 ]
  route deployment_toleration_other_pool.json
  [ $(expr "$output" : '.*tolerates the taint of pool interactive (dedicated=interactive:NoSchedule).*') -ne 0 ]
  route deployment_priority_not_allowed.json
  [ $(expr "$output" : ".*'system-cluster-critical' is not allowed: pool batch allows batch-low, batch-high.*") -ne 0 ]
  for request in deployment_nodeselector_other_pool.json deployment_affinity_other_pool.json deployment_pool_label_spoofed.json deployment_toleration_other_pool.json deployment_priority_not_allowed.json; do
    route "$request"
    [ "$status" -eq 0 ]
    [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  done
}

@test "overlapping pools are invalid settings" {
  route deployment_no_pool.json "$DATA/settings_invalid_overlap.yml"
  [ "$status" -eq 1 ]
  [ $(expr "$output" : '.*Provided settings are not valid: pools\[1\].selector: pool everything overlaps pool batch.*') -ne 0 ]
}

@test "an invalid toleration is invalid settings" {
  route deployment_no_pool.json "$DATA/settings_invalid_toleration.yml"
  [ "$status" -eq 1 ]
  [ $(expr "$output" : '.*pools\[0\].tolerations\[0\].value: operator Exists takes no value.*') -ne 0 ]
}

# route_session REQUEST SESSION: with the DRA claim template read from a replay session.
route_session() {
  run kwctl run --request-path "$DATA/$1" --settings-path "$SETTINGS" --allow-context-aware \
    --replay-host-capabilities-interactions "$DATA/$2" "$POLICY"
}

@test "DRA Pod and Deployment with 4 gpu.nvidia.com devices are routed like 4 nvidia.com/gpu" {
  route_session pod_dra_four_gpus.json session_dra_four_gpus.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  ops="$(patch_ops)"
  [ $(expr "$ops" : '.*"path":"/spec/nodeSelector","value":{"gpu-admission/node-pool":"batch"}.*') -ne 0 ]
  route_session deployment_dra_four_gpus.json session_dra_four_gpus.yml
  [ "$status" -eq 0 ]
  ops="$(patch_ops)"
  [ $(expr "$ops" : '.*"path":"/spec/template/spec/priorityClassName","value":"interactive-high".*') -ne 0 ]
}

@test "DRA claim template not found, forbidden, not granted, 40 requests: denied with the fix" {
  for case in "pod_dra_four_gpus.json session_dra_not_found.yml" \
              "deployment_dra_four_gpus.json session_dra_forbidden.yml" \
              "deployment_dra_four_gpus.json session_dra_not_granted.yml"; do
    route_session $case
    [ "$status" -eq 0 ]
    [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
    [ $(expr "$output" : '.*cannot be routed to its pool: resource claim .gpus. (ResourceClaimTemplate four-gpus) cannot be read.*contextAwareResources {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate}.*') -ne 0 ]
  done
  route_session pod_dra_four_gpus.json session_dra_forty_requests.yml
  [ $(expr "$output" : '.*has 40 device requests; Kubernetes allows at most 32.*') -ne 0 ]
}

@test "a claim in a class that is not a GPU leaves the Pod alone" {
  route_session pod_dra_rdma_nic.json session_dra_rdma_nic.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*"patch"') -eq 0 ]
}

@test "KAI Scheduler gpu-fraction Pod is routed as a GPU pod" {
  route pod_kai_gpu_fraction.json
  [ "$status" -eq 0 ]
  ops="$(patch_ops)"
  [ $(expr "$ops" : '.*"path":"/spec/tolerations/1".*') -ne 0 ]
}

@test "a batch Deployment created inside the lending window goes to pool interactive, judged at the host's time" {
  route deployment_batch.json "$DATA/settings_lending.yml"
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  ops="$(patch_ops)"
  [ $(expr "$ops" : '.*"path":"/spec/template/spec/nodeSelector","value":{"gpu-admission/node-pool":"interactive"}.*') -ne 0 ]
  [ $(expr "$ops" : '.*"path":"/spec/template/spec/priorityClassName","value":"interactive-guest".*') -ne 0 ]
  at="$(echo "$output" | sed -n 's/.*"lent":"spec.template.spec: pool interactive lends its nodes to pool batch during always, open at \([0-9T:Z-]*\)".*/\1/p')"
  [ -n "$at" ]
  # The time the module read through WASI is this machine's, within a day.
  judged=$(date -u -d "$at" +%s)
  now=$(date -u +%s)
  [ $(( judged > now ? judged - now : now - judged )) -lt 86400 ]
}

@test "a lent Deployment stays on the lending pool when it is updated" {
  route deployment_batch_lent_update.json "$DATA/settings_lending.yml"
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*"patch":.*') -eq 0 ]
  [ $(expr "$output" : '.*stays on pool interactive, which lends to pool batch (lent when it was created).*') -ne 0 ]
}

@test "a lendTo window that names no schedule is invalid settings" {
  route deployment_batch.json "$DATA/settings_invalid_lending.yml"
  [ "$status" -eq 1 ]
  [ $(expr "$output" : ".*pools\[0\].lendTo\[0\].window: 'nights' names no schedule.*") -ne 0 ]
}

@test "an exception lets the research Deployment through; expired, the denial says so" {
  route deployment_no_pool.json "$DATA/settings_exceptions.yml"
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*"exception":"exception=research-spare-node owner=research-leads@example.com expires=2027-09-28T00:00:00Z".*') -ne 0 ]
  route deployment_no_pool.json "$DATA/settings_exceptions_expired.yml"
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*(exception research-spare-node (owner research-leads@example.com) expired at 2026-11-16T00:00:00Z; renew it or fix the workload).*') -ne 0 ]
}

# route_team REQUEST SESSION: with settings_team.yml (teamLabelKey: team), the Namespace read
# from a replay session.
route_team() {
  run kwctl run --request-path "$DATA/$1" --settings-path "$DATA/settings_team.yml" --allow-context-aware \
    --replay-host-capabilities-interactions "$DATA/$2" "$POLICY"
}

@test "team label: stamped from the namespace on a Deployment, a Pod and an InferenceService" {
  route_team deployment_interactive.json session_team_ml_a.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$(patch_ops)" : '.*"path":"/spec/template/metadata/labels/gpu-admission~1team","value":"ml-a".*') -ne 0 ]
  route_team pod_batch.json session_team_ml_a.yml
  [ $(expr "$(patch_ops)" : '.*"path":"/metadata/labels/gpu-admission~1team","value":"ml-a".*') -ne 0 ]
  route_team inferenceservice_interactive.json session_team_ml_a.yml
  [ $(expr "$(patch_ops)" : '.*"path":"/metadata/labels/gpu-admission~1team","value":"ml-a".*') -ne 0 ]
  route_team deployment_interactive.json session_team_no_team.yml
  [ $(expr "$(patch_ops)" : '.*gpu-admission~1team.*') -eq 0 ]
}

@test "team label: forged denied, stamped update unchanged or restamped" {
  route_team deployment_team_forged.json session_team_ml_a.yml
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : ".*'ml-b' is not the team of namespace team-a, which is ml-a (its label team).*") -ne 0 ]
  route_team deployment_team_stamped_update.json session_team_ml_a.yml
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*"patch":.*') -eq 0 ]
  route_team deployment_team_stamped_update.json session_team_ml_b.yml
  [ $(expr "$(patch_ops)" : '.*"op":"replace","path":"/spec/template/metadata/labels/gpu-admission~1team","value":"ml-b".*') -ne 0 ]
  [ $(expr "$output" : '.*set to ml-b, the team of namespace team-a (its label team); it was ml-a.*') -ne 0 ]
}

@test "team label: the Namespace not granted or not found is denied naming the grant" {
  for session in session_team_not_granted.yml session_team_not_found.yml; do
    route_team deployment_interactive.json "$session"
    [ "$status" -eq 0 ]
    [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
    [ $(expr "$output" : '.*namespace team-a cannot be read.*contextAwareResources {apiVersion: v1, kind: Namespace} in the policy and get on namespaces.*') -ne 0 ]
  done
}
