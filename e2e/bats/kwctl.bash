# Shared by every e2e.bats (`load ../../e2e/bats/kwctl`): the offline kwctl wrapper, the setup,
# the runs (plain and replayed) and the checks of a run's output.

# Offline, kwctl run fetches Sigstore's trust root and waits for the network to fail:
# KWCTL_SIGSTORE_TRUST names a local copy instead (make e2e-kwctl sets it).
kwctl() {
  if [ "$1" = run ] && [ -n "${KWCTL_SIGSTORE_TRUST:-}" ]; then
    shift
    command kwctl run --sigstore-trust-config "$KWCTL_SIGSTORE_TRUST" "$@"
  else
    command kwctl "$@"
  fi
}

# require_kwctl: skips the test when kwctl is not on PATH.
require_kwctl() {
  if ! command -v kwctl >/dev/null 2>&1; then
    skip "kwctl is not on PATH"
  fi
}

# Every policy's e2e.bats runs kwctl_setup before each test (a file may define its own setup).
setup() {
  kwctl_setup
}

# kwctl_setup: a policy's setup. POLICY is the module (POLICY_WASM, by default
# annotated-policy.wasm, relative to the .bats file's directory); DATA is test_data/ beside
# the .bats file.
kwctl_setup() {
  require_kwctl
  POLICY="${POLICY_WASM:-annotated-policy.wasm}"
  case "$POLICY" in /*) ;; *) POLICY="$BATS_TEST_DIRNAME/$POLICY" ;; esac
  if [ ! -f "$POLICY" ]; then
    echo "$POLICY not found: run make annotate" >&2
    return 1
  fi
  DATA="$BATS_TEST_DIRNAME/test_data"
}

# run_policy <request> [<settings> [<session>]]: kwctl run on files of test_data/, with the
# settings file (absent or "-": none) and, given a session, --allow-context-aware with the host
# calls answered from it. The output is printed, for bats to show when the test fails.
run_policy() {
  local args=(run --request-path "$DATA/$1")
  if [ -n "${2:-}" ] && [ "$2" != - ]; then
    args+=(--settings-path "$DATA/$2")
  fi
  if [ -n "${3:-}" ]; then
    args+=(--allow-context-aware --replay-host-capabilities-interactions "$DATA/$3")
  fi
  run kwctl "${args[@]}" "$POLICY"
  echo "$output"
}

# run_replayed <request> <settings> [<session>]: run_policy for a context-aware policy, which
# kwctl runs only with a cluster or a session: a case that makes no host call gets the empty
# session_no_calls.yml, so that a call would fail it.
run_replayed() {
  run_policy "$1" "$2" "${3:-session_no_calls.yml}"
}

# run_cases <table> [<runner>]: every row of test_data/<table>, a table of single-request cases,
# run with <runner> (run_replayed by default; run_policy for a policy that runs without a session).
# A row is tab-separated: a name, the expected answer, the request, the settings, the session (-:
# none), then the patterns its output must match. The answer is allowed or denied (kwctl exited 0
# with that verdict), answered (kwctl exited 0) or invalid (kwctl refused the settings: exit 1;
# run without a session). Rows sharing a name are the steps of one case; blank lines and lines
# starting with # are comments. Every row runs; the test fails naming each row that failed.
run_cases() {
  local table="$DATA/$1" runner="${2:-run_replayed}" failed=() line=0 row session
  while IFS=$'\t' read -r -a row -u 3; do
    line=$((line + 1))
    if [ "${#row[@]}" -eq 0 ] || [[ "${row[0]}" == \#* ]]; then
      continue
    fi
    if [ "${#row[@]}" -lt 5 ]; then
      echo "$1:$line: a row needs a name, an answer, a request, the settings and a session" >&2
      failed+=("$1:$line (malformed)")
      continue
    fi
    session="${row[4]}"
    [ "$session" != - ] || session=
    echo "# $1:$line ${row[0]}"
    if ! run_case "${row[1]}" "$runner" "${row[2]}" "${row[3]}" "$session" "${row[@]:5}"; then
      failed+=("$1:$line ${row[0]}")
    fi
  done 3<"$table"
  if [ "$line" -eq 0 ]; then
    echo "$table has no row" >&2
    return 1
  fi
  if [ "${#failed[@]}" -ne 0 ]; then
    printf 'FAILED: %s\n' "${failed[@]}" >&2
    return 1
  fi
}

# run_case <answer> <runner> <request> <settings> <session> [<pattern>...]: one row of run_cases.
run_case() {
  local answer="$1" runner="$2" request="$3" settings="$4" session="$5"
  shift 5
  case "$answer" in
    allowed | denied)
      "$runner" "$request" "$settings" "$session"
      "$answer" "$@"
      ;;
    answered)
      "$runner" "$request" "$settings" "$session"
      exits 0 && matches "$@"
      ;;
    invalid)
      run_policy "$request" "$settings"
      exits 1 && matches 'Provided settings are not valid: ' "$@"
      ;;
    *)
      echo "unknown answer '$answer' (allowed, denied, answered or invalid)" >&2
      return 1
      ;;
  esac
}

# exits <status>: kwctl exited with <status>.
exits() {
  if [ "$status" -ne "$1" ]; then
    echo "kwctl exited $status, not $1: $output" >&2
    return 1
  fi
}

# matches <pattern>...: the last run's output matches every pattern somewhere, each a basic
# regular expression as expr(1) reads it ('.' is any character, '\[' a bracket).
matches() {
  local pattern
  for pattern in "$@"; do
    if ! expr "$output" : ".*$pattern.*" >/dev/null; then
      echo "the output does not match: $pattern" >&2
      return 1
    fi
  done
}

# lacks <pattern>...: the last run's output matches none of the patterns.
lacks() {
  local pattern found
  for pattern in "$@"; do
    found=0
    expr "$output" : ".*$pattern.*" >/dev/null || found=$?
    # expr exits 0 on a match, 1 on none and 2 on a pattern it cannot read.
    if [ "$found" -ne 1 ]; then
      echo "the output matches (or expr cannot read): $pattern" >&2
      return 1
    fi
  done
}

# says <text>...: the last run's output contains every text as it is.
says() {
  local text
  for text in "$@"; do
    if [[ "$output" != *"$text"* ]]; then
      echo "the output does not say: $text" >&2
      return 1
    fi
  done
}

# allowed [<pattern>...], denied [<pattern>...]: kwctl exited 0 with the request allowed
# (denied), and the output matches every pattern.
allowed() {
  verdict true "$@"
}

denied() {
  verdict false "$@"
}

verdict() {
  local allowed="$1"
  shift
  exits 0 && matches "\"allowed\":$allowed" "$@"
}
