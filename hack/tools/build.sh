#!/usr/bin/env bash
# build.sh compiles the e2e suite's stand-ins for the tools that own workloads, once, into a cache
# outside the repo keyed by a hash of this module's build inputs, and prints the bin dir:
#   helm         the Helm 4 CLI (helm.sh/helm/v4, go.mod pins the version)
#   lcreconcile  a GitOps reconciler on Flux's own apply library (github.com/fluxcd/pkg/ssa)
# A cache hit costs nothing; a cold build is ~6 minutes on 2 busy cores (helm is nearly all of it).
# A module of its own: neither the plugin's go.mod nor the local cluster's tools (whose hash
# keys the Kubernetes build) carry Helm's and Flux's dependencies.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${LIVESYNC_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-livesync}"
h="$(
  cd "$here"
  inputs=(build.sh go.mod go.sum)
  for f in cmd/*/*.go; do [[ $f == *_test.go ]] || inputs+=("$f"); done
  cat "${inputs[@]}" | sha256sum | cut -c1-12
)"
bin="$cache/tools-$h/bin"
if [[ -f "$bin/.complete" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$bin"
# One build at a time: the e2e suite and CI may call this at once.
exec 9>"$bin/.lock"
flock 9
if [[ -f "$bin/.complete" ]]; then
  echo "$bin"
  exit 0
fi
start=$SECONDS
helm_version="$(cd "$here" && go list -m -f '{{.Version}}' helm.sh/helm/v4)"
echo "building helm $helm_version and lcreconcile into $bin (cold: ~6 min on 2 cores)" >&2
(cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$helm_version" \
  -o "$bin/" helm.sh/helm/v4/cmd/helm ./cmd/lcreconcile)
touch "$bin/.complete"
echo "built in $((SECONDS - start))s" >&2
echo "$bin"
