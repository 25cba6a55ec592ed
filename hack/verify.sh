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
only_in 'github.com/modelcontextprotocol/go-sdk' pkg/mcp
# pkg/remote is the container side: it knows nothing of what is sent or why.
module="$(go list -m)"
if imports="$(go list -f '{{join .Deps "\n"}}{{"\n"}}{{join .TestImports "\n"}}{{"\n"}}{{join .XTestImports "\n"}}' ./pkg/remote |
  grep -E "^$module/pkg/(planner|filesync|session|cmd|workload)(/|$)")"; then
  echo "pkg/remote must not import the packages above it, found:"; echo "$imports"; fail=1
fi
# pkg/coalesce and pkg/localtree sit below the planner, pkg/syncstate knows nothing of what it
# saves, pkg/delta (the rolling match) and pkg/threeway (a start's decision) are algorithms, and
# pkg/control (a session's socket) knows nothing of Kubernetes or of how files are sent, and
# pkg/memlimit (the session's memory limit) only the runtime: they import no package of this module; pkg/mcp only pkg/control;
# pkg/tarstream only pkg/remote and pkg/localtree.
for p in coalesce localtree syncstate delta threeway control memlimit; do
  if imports="$(go list -f '{{join .Imports "\n"}}' ./pkg/$p | grep -E "^$module/")"; then
    echo "pkg/$p must not import other packages of this module, found:"; echo "$imports"; fail=1
  fi
done
# pkg/planner decides what to send and delete from the local tree and what a container confirmed:
# it knows neither the engine that runs its plans (pkg/filesync) nor the session or its printer.
if imports="$(go list -f '{{join .Imports "\n"}}{{"\n"}}{{join .TestImports "\n"}}' ./pkg/planner |
  grep -E "^$module/pkg/(filesync|cmd|report|session)(/|$)")"; then
  echo "pkg/planner must not import the engine, the session or what prints it, found:"; echo "$imports"; fail=1
fi
# pkg/forward and pkg/logs are driven by the tracker's pod events, which the session hands them:
# they import no package of this module (filesync least of all).
for p in forward logs; do
  if imports="$(go list -f '{{join .Imports "\n"}}' ./pkg/$p | grep -E "^$module/")"; then
    echo "pkg/$p must not import other packages of this module, found:"; echo "$imports"; fail=1
  fi
done
if imports="$(go list -f '{{join .Imports "\n"}}' ./pkg/mcp | grep -E "^$module/" | grep -vE "^$module/pkg/control$")"; then
  echo "pkg/mcp may import only pkg/control of this module, found:"; echo "$imports"; fail=1
fi
if imports="$(go list -f '{{join .Imports "\n"}}' ./pkg/tarstream | grep -E "^$module/" | grep -vE "^$module/pkg/(remote|localtree)$")"; then
  echo "pkg/tarstream may import only pkg/remote and pkg/localtree of this module, found:"; echo "$imports"; fail=1
fi
# No import runs back up: the commands (pkg/cmd) sit on top, only main and the docs generator
# import them; pkg/report prints what the sessions say and knows no command; the engine and
# what it drives know neither the session nor its printer.
if imports="$(go list -tags e2e,bench -f '{{.ImportPath}}: {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... |
  grep -vE "^$module/(cmd/kubectl-livesync|hack/gendocs|pkg/cmd):" | grep -E " $module/pkg/cmd( |$)")"; then
  echo "only cmd/kubectl-livesync and hack/gendocs may import pkg/cmd, found:"; echo "$imports"; fail=1
fi
for p in session filesync syncback remote workload restart; do
  if imports="$(go list -f '{{join .Imports "\n"}}' ./pkg/$p | grep -E "^$module/pkg/(cmd|report|session)$")"; then
    echo "pkg/$p must not import the session or what prints it, found:"; echo "$imports"; fail=1
  fi
done
# No package holds more than 4,000 lines of non-test Go: one that outgrows it is cut along its
# rooms (docs/development.md, "Where new parts go").
max_lines=4000
while read -r dir; do
  n="$(find "$dir" -maxdepth 1 -name '*.go' ! -name '*_test.go' -exec cat {} + | wc -l)"
  if ((n > max_lines)); then
    echo "$dir holds $n lines of non-test Go, more than $max_lines: move a room out (docs/development.md)"; fail=1
  fi
done < <(go list -f '{{.Dir}}' ./... | sed "s|^$PWD/||")
# Only pkg/remote embeds or runs the scripts that run in containers.
hits="$(grep -rlE --include='*.go' '^//go:embed .*\.sh|^//go:embed scripts' cmd pkg test | grep -v '^pkg/remote/' || true)"
if [[ -n "$hits" ]]; then
  echo "only pkg/remote embeds the container scripts, found in:"; echo "$hits"; fail=1
fi
hits="$(find pkg -name '*.sh' -not -path 'pkg/remote/scripts/*' | sort)"
if [[ -n "$hits" ]]; then
  echo "container scripts live in pkg/remote/scripts, found:"; echo "$hits"; fail=1
fi
exit $fail
