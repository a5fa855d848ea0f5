#!/usr/bin/env bash
# scripts/optimize-modules.sh MODULE.wasm...: passes each release module through binaryen's
# `wasm-opt -O3`, in place (about 10% smaller, as fast or faster: BENCHMARKS.md, "Module size").
# A module already optimized (its sha256 is in MODULE.wasm.optimized) is left as it is, so an
# unchanged build costs nothing. The flags enable exactly the features rustc's wasm32-wasip1
# output uses: binaryen's --all-features would emit instructions wasmtime rejects.
set -euo pipefail
features=(--enable-bulk-memory --enable-sign-ext --enable-mutable-globals
          --enable-nontrapping-float-to-int --enable-multivalue --enable-reference-types)
command -v wasm-opt >/dev/null || { echo "optimize-modules: wasm-opt is not installed (scripts/setup.sh installs binaryen)" >&2; exit 1; }
for module in "$@"; do
  stamp="$module.optimized"
  if [ -f "$stamp" ] && [ "$(sha256sum < "$module")" = "$(cat "$stamp")" ]; then
    continue
  fi
  before=$(stat -c %s "$module")
  wasm-opt "${features[@]}" -O3 "$module" -o "$module.tmp"
  mv "$module.tmp" "$module"
  sha256sum < "$module" > "$stamp"
  printf '    wasm-opt -O3 %s: %s -> %s bytes\n' "$(basename "$module")" "$before" "$(stat -c %s "$module")"
done
