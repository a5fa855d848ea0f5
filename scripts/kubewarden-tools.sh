#!/usr/bin/env bash
# Prints the directory holding Kubewarden's kwctl and policy-server: the one on PATH, or else
# kubewarden/ in cargo's target directory (scripts/target-dir.sh), unpacked there from the
# project's shared folder (../shared/kubewarden, kwctl and policy-server 1.36 with their checksums)
# when it is at hand. Prints nothing, and exits 1, when neither is found. Quick when already
# unpacked.
set -euo pipefail
cd "$(dirname "$0")/.."
if kw=$(command -v kwctl) && command -v policy-server >/dev/null; then
  dirname "$kw"; exit 0
fi
shared=${KUBEWARDEN_SHARED:-../shared/kubewarden}
dir=$(scripts/target-dir.sh)/kubewarden
if [ -x "$dir/kwctl" ] && [ -x "$dir/policy-server" ]; then
  realpath "$dir"; exit 0
fi
[ -x "$shared/install.sh" ] || exit 1
if ! command -v xz >/dev/null; then
  echo "kubewarden-tools: installing xz-utils (apt-get)" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq xz-utils >/dev/null
fi
"$shared/install.sh" "$dir" >&2
realpath "$dir"
