#!/usr/bin/env bash
# Evaluates each policy on the examples listed in policies/<name>/examples.txt and
# prints one verdict per line. Each non-comment line of examples.txt is
#   <request.json> <settings file, or -> [<replay session.yml>]
# with paths relative to the policy's directory.
# Usage: scripts/run-examples.sh <gpu-kwctl binary> <policy>...
set -euo pipefail
kwctl_bin=$(realpath "$1"); shift
status=0
for policy in "$@"; do
  dir="policies/$policy"
  list="$dir/examples.txt"
  echo "=== $policy"
  if [ ! -f "$list" ]; then echo "    (no examples.txt)"; continue; fi
  while read -r request settings replay; do
    case "$request" in ""|\#*) continue ;; esac
    args=(run --request-path "$request")
    [ "$settings" != "-" ] && args+=(--settings-path "$settings")
    [ -n "${replay:-}" ] && args+=(--replay-host-capabilities-interactions "$replay" --allow-context-aware)
    if out=$(cd "$dir" && "$kwctl_bin" "${args[@]}" policy.wasm 2>&1); then
      label="$request"
      [ -n "${replay:-}" ] && label="$request + $(basename "$replay")"
      python3 - "$label" "$out" <<'PY'
import base64, json, sys
name, out = sys.argv[1], sys.argv[2]
r = json.loads(out.strip().splitlines()[-1])
verdict = "ALLOWED" if r.get("allowed") else "DENIED "
detail = (r.get("status") or {}).get("message") or ""
if r.get("patch"):
    ops = json.loads(base64.b64decode(r["patch"]))
    detail = "patch: " + "; ".join(f'{o["op"]} {o["path"]}' for o in ops)
if r.get("warnings"):
    detail += ("  " if detail else "") + "warnings: " + " | ".join(r["warnings"])
print(f"    {verdict}  {name:<44} {detail}")
PY
    else
      echo "    ERROR    $request: $out"; status=1
    fi
  done < "$list"
done
exit $status
