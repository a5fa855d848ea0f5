#!/usr/bin/env bats
# gpu-labels-policy through kwctl: the cases of test_data/kwctl_cases.tsv (the same test_data the
# Rust e2e tests use, e2e/tests/gpu_labels_policy.rs), each a request, settings and, where the
# policy reads a Namespace or a claim, a replayed session, with the answer and the patterns its
# output must match. Needs kwctl on PATH and an annotated module:
#   make annotate && cd policies/gpu-labels-policy && bats e2e.bats
# POLICY_WASM overrides the module (default: annotated-policy.wasm in this directory).

load ../../e2e/bats/kwctl

@test "every case of kwctl_cases.tsv gives its answer" {
  run_cases kwctl_cases.tsv run_policy
}
