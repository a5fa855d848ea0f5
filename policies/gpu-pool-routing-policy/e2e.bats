#!/usr/bin/env bats
# kwctl checks over test_data/, the same requests e2e/tests/gpu_pool_routing_policy.rs runs
# through the project's harness: the cases of test_data/kwctl_cases.tsv, then those that read the
# patch. Needs kwctl on PATH and an annotated module:
#   make annotate && cd policies/gpu-pool-routing-policy && bats e2e.bats
# Skipped cleanly when kwctl is not installed.

load ../../e2e/bats/kwctl

# route <request> [<settings>] [<session>]: run_policy with settings.yml by default.
route() {
  run_policy "$1" "${2:-settings.yml}" "${3:-}"
}

# The decoded JSONPatch of the last kwctl run.
patch_ops() {
  echo "$output" | sed -n 's/.*"patch":"\([^"]*\)".*/\1/p' | base64 -d
}

# on_patch <check> <pattern>...: `matches` or `lacks` over the decoded JSONPatch of the last run.
on_patch() {
  local ops
  ops="$(patch_ops)"
  local output="$ops"
  "$@"
}

# patch_matches <pattern>..., patch_lacks <pattern>...: the decoded JSONPatch of the last run
# matches every pattern (matches none).
patch_matches() { on_patch matches "$@"; }
patch_lacks() { on_patch lacks "$@"; }

@test "every case of kwctl_cases.tsv gives its answer" {
  run_cases kwctl_cases.tsv run_policy
}

@test "Pod is routed: pool label, nodeSelector, toleration" {
  route pod_batch.json
  allowed '"patchType":"JSONPatch"'
  patch_matches '"path":"/metadata/labels/gpu-admission~1pool","value":"batch"' \
    '"path":"/spec/nodeSelector","value":{"gpu-admission/node-pool":"batch"}'
  matches 'a Pod.s priority is resolved before this policy runs'
}

@test "Deployment is routed with affinity and priority class" {
  route deployment_interactive.json
  [ "$status" -eq 0 ]
  patch_matches '"path":"/spec/template/spec/priorityClassName","value":"interactive-high"' \
    '"path":"/spec/template/spec/affinity".*NVIDIA-L4'
}

@test "Job, CronJob, InferenceService and RayCluster are routed" {
  for request in job_batch.json cronjob_batch.json inferenceservice_interactive.json raycluster_batch.json deployment_gpu_in_init_container.json; do
    route "$request"
    allowed '"patchType":"JSONPatch"'
  done
  route cronjob_batch.json
  patch_matches '"path":"/spec/jobTemplate/spec/template/spec/nodeSelector/gpu-admission~1node-pool"'
  route raycluster_batch.json
  patch_lacks '/spec/headGroupSpec'
}

@test "routed, non-GPU, exempt and controller-owned objects get no patch" {
  for request in deployment_routed_update.json deployment_no_gpu.json pod_exempt_namespace.json pod_update_finalizer_removed.json replicaset_owned_unrouted.json; do
    route "$request"
    allowed
    lacks '"patch":'
  done
}

@test "DRA Pod and Deployment with 4 gpu.nvidia.com devices are routed like 4 nvidia.com/gpu" {
  route pod_dra_four_gpus.json settings.yml session_dra_four_gpus.yml
  allowed
  patch_matches '"path":"/spec/nodeSelector","value":{"gpu-admission/node-pool":"batch"}'
  route deployment_dra_four_gpus.json settings.yml session_dra_four_gpus.yml
  [ "$status" -eq 0 ]
  patch_matches '"path":"/spec/template/spec/priorityClassName","value":"interactive-high"'
}

@test "a claim in a class that is not a GPU leaves the Pod alone" {
  route pod_dra_rdma_nic.json settings.yml session_dra_rdma_nic.yml
  allowed
  lacks '"patch"'
}

@test "KAI Scheduler gpu-fraction Pod is routed as a GPU pod" {
  route pod_kai_gpu_fraction.json
  [ "$status" -eq 0 ]
  patch_matches '"path":"/spec/tolerations/1"'
}

@test "a batch Deployment created inside the lending window goes to pool interactive, judged at the host's time" {
  route deployment_batch.json settings_lending.yml
  allowed
  patch_matches '"path":"/spec/template/spec/nodeSelector","value":{"gpu-admission/node-pool":"interactive"}' \
    '"path":"/spec/template/spec/priorityClassName","value":"interactive-guest"'
  at="$(echo "$output" | sed -n 's/.*"lent":"spec.template.spec: pool interactive lends its nodes to pool batch during always, open at \([0-9T:Z-]*\)".*/\1/p')"
  [ -n "$at" ]
  # The time the module read through WASI is this machine's, within a day.
  judged=$(date -u -d "$at" +%s)
  now=$(date -u +%s)
  [ $(( judged > now ? judged - now : now - judged )) -lt 86400 ]
}

@test "a lent Deployment stays on the lending pool when it is updated" {
  route deployment_batch_lent_update.json settings_lending.yml
  allowed
  lacks '"patch":'
  matches 'stays on pool interactive, which lends to pool batch (lent before, unchanged by this request)'
}

# closed_lending_settings: settings_lending.yml with the window on the weekday three days from
# now (closed whenever the test runs), written to BATS_TEST_TMPDIR; prints its path.
closed_lending_settings() {
  local day file="$BATS_TEST_TMPDIR/settings_lending_closed_now.yml"
  day=$(date -u -d '+3 days' +%a)
  sed -e "s/days: \[Mon, Tue, Wed, Thu, Fri, Sat, Sun\]/days: [$day]/" "$DATA/settings_lending.yml" >"$file"
  grep -q "days: \[$day\]" "$file"
  echo "$file"
}

@test "outside the window: a move onto the lending pool and a lent template's change are denied; a scale stays" {
  local closed
  closed=$(closed_lending_settings)
  run kwctl run --request-path "$DATA/deployment_batch_moved_to_lending_pool.json" --settings-path "$closed" "$POLICY"
  denied
  says "names pool interactive, which lends its nodes to pool batch only during always, closed at "
  says "the object was not on pool interactive before this update: a workload joins a lending pool only while the window is open"
  run kwctl run --request-path "$DATA/deployment_batch_lent_new_image.json" --settings-path "$closed" "$POLICY"
  denied
  says "this update changes its pod template: a lent workload stays on pool interactive only while its template is unchanged"
  run kwctl run --request-path "$DATA/deployment_batch_lent_update.json" --settings-path "$closed" "$POLICY"
  allowed
  says "stays on pool interactive, which lends to pool batch (lent before, unchanged by this request)"
}

@test "team label: stamped from the namespace on a Deployment, a Pod and an InferenceService" {
  route deployment_interactive.json settings_team.yml session_team_ml_a.yml
  allowed
  patch_matches '"path":"/spec/template/metadata/labels/gpu-admission~1team","value":"ml-a"'
  route pod_batch.json settings_team.yml session_team_ml_a.yml
  patch_matches '"path":"/metadata/labels/gpu-admission~1team","value":"ml-a"'
  route inferenceservice_interactive.json settings_team.yml session_team_ml_a.yml
  patch_matches '"path":"/metadata/labels/gpu-admission~1team","value":"ml-a"'
  route deployment_interactive.json settings_team.yml session_team_no_team.yml
  patch_lacks 'gpu-admission~1team'
}

@test "team label: forged denied, stamped update unchanged or restamped" {
  route deployment_team_forged.json settings_team.yml session_team_ml_a.yml
  denied "'ml-b' is not the team of namespace team-a, which is ml-a (its label team)"
  route deployment_team_stamped_update.json settings_team.yml session_team_ml_a.yml
  allowed
  lacks '"patch":'
  route deployment_team_stamped_update.json settings_team.yml session_team_ml_b.yml
  patch_matches '"op":"replace","path":"/spec/template/metadata/labels/gpu-admission~1team","value":"ml-b"'
  matches 'set to ml-b, the team of namespace team-a (its label team); it was ml-a'
}
