#!/usr/bin/env bash
# check-skips.sh runs `go test -json ARGS...` in the current directory through hack/skipcheck: the
# log keeps package lines, failures and skips (-v: everything, as go test -v), and the run fails on
# a failed test or on a skip that hack/skips-allowed.txt (or the file LIVESYNC_SKIPS_ALLOWED names)
# does not list with its reason.
#
#   hack/check-skips.sh [-v] GO_TEST_ARGS...      e.g. hack/check-skips.sh -race -count=1 ./...
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
verbose=()
if [[ "${1:-}" == -v ]]; then
  verbose=(-v)
  shift
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# skipcheck runs here: build it for this machine even when the tests are cross-built (hack/wine.sh).
(cd "$root" && GOOS= GOARCH= go build -o "$tmp/skipcheck" ./hack/skipcheck)
go test -json "$@" | "$tmp/skipcheck" "${verbose[@]}" -allow "${LIVESYNC_SKIPS_ALLOWED:-$root/hack/skips-allowed.txt}"
