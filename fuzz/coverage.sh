#!/usr/bin/env bash
# Line coverage of shared/src (the rules, tests excluded) per fuzz target, over the target's corpus
# and kept inputs: `cargo fuzz coverage` builds the instrumented target and runs the inputs, then
# llvm-profdata / llvm-cov of rustc's own LLVM version merge and report (cargo-fuzz's own merge step
# needs rustup's llvm-tools; Debian's llvm-<version> package works too: LLVM_BIN=/usr/lib/llvm-22/bin).
#
#   fuzz/coverage.sh [target...]     (default: every target)
set -euo pipefail
cd "$(dirname "$0")"
host=$(rustc -vV | sed -n 's/^host: //p')
llvm=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
bin=${LLVM_BIN:-}
if [ -z "$bin" ]; then
  for d in "$(rustc --print sysroot)/lib/rustlib/$host/bin" "/usr/lib/llvm-$llvm/bin"; do
    if [ -x "$d/llvm-profdata" ] && [ -x "$d/llvm-cov" ]; then bin=$d; break; fi
  done
fi
# Not found: install Debian's package of the same LLVM (the machine's only reachable source).
if [ -z "$bin" ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  apt-get install -y "llvm-$llvm" >&2 && bin=/usr/lib/llvm-$llvm/bin
fi
if [ -z "$bin" ] || [ ! -x "$bin/llvm-cov" ]; then
  echo "coverage.sh: needs llvm-profdata and llvm-cov of LLVM $llvm:" \
       "rustup component add llvm-tools, or apt-get install llvm-$llvm" >&2
  exit 1
fi
# cargo fuzz coverage builds into <target dir of this workspace>/<host>/coverage.
built=$(../scripts/target-dir.sh .)/$host/coverage/$host/release
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(ls fuzz_targets | sed 's/\.rs$//')
printf '%-22s %7s %7s %7s\n' target lines missed cover
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "regressions/$t" "coverage/$t"
  rm -rf "coverage/$t/raw"
  # Its merge step fails without rustup's llvm-tools; the raw profiles are written before it.
  RUSTC_BOOTSTRAP=1 cargo fuzz coverage "$t" "corpus/$t" "regressions/$t" >"coverage/$t.log" 2>&1 || true
  if ! ls "coverage/$t/raw/"*.profraw >/dev/null 2>&1; then
    echo "coverage.sh: $t: no profiles (see fuzz/coverage/$t.log)" >&2
    exit 1
  fi
  "$bin/llvm-profdata" merge -sparse "coverage/$t/raw/"*.profraw -o "coverage/$t/coverage.profdata"
  "$bin/llvm-cov" report "$built/$t" \
    -instr-profile="coverage/$t/coverage.profdata" \
    -ignore-filename-regex='(/\.cargo/|/rustc/|/fuzz/|/tests?\.rs$|/tests/)' |
    awk -v t="$t" '/^TOTAL/ { printf "%-22s %7s %7s %7s\n", t, $8, $9, $10 }'
done
