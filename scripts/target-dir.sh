#!/usr/bin/env bash
# scripts/target-dir.sh [<workspace dir>]: prints cargo's target directory for the workspace (by
# default this one) as cargo resolves it ($CARGO_TARGET_DIR, build.target-dir in a cargo config,
# else target/ in the workspace), absolute: where make and the scripts find what cargo built.
# Prints the workspace's target/ when cargo cannot say (not installed yet).
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
dir=$(${CARGO:-cargo} metadata --format-version 1 --no-deps 2>/dev/null |
  sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p') || true
echo "${dir:-$PWD/target}"
