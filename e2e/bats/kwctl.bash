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
  if [ "$status" -ne 0 ]; then
    echo "kwctl exited $status: $output" >&2
    return 1
  fi
  matches "\"allowed\":$allowed" "$@"
}
