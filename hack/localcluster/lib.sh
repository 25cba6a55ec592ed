# shellcheck shell=bash disable=SC2034  # settings are used by the scripts that source this
# lib.sh: shared settings and helpers of the local cluster scripts. Sourced, not run.
#
# Every listener is on 127.0.0.1 and all state lives under LC_DIR, except what the kernel keeps
# elsewhere: the CNI bridge LC_BRIDGE and its veths, the cgroups under LC_CGROUP, a few sysctls the
# kubelet and the bridge plugin set. lc_down undoes all of it, also after a kill -9 of any part.
LC_K8S_VERSION=v1.37.2
LC_K8S_MAJOR=1
LC_K8S_MINOR=37
LC_CONTAINERD_VERSION=v2.4.2
LC_RUNC_VERSION=v1.5.3
LC_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LC_CACHE="${LIVESYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-livesync}"
LC_DIR="$(realpath -m "${LIVESYNC_CLUSTER_DIR:-$LC_CACHE/cluster}")"
LC_REGISTRY=127.0.0.1:5000
LC_PAUSE_IMAGE="$LC_REGISTRY/pause:3.10"
LC_SOCK="$LC_DIR/containerd.sock"
LC_BRIDGE=lsync0
LC_CNI_NET=livesync
LC_CGROUP=livesync # the kubelet's cgroupRoot, under every cgroup v1 controller
LC_MARK=.livesync-cluster
LC_APISERVER=https://127.0.0.1:6443
# The kubelet sets the kernel.* and vm.* ones, the bridge plugin ip_forward; down puts them back.
LC_SYSCTLS=(net.ipv4.ip_forward kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
# Every daemon but containerd, which down stops last because removing pods needs it.
LC_DAEMONS=(kubelet kube-scheduler kube-controller-manager kube-apiserver etcd registry)
LC_T0=${LC_T0:-$EPOCHREALTIME}

# lc_bin_dir prints the cache dir of the binaries built from the current build inputs.
lc_bin_dir() {
  local h
  h="$(
    cd "$LC_HERE" || exit
    inputs=(build.sh go.mod go.sum cmd/*/*.go tools/go.mod tools/go.sum)
    for f in tools/cmd/*/*.go; do [[ $f == *_test.go ]] || inputs+=("$f"); done
    cat "${inputs[@]}" | sha256sum | cut -c1-12
  )"
  echo "$LC_CACHE/k8s-$LC_K8S_VERSION-$h/bin"
}

# lc_containerd_dir prints the cache dir of the container runtime built from containerd/'s own
# inputs. They are not among lc_bin_dir's: a new containerd never relinks Kubernetes.
lc_containerd_dir() {
  local h
  h="$(cd "$LC_HERE/containerd" && cat build.sh go.mod go.sum tools.go runc/go.mod runc/go.sum runc/tools.go | sha256sum | cut -c1-12)"
  echo "$LC_CACHE/containerd-$LC_CONTAINERD_VERSION-$h/bin"
}

# lc_node prints the node name: the host name when it resolves to loopback (the apiserver reaches
# the kubelet by it), else localhost.
lc_node() {
  local h
  h="$(hostname | tr '[:upper:]' '[:lower:]')"
  if [[ "$(getent ahostsv4 "$h" 2>/dev/null | awk '{print $1; exit}')" == 127.* ]]; then
    echo "$h"
  else
    echo localhost
  fi
}

lc_step() {
  local d=$((${EPOCHREALTIME/./} - ${LC_T0/./}))
  printf '[%3d.%ds] %s\n' $((d / 1000000)) $((d / 100000 % 10)) "$*" >&2
}

lc_warn() { echo "warning: $*" >&2; }

# lc_alive PID succeeds when PID runs (a zombie does not count) and is one of ours: every process
# the cluster starts names LC_DIR on its command line, which guards against reused pids.
lc_alive() {
  local pid=$1 k v cmd
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  { while read -r k v _; do
    [[ $k == State: ]] && break
  done </proc/"$pid"/status; } 2>/dev/null || return 1
  [[ -n $v && $v != Z ]] || return 1
  cmd="$(tr '\0' ' ' 2>/dev/null </proc/"$pid"/cmdline)" || return 1
  [[ $cmd == *"$LC_DIR"* ]]
}

# lc_exited PID succeeds when PID is gone or a zombie. A killed process stops being lc_alive when
# its memory goes, a moment before it has closed its files (and freed its ports).
lc_exited() {
  local k v
  { while read -r k v _; do
    [[ $k == State: ]] && break
  done </proc/"$1"/status; } 2>/dev/null || return 0
  [[ $v == Z || $v == X ]]
}

# lc_pids NAME... prints the recorded pids of the named daemons that still run.
lc_pids() {
  local n p
  for n; do
    p="$(cat "$LC_DIR/pids/$n" 2>/dev/null)" || continue
    if lc_alive "$p"; then echo "$p"; fi
  done
}

# lc_stop BOUND PID... sends TERM, waits up to BOUND seconds, then KILLs what is left.
lc_stop() {
  local bound=$1 p left i
  shift
  (($# == 0)) && return 0
  kill -TERM "$@" 2>/dev/null || true
  for ((i = 0; i < bound * 20; i++)); do
    left=()
    for p; do if lc_alive "$p"; then left+=("$p"); fi; done
    ((${#left[@]} == 0)) && return 0
    sleep 0.05
  done
  lc_warn "killing ${left[*]} after ${bound}s"
  kill -KILL "${left[@]}" 2>/dev/null || true
  for ((i = 0; i < 40; i++)); do
    for p in "${left[@]}"; do lc_alive "$p" && break; done
    lc_alive "$p" || return 0
    sleep 0.05
  done
}

# lc_leftover_pids prints processes the cluster left behind without a pid file: daemons and
# containerd shims that name LC_DIR, and container processes in the kubelet's cgroups.
lc_leftover_pids() {
  local f p exe
  grep -lsaF "$LC_DIR" /proc/[0-9]*/cmdline | while IFS= read -r f; do
    p=${f#/proc/}
    p=${p%/cmdline}
    exe="$(readlink "/proc/$p/exe" 2>/dev/null)" || continue
    case "${exe##*/}" in
    kube-apiserver | kube-controller-manager | kube-scheduler | kubelet | etcd | lcimage | containerd | containerd-shim-runc-v2)
      if lc_alive "$p"; then echo "$p"; fi
      ;;
    esac
  done
  grep -ls ":/$LC_CGROUP/" /proc/[0-9]*/cgroup | sed 's|^/proc/\([0-9]*\)/cgroup$|\1|'
}

# lc_crictl runs crictl against the cluster's containerd.
lc_crictl() {
  "$LC_DIR/bin/crictl" --runtime-endpoint "unix://$LC_SOCK" --image-endpoint "unix://$LC_SOCK" --timeout 20s "$@"
}

# lc_lock waits until no other up.sh or down.sh works on LC_DIR, holding fd 8. The lock file sits
# beside LC_DIR, which down removes.
lc_lock() {
  mkdir -p "$(dirname "$LC_DIR")"
  exec 8>"$LC_DIR.lock"
  flock 8
}

# lc_start NAME CMD... starts a daemon in its own session, logging to logs/NAME.log, its pid in
# pids/NAME and its argv, NUL-separated, in cmds/NAME (restart.sh starts it again from there). The
# daemon must not inherit a lock: it would hold it as long as it runs. Neither the cluster's (fd 8)
# nor the e2e lock of a caller run as `flock -s /tmp/livesync-e2e.lock hack/e2e.sh` (flock's fd, 3):
# daemons holding that one shared made `flock -x` (the fault suite) wait forever.
lc_start() {
  local name=$1
  shift
  mkdir -p "$LC_DIR/cmds"
  printf '%s\0' "$@" >"$LC_DIR/cmds/$name"
  setsid "$@" </dev/null >>"$LC_DIR/logs/$name.log" 2>&1 3>&- 8>&- &
  echo $! >"$LC_DIR/pids/$name"
}

# lc_node_ready succeeds when the node is Ready and has no taints.
lc_node_ready() {
  [[ "$("$LC_DIR/bin/kubectl" --kubeconfig "$LC_DIR/kubeconfig" get node "$(lc_node)" \
    -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}/{.spec.taints}')" == True/ ]]
}

# lc_healthy NAME succeeds when the daemon NAME serves: the checks up.sh waits on.
lc_healthy() {
  local pki=$LC_DIR/pki
  case $1 in
  etcd) curl -fsS http://127.0.0.1:2379/health ;;
  containerd) lc_crictl version ;;
  registry) curl -fsS "http://$LC_REGISTRY/v2/" ;;
  kube-apiserver) curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$LC_APISERVER/readyz" ;;
  kube-controller-manager) curl -fsSk https://127.0.0.1:10257/healthz ;;
  kube-scheduler) curl -fsSk https://127.0.0.1:10259/healthz ;;
  kubelet) curl -fsS http://127.0.0.1:10248/healthz && lc_node_ready ;;
  *) return 2 ;;
  esac
}

# lc_start_containerd starts the cluster's own containerd 2 (containerd/build.sh); a cluster up.sh
# made before it had one runs the host's.
lc_start_containerd() {
  local c=containerd
  [[ -x $LC_DIR/containerd-bin/containerd ]] && c=$LC_DIR/containerd-bin/containerd
  lc_start containerd "$c" --config "$LC_DIR/containerd/config.toml"
}

# lc_mounts prints the mount points under LC_DIR, deepest first.
lc_mounts() {
  findmnt -rn -o TARGET | awk -v d="$LC_DIR" 'index($0, d "/") == 1 || $0 == d { print length($0), $0 }' |
    sort -rn | cut -d' ' -f2- | uniq
}

# lc_leftovers succeeds when anything of a cluster is there: its dir, processes, bridge or cgroups.
lc_leftovers() {
  [[ -e $LC_DIR ]] || [[ -n "$(lc_leftover_pids)" ]] || ip link show dev "$LC_BRIDGE" >/dev/null 2>&1 ||
    compgen -G "/sys/fs/cgroup/*/$LC_CGROUP" >/dev/null
}

# lc_down removes everything lc_up made: processes, pod sandboxes (with CNI DEL), mounts, the bridge,
# cgroups, changed sysctls, files outside LC_DIR, and LC_DIR itself. Idempotent.
lc_down() {
  if [[ -e $LC_DIR && ! -e $LC_DIR/$LC_MARK ]]; then
    echo "refusing to clean $LC_DIR: it has no $LC_MARK, so it is not a local cluster's dir" >&2
    return 1
  fi
  # 1. Everything but containerd, so that nothing recreates pods while they are removed: clients
  #    first, then the apiserver (its shutdown hangs while etcd is gone), then its storage.
  # shellcheck disable=SC2046
  lc_stop 10 $(lc_pids kubelet kube-scheduler kube-controller-manager)
  # shellcheck disable=SC2046
  lc_stop 10 $(lc_pids kube-apiserver)
  # shellcheck disable=SC2046
  lc_stop 10 $(lc_pids "${LC_DAEMONS[@]}")
  lc_step "down: kubelet, control plane, etcd and registry stopped"

  # 2. Pod sandboxes through containerd, which runs CNI DEL and stops containers and shims; after a
  #    kill -9 of containerd it comes back for this. Shims keep their sockets outside LC_DIR
  #    (/run/containerd/s/<hash>); each task's bundle names its socket, and a killed shim leaves it.
  local sockets=() sock
  for sock in "$LC_DIR"/containerd/state/io.containerd.runtime.v2.task/*/*/address; do
    [[ -f $sock ]] && sockets+=("$(<"$sock")")
  done
  if [[ -d $LC_DIR/containerd/root && -x $LC_DIR/bin/crictl ]]; then
    if [[ -z "$(lc_pids containerd)" ]]; then
      rm -f "$LC_SOCK"
      lc_start_containerd
      local i
      for ((i = 0; i < 200; i++)); do
        lc_crictl version >/dev/null 2>&1 && break
        sleep 0.05
      done
    fi
    lc_crictl rmp --force --all >>"$LC_DIR/logs/down.log" 2>&1 || lc_warn "removing pod sandboxes failed: see $LC_DIR/logs/down.log"
  fi
  # shellcheck disable=SC2046
  lc_stop 10 $(lc_pids containerd)
  lc_step "down: pod sandboxes removed, containerd stopped"

  # 3. Whatever is left: shims, containers whose shim died, daemons whose pid file is gone.
  # shellcheck disable=SC2046
  lc_stop 5 $(lc_leftover_pids)

  for sock in "${sockets[@]}"; do
    sock=${sock#unix://}
    [[ $sock == /run/containerd/s/* ]] && rm -f "$sock"
  done

  # 4. Mounts: the kubelet's (its root dir is an rshared bind mount, so some show twice), the
  #    snapshots, shm and netns of containerd.
  local m i
  for ((i = 0; i < 5; i++)); do
    m="$(lc_mounts)"
    [[ -z $m ]] && break
    while IFS= read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done <<<"$m"
  done
  [[ -z "$(lc_mounts)" ]] || lc_warn "still mounted under $LC_DIR: $(lc_mounts | tr '\n' ' ')"

  # 5. The bridge and any veth still on it.
  if ip link show dev "$LC_BRIDGE" >/dev/null 2>&1; then
    local v
    for v in $(ip -o link show master "$LC_BRIDGE" | awk -F': ' '{print $2}' | cut -d@ -f1); do
      ip link del "$v" 2>/dev/null || true
    done
    ip link del "$LC_BRIDGE" 2>/dev/null || lc_warn "could not delete $LC_BRIDGE"
  fi

  # 6. The kubelet's cgroups, deepest first; a cgroup empties a moment after its last task dies.
  local c
  for c in /sys/fs/cgroup/*/"$LC_CGROUP" /sys/fs/cgroup/"$LC_CGROUP"; do
    [[ -d $c ]] || continue
    for ((i = 0; i < 40; i++)); do
      find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
      [[ -d $c ]] || break
      sleep 0.05
    done
    [[ -d $c ]] && lc_warn "could not remove cgroup $c"
  done

  # 7. Sysctls as they were before up, files the kubelet and CNI keep outside LC_DIR.
  if [[ -f $LC_DIR/sysctl.before ]]; then
    local kv
    while IFS= read -r kv; do
      [[ "$(sysctl -n "${kv%%=*}" 2>/dev/null)" == "${kv#*=}" ]] || sysctl -qw "$kv" >/dev/null 2>&1 || lc_warn "could not restore $kv"
    done <"$LC_DIR/sysctl.before"
  fi
  local f
  for f in /var/log/containers/*.log; do
    [[ -L $f && "$(readlink "$f")" == "$LC_DIR"/* ]] && rm -f "$f"
  done
  rm -f /var/lib/cni/results/"$LC_CNI_NET"-*
  if [[ -f $LC_DIR/created-outside ]]; then
    while IFS= read -r f; do rmdir "$f" 2>/dev/null || true; done <"$LC_DIR/created-outside"
  fi

  # 8. iptables must be as found: nothing here adds rules, so a difference is a bug to report.
  if [[ -f $LC_DIR/iptables.before ]] && ! diff -q "$LC_DIR/iptables.before" <(lc_iptables) >/dev/null; then
    lc_warn "iptables differ from before up (not restored):"
    diff "$LC_DIR/iptables.before" <(lc_iptables) >&2 || true
  fi

  if [[ -e $LC_DIR ]]; then
    rm -rf --one-file-system "$LC_DIR" || lc_warn "could not remove $LC_DIR"
  fi
}

# lc_iptables prints the rules of iptables and ip6tables without counters and comments.
lc_iptables() {
  { iptables-save; ip6tables-save; } 2>/dev/null | sed -e '/^#/d' -e 's/\[[0-9]*:[0-9]*\]//'
}
