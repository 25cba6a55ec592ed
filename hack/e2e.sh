#!/usr/bin/env bash
# e2e.sh runs test/e2e against a real cluster. With KUBECONFIG and LIVESYNC_E2E_REGISTRY set it
# uses that cluster and registry; otherwise it brings the local cluster up (hack/localcluster) and,
# if it was not already running, tears it down again when the tests end, pass or fail.
# LIVESYNC_E2E_LOCALCLUSTER (the local cluster's dir; set here when the cluster is the local one)
# lets the fault suite kill and restart the cluster's daemons.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
lc=hack/localcluster
export LIVESYNC_BINARY="${LIVESYNC_BINARY:-$PWD/bin/kubectl-livesync}"

if [[ -n "${KUBECONFIG:-}" && -n "${LIVESYNC_E2E_REGISTRY:-}" ]]; then
  echo "e2e: using KUBECONFIG=$KUBECONFIG and registry $LIVESYNC_E2E_REGISTRY" >&2
  # Another cluster needs no Kubernetes build: the image builder alone, and the user's kubectl.
  if [[ -z "${LIVESYNC_LCIMAGE:-}" ]]; then
    LIVESYNC_LCIMAGE="$PWD/bin/lcimage"
    (cd $lc/tools && go build -o "$LIVESYNC_LCIMAGE" ./cmd/lcimage)
    # The distroless image kind's one binary: the pause program, next to lcimage.
    (cd $lc && CGO_ENABLED=0 go build -o "$(dirname "$LIVESYNC_LCIMAGE")/pause" ./cmd/pause)
  fi
  export LIVESYNC_LCIMAGE LIVESYNC_KUBECTL="${LIVESYNC_KUBECTL:-$(command -v kubectl)}"
  # The local cluster named by its kubeconfig: the fault suite may kill and restart its daemons.
  # shellcheck source=hack/localcluster/lib.sh
  if [[ -z "${LIVESYNC_E2E_LOCALCLUSTER:-}" ]] && source $lc/lib.sh &&
    [[ -f "$LC_DIR/$LC_MARK" && "$(realpath -m "$KUBECONFIG")" == "$LC_DIR/kubeconfig" ]]; then
    export LIVESYNC_E2E_LOCALCLUSTER="$LC_DIR"
  fi
else
  bin="$($lc/build.sh)"
  export LIVESYNC_KUBECTL="${LIVESYNC_KUBECTL:-$bin/kubectl}" LIVESYNC_LCIMAGE="${LIVESYNC_LCIMAGE:-$bin/lcimage}"
  # shellcheck source=hack/localcluster/lib.sh
  source $lc/lib.sh
  if [[ ! -f "$LC_DIR/$LC_MARK" ]] || [[ "${LIVESYNC_E2E_FRESH:-}" == 1 ]]; then
    trap '$lc/down.sh' EXIT
  fi
  KUBECONFIG="$($lc/up.sh | tail -n 1)"
  export KUBECONFIG LIVESYNC_E2E_REGISTRY="$LC_REGISTRY" LIVESYNC_E2E_LOCALCLUSTER="$LC_DIR"
fi
if [[ -n "${LIVESYNC_E2E_LOCALCLUSTER:-}" ]]; then
  echo "e2e: component faults on the local cluster in $LIVESYNC_E2E_LOCALCLUSTER" >&2
else
  echo "e2e: component faults skipped: not the local cluster (LIVESYNC_E2E_LOCALCLUSTER unset)" >&2
fi
# Helm 4 and the GitOps reconciler stand-in (test/e2e/owners_test.go): built once, then cached.
if [[ -z "${LIVESYNC_HELM:-}" || -z "${LIVESYNC_RECONCILER:-}" ]]; then
  tools="$(hack/tools/build.sh)"
  LIVESYNC_HELM="${LIVESYNC_HELM:-$tools/helm}" LIVESYNC_RECONCILER="${LIVESYNC_RECONCILER:-$tools/lcreconcile}"
fi
export LIVESYNC_HELM LIVESYNC_RECONCILER
# The Windows build under wine (TestWindowsBinaryUnderWine): the .exe and a wine prefix that runs it.
if [[ -z "${LIVESYNC_WINDOWS_BINARY:-}" ]]; then
  LIVESYNC_WINDOWS_BINARY="$PWD/bin/kubectl-livesync.exe"
  GOOS=windows GOARCH=amd64 CGO_ENABLED=0 go build -trimpath -o "$LIVESYNC_WINDOWS_BINARY" ./cmd/kubectl-livesync
fi
export LIVESYNC_WINDOWS_BINARY
# Without wine (not root, not installed) the other tests still run; that one fails and says why.
if hack/wine.sh setup; then
  export LIVESYNC_WINE="$PWD/hack/wine.sh"
fi
start=$SECONDS
status=0
# -v: the whole log, as go test -v prints it; a skip not in hack/skips-allowed.txt fails the run.
hack/check-skips.sh -v -tags e2e -count=1 -timeout 45m ${E2E_RUN:+-run "$E2E_RUN"} ./test/e2e/ || status=$?
hack/wine.sh stop # nothing of wine outlives the run
echo "e2e: finished in $((SECONDS - start))s" >&2
exit "$status"
