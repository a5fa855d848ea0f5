#!/usr/bin/env bash
# Builds the two Kubewarden policies the real-host benchmarks compare ours with, from a checkout of
# https://github.com/kubewarden/policies (the monorepo; its Rust policies form one Cargo workspace
# under policies/):
#
#   labels-policy.wasm     labels-policy 0.1.10 (crate labels-policy): validates label names, beside
#                          our labels policy (KUBEWARDEN_LABELS_POLICY)
#   capabilities-psp.wasm  capabilities-psp 1.0.13 (crate capabilities-psp): a validating and
#                          mutating policy, beside our routing policy (KUBEWARDEN_MUTATING_POLICY)
#
# The figures in BENCHMARKS.md were measured with modules built from commit KW_POLICIES_COMMIT below
# (2026-08-17, "chore(deps): lock file maintenance (#733)"). Get it with the `fetch` tool
# (github:kubewarden/policies, then `git archive` the commit) or
# `git clone https://github.com/kubewarden/policies && git -C policies checkout <commit>`.
#
# The build is theirs: policies/Makefile.rust runs `cargo --locked build --target=wasm32-wasip1
# --release` in the policy's directory, with the workspace's default release profile (the
# workspace sets no [profile]). One change: cargo resolves every workspace member before building
# any, and env-variable-secrets-scanner-policy depends on a git repository (newrelic/rusty-hog),
# which a machine that reaches only crates.io cannot fetch. So the build runs in a copy of the
# workspace (<out-dir>/build/policies) without that member, and without --locked (cargo drops the
# entries only that member needed from Cargo.lock); afterwards every package of the resulting
# Cargo.lock is checked to be in theirs with the same version, source and checksum: the same
# crates as their lock file, from crates.io through cargo, nothing else downloaded. Each module
# is then annotated with `kwctl annotate -m metadata.yml -u README.md` (their Makefile's
# annotated-policy.wasm, what they publish): kwctl must be on PATH, or named by KWCTL
# (../shared/kubewarden/install.sh DIR installs it).
#
# usage: bench/kubewarden/build-kubewarden-policies.sh <checkout-dir> [out-dir]
#   <checkout-dir>  the repository's root (holding policies/Cargo.toml)
#   [out-dir]       where the modules go (default: /work/kw-policies)
# A git checkout at another commit is refused (KW_POLICIES_ANY_COMMIT=1 builds it anyway); a tree
# without .git (an archive) is checked by the two crates' versions instead.
set -euo pipefail

KW_POLICIES_COMMIT=6a01a242a770dbb168767a986ad0bc57cb3b61fb
# directory under policies/, crate, its version at that commit, module file name
CRATES=("labels-policy labels-policy 0.1.10 labels-policy"
        "capabilities-psp-policy capabilities-psp 1.0.13 capabilities-psp")
TARGET=wasm32-wasip1

die() { echo "build-kubewarden-policies: $*" >&2; exit 1; }

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 <checkout-dir> [out-dir]"
checkout=$1
out=${2:-/work/kw-policies}
[ -f "$checkout/policies/Cargo.toml" ] ||
  die "$checkout: no policies/Cargo.toml; give the root of a kubewarden/policies checkout"
checkout=$(cd "$checkout" && pwd)
workspace=$checkout/policies

if [ -e "$checkout/.git" ]; then
  head=$(git -C "$checkout" rev-parse HEAD) || die "$checkout: git cannot read its HEAD"
  if [ "$head" != "$KW_POLICIES_COMMIT" ] && [ "${KW_POLICIES_ANY_COMMIT:-}" != 1 ]; then
    die "$checkout is at $head, not $KW_POLICIES_COMMIT (check that commit out, or set KW_POLICIES_ANY_COMMIT=1)"
  fi
  echo "build-kubewarden-policies: kubewarden/policies at $head"
else
  echo "build-kubewarden-policies: $checkout is not a git checkout; checking the crates' versions"
fi

for entry in "${CRATES[@]}"; do
  read -r dir crate version _ <<<"$entry"
  manifest=$workspace/$dir/Cargo.toml
  [ -f "$manifest" ] || die "$manifest not found"
  name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$manifest" | head -n1)
  found=$(sed -n 's/^version = "\(.*\)"/\1/p' "$manifest" | head -n1)
  [ "$name" = "$crate" ] || die "$manifest: crate $name, expected $crate"
  if [ "$found" != "$version" ] && [ "${KW_POLICIES_ANY_COMMIT:-}" != 1 ]; then
    die "$crate is $found in $manifest, $version at $KW_POLICIES_COMMIT (set KW_POLICIES_ANY_COMMIT=1 to build it anyway)"
  fi
done

kwctl=${KWCTL:-kwctl}
command -v "$kwctl" >/dev/null ||
  die "kwctl not found (on PATH, or KWCTL=<path>): ../shared/kubewarden/install.sh DIR installs it"
[ -d "$(rustc --print sysroot)/lib/rustlib/$TARGET" ] ||
  die "the Rust target $TARGET is not installed (rustup target add $TARGET)"

mkdir -p "$out"
out=$(cd "$out" && pwd)
# The workspace copy, without the member that needs a git dependency (see the top of this file).
build=$out/build
rm -rf "$build/policies"
mkdir -p "$build/policies"
tar -C "$workspace" --exclude=./target -cf - . | tar -C "$build/policies" -xf -
python3 - "$build/policies/Cargo.toml" <<'PY' || die "cannot drop the git-dependent member from the workspace copy"
import re, sys
path = sys.argv[1]
text = open(path).read()
member = '  "env-variable-secrets-scanner-policy",\n'
if member not in text:
    sys.exit(f"{path}: no member line {member.strip()}")
open(path, "w").write(text.replace(member, "", 1))
PY

target_dir=$build/target
for entry in "${CRATES[@]}"; do
  read -r dir crate version name <<<"$entry"
  # As their Makefile.rust does: one policy at a time from its own directory, so each gets the
  # dependency features it asks for (one cargo run over both would unify them).
  echo "build-kubewarden-policies: cargo build --target=$TARGET --release (in $build/policies/$dir)"
  (cd "$build/policies/$dir" && cargo build --target="$TARGET" --target-dir="$target_dir" --release)
  built=$target_dir/$TARGET/release/${crate//-/_}.wasm
  [ -f "$built" ] || die "cargo built no $built"
  "$kwctl" --no-color annotate -m "$build/policies/$dir/metadata.yml" -u "$build/policies/$dir/README.md" \
    -o "$out/$name.wasm" "$built" || die "kwctl annotate of $built failed"
  echo "build-kubewarden-policies: $out/$name.wasm ($crate $version, $(stat -c %s "$out/$name.wasm") bytes, sha256 $(sha256sum "$out/$name.wasm" | cut -c1-16)...)"
done

# Every crate built must be the one their Cargo.lock names.
python3 - "$workspace/Cargo.lock" "$build/policies/Cargo.lock" <<'PY' || die "the build's Cargo.lock is not a subset of theirs"
import sys, tomllib
def packages(path):
    with open(path, "rb") as f:
        return {(p["name"], p["version"]): (p.get("source"), p.get("checksum"))
                for p in tomllib.load(f)["package"]}
theirs, ours = packages(sys.argv[1]), packages(sys.argv[2])
bad = [f"{n} {v}" for (n, v), s in ours.items() if theirs.get((n, v)) != s]
if bad:
    sys.exit("not as in their Cargo.lock: " + ", ".join(sorted(bad)))
print(f"build-kubewarden-policies: Cargo.lock: {len(ours)} packages, each as in theirs ({len(theirs)})")
PY
