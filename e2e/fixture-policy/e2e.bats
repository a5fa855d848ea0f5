#!/usr/bin/env bats
# The kwctl equivalents of e2e/tests/*.rs, on the same test_data files.
# Needs kwctl on PATH and the built module (`make build`); skipped without kwctl.

setup() {
  if ! command -v kwctl >/dev/null 2>&1; then
    skip "kwctl is not on PATH"
  fi
  local wasm_dir="${GPU_ADMISSION_WASM_DIR:-$BATS_TEST_DIRNAME/../../target/wasm32-wasip1/release}"
  MODULE="$wasm_dir/fixture_policy.wasm"
  if [ ! -f "$MODULE" ]; then
    echo "$MODULE not found: run make build" >&2
    return 1
  fi
  DATA="$BATS_TEST_DIRNAME/test_data"
  POLICY="$BATS_TEST_TMPDIR/annotated-policy.wasm"
  kwctl annotate -m "$BATS_TEST_DIRNAME/metadata.yml" -o "$POLICY" "$MODULE"
}

@test "accept without settings" {
  run kwctl run --request-path "$DATA/pod_in_team_a.json" "$POLICY"
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"uid":"1299d386-525b-4032-98ae-1949f69f9cfc".*') -ne 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
}

@test "accept when the required label is present" {
  run kwctl run --request-path "$DATA/pod_with_team_label.json" \
    --settings-path "$DATA/settings_required_label.yml" "$POLICY"
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
}

@test "reject when the required label is missing" {
  run kwctl run --request-path "$DATA/pod_in_team_a.json" \
    --settings-path "$DATA/settings_required_label.yml" "$POLICY"
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*"message":"missing required label team".*') -ne 0 ]
}

@test "mutation adds the label as a JSONPatch" {
  run kwctl run --request-path "$DATA/pod_in_team_a.json" \
    --settings-path "$DATA/settings_add_label.json" "$POLICY"
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
  [ $(expr "$output" : '.*"patchType":"JSONPatch".*') -ne 0 ]
}

@test "AdmissionReview input and --settings-json" {
  run kwctl run --request-path "$DATA/admission_review.json" \
    --settings-json '{"addLabel":{"key":"team","value":"ml"}}' "$POLICY"
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"uid":"0d5d1c5e-2b7f-4c55-a3d8-6e9f0a1b2c3d".*') -ne 0 ]
  [ $(expr "$output" : '.*"patchType":"JSONPatch".*') -ne 0 ]
}

@test "invalid settings exit 1" {
  run kwctl run --request-path "$DATA/pod_in_team_a.json" \
    --settings-path "$DATA/settings_invalid.yml" "$POLICY"
  [ "$status" -eq 1 ]
  [ $(expr "$output" : '.*Provided settings are not valid: requiredLabel: must not be empty.*') -ne 0 ]
}

@test "replay: labelled namespace is accepted" {
  run kwctl run --request-path "$DATA/pod_in_team_a.json" \
    --settings-path "$DATA/settings_lookup_namespace.yml" \
    --allow-context-aware \
    --replay-host-capabilities-interactions "$DATA/session_namespace_allowed.yml" \
    "$POLICY"
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":true.*') -ne 0 ]
}

@test "replay: unlabelled namespace is rejected" {
  run kwctl run --request-path "$DATA/pod_in_team_a.json" \
    --settings-path "$DATA/settings_lookup_namespace.yml" \
    --allow-context-aware \
    --replay-host-capabilities-interactions "$DATA/session_namespace_not_allowed.yml" \
    "$POLICY"
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*Namespace team-a is not labelled gpu-admission/allowed=true.*') -ne 0 ]
}

@test "replay: error exchange is rejected with its text" {
  run kwctl run --request-path "$DATA/pod_in_team_a.json" \
    --settings-path "$DATA/settings_lookup_namespace.yml" \
    --allow-context-aware \
    --replay-host-capabilities-interactions "$DATA/session_namespace_not_found.yml" \
    "$POLICY"
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : ".*Cannot find v1/Namespace named 'team-a' inside of namespace 'None'.*") -ne 0 ]
}

@test "replay: a session recorded for another namespace does not match" {
  run kwctl run --request-path "$DATA/pod_in_team_a.json" \
    --settings-path "$DATA/settings_lookup_namespace.yml" \
    --allow-context-aware \
    --replay-host-capabilities-interactions "$DATA/session_other_namespace.yml" \
    "$POLICY"
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*"allowed":false.*') -ne 0 ]
  [ $(expr "$output" : '.*Replay error: unexpected request.*') -ne 0 ]
}

@test "replay: an exhausted session fails the host call" {
  run kwctl run --request-path "$DATA/pod_in_team_a.json" \
    --settings-path "$DATA/settings_lookup_namespace.yml" \
    --allow-context-aware \
    --replay-host-capabilities-interactions "$DATA/session_empty.yml" \
    "$POLICY"
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*the list of recorded responses is empty.*') -ne 0 ]
}

@test "without --allow-context-aware the Namespace cannot be read" {
  run kwctl run --request-path "$DATA/pod_in_team_a.json" \
    --settings-path "$DATA/settings_lookup_namespace.yml" \
    --replay-host-capabilities-interactions "$DATA/session_namespace_allowed.yml" \
    "$POLICY"
  [ "$status" -eq 0 ]
  [ $(expr "$output" : '.*Policy has not been granted access to Kubernetes v1/Namespace resources.*') -ne 0 ]
}
