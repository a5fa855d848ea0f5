#!/usr/bin/env bats
# kwctl checks of gpu-vram-fit-policy over test_data/: the cases of test_data/kwctl_cases.tsv (the
# same files as e2e/tests/gpu_vram_fit_policy.rs), each a request, settings and, where the policy
# reads the cluster or a registry, a replayed session (kwctl's session format), with the answer and
# the patterns its output must match. Needs kwctl on PATH and an annotated module:
#   make annotate && cd policies/gpu-vram-fit-policy && bats e2e.bats
# POLICY_WASM overrides the module (default: annotated-policy.wasm in this directory).

load ../../e2e/bats/kwctl

@test "every case of kwctl_cases.tsv gives its answer" {
  run_cases kwctl_cases.tsv run_policy
}
