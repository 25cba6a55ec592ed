#!/usr/bin/env bash
# lint.sh runs golangci-lint v2, built once from the Go module proxy into the tools cache.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version=v2.15.0
tools="${LIVESYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-livesync}/tools/golangci-lint-$version"
if [[ ! -x "$tools/golangci-lint" ]]; then
  echo "lint: building golangci-lint $version (once)" >&2
  GOBIN="$tools" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$version"
fi
"$tools/golangci-lint" run ./...
