# Shared by every policy's e2e.bats (`load ../../e2e/bats/kwctl`).

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
