#!/usr/bin/env bash
# restart.sh NAME... starts each named daemon of the local cluster again when it is not running,
# with the command line up.sh started it with (cmds/NAME), and waits until it is healthy: the
# kube-apiserver's /readyz, the kubelet's healthz and the node Ready, the checks up.sh waits on for
# the others. A running daemon is left alone, and its command line is recorded if up.sh did not
# (a cluster started by an older up.sh), so that it can be restarted after a later kill.
#
#   NAME                        kube-apiserver kube-controller-manager kube-scheduler etcd registry,
#                               and node 1's kubelet and containerd, node N's kubelet-N and containerd-N
#   LIVESYNC_CLUSTER_LOCK_HELD  1 when the caller holds the cluster lock (LIVESYNC_CLUSTER_DIR.lock)
#                               already: the fault suite holds it from a kill to the restart, so that
#                               no up.sh sees the cluster unhealthy and rebuilds it meanwhile
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if (($# == 0)); then
  echo "usage: $0 NAME... (one of: ${LC_DAEMONS[*]} kubelet containerd kubelet-N containerd-N)" >&2
  exit 2
fi
for name; do
  if ! [[ " ${LC_DAEMONS[*]} " == *" $name "* ]] && ! lc_daemon_node "$name" >/dev/null; then
    echo "restart: unknown daemon $name: want one of ${LC_DAEMONS[*]} kubelet containerd kubelet-N containerd-N" >&2
    exit 2
  fi
done
[[ ${LIVESYNC_CLUSTER_LOCK_HELD:-} == 1 ]] || lc_lock
if [[ ! -f $LC_DIR/$LC_MARK ]]; then
  echo "restart: no local cluster in $LC_DIR: start one with hack/localcluster/up.sh" >&2
  exit 1
fi

# healthy NAME BOUND waits up to BOUND seconds for NAME's health check, failing early if it exits.
healthy() {
  local name=$1 end=$((${EPOCHREALTIME/./} + $2 * 1000000))
  until lc_healthy "$name" >/dev/null 2>&1; do
    if [[ -z "$(lc_pids "$name")" ]]; then
      echo "restart: $name exited; last lines of $LC_DIR/logs/$name.log:" >&2
      tail -n 25 "$LC_DIR/logs/$name.log" >&2
      exit 1
    fi
    if ((${EPOCHREALTIME/./} > end)); then
      echo "restart: $name not healthy after $2s; logs in $LC_DIR/logs/$name.log" >&2
      exit 1
    fi
    sleep 0.1
  done
}

for name; do
  cmd=$LC_DIR/cmds/$name
  pid="$(lc_pids "$name")"
  if [[ -n $pid ]]; then
    if [[ ! -s $cmd ]]; then
      mkdir -p "$LC_DIR/cmds"
      cat "/proc/$pid/cmdline" >"$cmd"
    fi
    lc_step "restart: $name runs (pid $pid)"
  else
    if [[ ! -s $cmd ]]; then
      echo "restart: no recorded command line for $name in $cmd: restart the cluster (down.sh, up.sh)" >&2
      exit 1
    fi
    # A daemon killed a moment ago may still hold its ports.
    old="$(cat "$LC_DIR/pids/$name" 2>/dev/null)" || old=
    if [[ $old =~ ^[0-9]+$ ]]; then
      for ((i = 0; i < 100; i++)); do
        lc_exited "$old" && break
        sleep 0.1
      done
    fi
    mapfile -d '' argv <"$cmd"
    lc_start "$name" "${argv[@]}"
    lc_step "restart: $name started again (pid $(<"$LC_DIR/pids/$name"))"
  fi
  healthy "$name" 90
  lc_step "restart: $name healthy"
done
