#!/usr/bin/env bats
# The kwctl equivalents of e2e/tests/*.rs, on the same test_data files.
# Needs kwctl on PATH and the built module (`make build-test-modules`); skipped without kwctl.

load ../bats/kwctl

setup() {
  require_kwctl
  local wasm_dir="${GPU_ADMISSION_WASM_DIR:-$("$BATS_TEST_DIRNAME/../../scripts/target-dir.sh")/wasm32-wasip1/release}"
  MODULE="$wasm_dir/fixture_policy.wasm"
  if [ ! -f "$MODULE" ]; then
    echo "$MODULE not found: run make build-test-modules" >&2
    return 1
  fi
  DATA="$BATS_TEST_DIRNAME/test_data"
  POLICY="$BATS_TEST_TMPDIR/annotated-policy.wasm"
  kwctl annotate -m "$BATS_TEST_DIRNAME/metadata.yml" -o "$POLICY" "$MODULE"
}

# run_fixture <request> [<settings>]: kwctl run on files of test_data/.
run_fixture() {
  run kwctl run --request-path "$DATA/$1" ${2:+--settings-path "$DATA/$2"} "$POLICY"
}

# run_lookup <session>: the Pod of team-a with the Namespace lookup settings, the Namespace
# read from the replay session.
run_lookup() {
  run kwctl run --request-path "$DATA/pod_in_team_a.json" \
    --settings-path "$DATA/settings_lookup_namespace.yml" --allow-context-aware \
    --replay-host-capabilities-interactions "$DATA/$1" "$POLICY"
}

@test "accept without settings" {
  run_fixture pod_in_team_a.json
  [ "$status" -eq 0 ]
  matches '"uid":"1299d386-525b-4032-98ae-1949f69f9cfc"'
  allowed
}

@test "accept when the required label is present" {
  run_fixture pod_with_team_label.json settings_required_label.yml
  allowed
}

@test "reject when the required label is missing" {
  run_fixture pod_in_team_a.json settings_required_label.yml
  denied '"message":"missing required label team"'
}

@test "mutation adds the label as a JSONPatch" {
  run_fixture pod_in_team_a.json settings_add_label.json
  allowed '"patchType":"JSONPatch"'
}

@test "AdmissionReview input and --settings-json" {
  run kwctl run --request-path "$DATA/admission_review.json" \
    --settings-json '{"addLabel":{"key":"team","value":"ml"}}' "$POLICY"
  [ "$status" -eq 0 ]
  matches '"uid":"0d5d1c5e-2b7f-4c55-a3d8-6e9f0a1b2c3d"' \
    '"patchType":"JSONPatch"'
}

@test "invalid settings exit 1" {
  run_fixture pod_in_team_a.json settings_invalid.yml
  [ "$status" -eq 1 ]
  matches 'Provided settings are not valid: requiredLabel: must not be empty'
}

@test "replay: labelled namespace is accepted" {
  run_lookup session_namespace_allowed.yml
  allowed
}

@test "replay: unlabelled namespace is rejected" {
  run_lookup session_namespace_not_allowed.yml
  denied 'Namespace team-a is not labelled gpu-admission/allowed=true'
}

@test "replay: error exchange is rejected with its text" {
  run_lookup session_namespace_not_found.yml
  denied "Cannot find v1/Namespace named 'team-a' inside of namespace 'None'"
}

@test "replay: a session recorded for another namespace does not match" {
  run_lookup session_other_namespace.yml
  denied 'Replay error: unexpected request'
}

@test "replay: an exhausted session fails the host call" {
  run_lookup session_empty.yml
  [ "$status" -eq 0 ]
  matches 'the list of recorded responses is empty'
}

@test "without --allow-context-aware the Namespace cannot be read" {
  run kwctl run --request-path "$DATA/pod_in_team_a.json" \
    --settings-path "$DATA/settings_lookup_namespace.yml" \
    --replay-host-capabilities-interactions "$DATA/session_namespace_allowed.yml" \
    "$POLICY"
  [ "$status" -eq 0 ]
  matches 'Policy has not been granted access to Kubernetes v1/Namespace resources'
}
