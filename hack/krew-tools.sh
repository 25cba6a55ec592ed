#!/usr/bin/env bash
# krew-tools.sh builds krew and validate-krew-manifest from sigs.k8s.io/krew at a pinned version
# through the Go module proxy, once, into a cache outside the repo, and prints the bin dir.
# Cold: about a minute on 2 cores (module download included); cached: nothing.
set -euo pipefail
KREW_VERSION="${KREW_VERSION:-v0.4.3}"
bin="${LIVESYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-livesync}/tools/krew-$KREW_VERSION"
if [[ -f "$bin/.complete" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$bin"
exec 9>"$bin/.lock"
flock 9
if [[ ! -f "$bin/.complete" ]]; then
  start=$SECONDS
  echo "building krew $KREW_VERSION into $bin" >&2
  # Left unstamped on purpose: a krew without a version tag never checks GitHub for upgrades.
  (cd "$bin" && GOBIN="$bin" CGO_ENABLED=0 GOFLAGS=-buildvcs=false go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION" "sigs.k8s.io/krew/cmd/validate-krew-manifest@$KREW_VERSION")
  # kubectl finds krew as a plugin by this name.
  ln -sf krew "$bin/kubectl-krew"
  touch "$bin/.complete"
  echo "krew built in $((SECONDS - start))s" >&2
fi
echo "$bin"
