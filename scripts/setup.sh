#!/usr/bin/env bash
# Installs what `make run` and `make test` need on a fresh machine of this project's
# kind (Debian, Rust via rustup, root). Idempotent: quick when everything is there.
set -euo pipefail

need_apt=()
command -v node >/dev/null || need_apt+=(nodejs)      # runs the rules crate's wasm tests (node:wasi)
command -v python3 >/dev/null || need_apt+=(python3)  # formats `make run` output
# PyYAML: make upgrade-test reads the previous release's manifests and cases (e2e/upgrade/test_upgrade.py).
python3 -c "import yaml" 2>/dev/null || need_apt+=(python3-yaml)
command -v cc >/dev/null || need_apt+=(gcc)
# The CNCF distribution registry: make test pushes and pulls every policy through it on 127.0.0.1.
command -v docker-registry >/dev/null || need_apt+=(docker-registry)
# Each policy's e2e.bats runs through kwctl when kwctl is on PATH; xz unpacks ../shared/kubewarden.
command -v bats >/dev/null || need_apt+=(bats)
command -v xz >/dev/null || need_apt+=(xz-utils)
command -v wasm-opt >/dev/null || need_apt+=(binaryen)  # make build shrinks the modules (scripts/optimize-modules.sh)
if ((${#need_apt[@]})); then
  echo "setup: installing ${need_apt[*]} (apt-get)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if command -v rustup >/dev/null; then
  installed_targets=$(rustup target list --installed)
  grep -qx wasm32-wasip1 <<<"$installed_targets" || rustup target add wasm32-wasip1
  installed_components=$(rustup component list --installed)
  for c in rustfmt clippy; do
    grep -q "^$c" <<<"$installed_components" || rustup component add "$c"
  done
else
  echo "setup: rustup not found; make sure the wasm32-wasip1 target, rustfmt and clippy are installed" >&2
fi
