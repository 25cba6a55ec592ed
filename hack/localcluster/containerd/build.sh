#!/usr/bin/env bash
# containerd/build.sh compiles the local cluster's container runtime (containerd 2, its runc shim,
# ctr, and runc) once into a cache outside the repo and prints that bin dir. The cache is
# keyed by this module's own inputs (see lc_containerd_dir), so changing containerd never changes
# the Kubernetes bin dir (lc_bin_dir) nor forces a relink of Kubernetes. Cold ~3 min on 2 cores.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib.sh
source "$here/../lib.sh"

bin="$(lc_containerd_dir)"
if [[ -f "$bin/.complete" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$bin"
exec 9>"$bin/.lock"
flock 9
if [[ -f "$bin/.complete" ]]; then
  echo "$bin"
  exit 0
fi
start=$SECONDS
echo "building containerd $LC_CONTAINERD_VERSION and runc $LC_RUNC_VERSION into $bin (cold: ~3 min on 2 cores)" >&2
# No cgo: the snapshotters that need it (btrfs, devmapper, zfs) are left out; the cluster uses overlayfs.
(cd "$here" && CGO_ENABLED=0 go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
  -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$LC_CONTAINERD_VERSION" -o "$bin/" \
  github.com/containerd/containerd/v2/cmd/containerd \
  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
  github.com/containerd/containerd/v2/cmd/ctr)
# runc needs cgo (its nsenter is C) and libseccomp; hack/deps.sh installs gcc and libseccomp-dev.
(cd "$here/runc" && CGO_ENABLED=1 go build -trimpath -tags "seccomp urfave_cli_no_docs" \
  -ldflags "-s -w -X main.version=${LC_RUNC_VERSION#v}" -o "$bin/" github.com/opencontainers/runc)
touch "$bin/.complete"
echo "built in $((SECONDS - start))s" >&2
echo "$bin"
