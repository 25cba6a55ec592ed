#!/usr/bin/env bash
# verify.sh encodes the house rules: gofmt, go vet, shellcheck on the scripts that run in containers,
# and which package may import what.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fail=0
unformatted="$(gofmt -l cmd pkg test hack)"
if [[ -n "$unformatted" ]]; then
  echo "gofmt needed on:"; echo "$unformatted"; fail=1
fi
if ! go mod tidy -diff >/dev/null; then
  echo "go.mod/go.sum are not tidy: run go mod tidy"; fail=1
fi
go vet ./...
go vet -tags e2e ./test/...
go vet -tags bench ./test/bench/
# The scripts under pkg/ run in containers as `sh -c`: POSIX sh and busybox, not bash.
if ! command -v shellcheck >/dev/null; then
  echo "shellcheck not found: run hack/deps.sh"; fail=1
else
  mapfile -t scripts < <(find pkg -name '*.sh' | sort)
  if ((${#scripts[@]} > 0)) && ! shellcheck "${scripts[@]}"; then
    fail=1
  fi
fi
# only_in PATTERN DIR: the import PATTERN may appear only in DIR.
only_in() {
  local hits
  hits="$(grep -rlE --include='*.go' "\"$1" cmd pkg test | grep -v "^$2/" || true)"
  if [[ -n "$hits" ]]; then
    echo "import $1 is reserved to $2, found in:"; echo "$hits"; fail=1
  fi
}
only_in 'github.com/spf13/(cobra|pflag)' pkg/cmd
only_in 'github.com/rjeczalik/notify' pkg/watch
only_in 'github.com/google/go-containerregistry' pkg/image
exit $fail
