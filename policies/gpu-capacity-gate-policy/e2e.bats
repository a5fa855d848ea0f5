#!/usr/bin/env bats
# kwctl checks over test_data/: the cases of test_data/kwctl_cases.tsv (the same requests as
# e2e/tests/gpu_capacity_gate_policy.rs), each a request, settings and replayed session with the
# answer and the patterns its output must match. Context-aware calls are replayed from
# test_data/session_*.yml (kwctl's session format). Needs kwctl on PATH; skipped cleanly without it.

load ../../e2e/bats/kwctl

@test "every case of kwctl_cases.tsv gives its answer" {
  run_cases kwctl_cases.tsv
}
