#!/usr/bin/env bash
# down.sh stops the local cluster up.sh started and removes all it left: processes, pods and their
# network, mounts, the bridge, cgroups, changed sysctls and LIVESYNC_CLUSTER_DIR. Safe to run twice,
# and after a kill -9 of any component.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lc_lock
if ! lc_leftovers; then
  lc_step "no cluster in $LC_DIR"
  exit 0
fi
lc_down
lc_step "cluster in $LC_DIR removed"
