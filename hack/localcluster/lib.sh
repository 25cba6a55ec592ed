# shellcheck shell=bash disable=SC2034  # settings are used by the scripts that source this
# lib.sh: shared settings and helpers of the local cluster scripts. Sourced, not run.
#
# The cluster has LC_NODES nodes on this one machine. Each node is a containerd (own root, state and
# socket, so its own image cache) and a kubelet (own root dir, cgroup root, CNI bridge and pod subnet,
# listening on its node IP, the bridge's own address). Node 1 keeps its state at the top of LC_DIR
# (containerd.sock, containerd/, kubelet/), node N in LC_DIR/nN; their daemons are pids/kubelet and
# pids/containerd for node 1, pids/kubelet-N and pids/containerd-N for node N.
#
# Control plane listeners are on 127.0.0.1, the kubelets on their node IPs. All state lives under
# LC_DIR, except what the kernel keeps elsewhere: the bridges and their veths, the cgroups under
# LC_CGROUP, a few sysctls the kubelet and the bridge plugin set. lc_down undoes all of it, also after
# a kill -9 of any part.
#
# LIVESYNC_CLUSTER_ID (0-9, default 0) lets a second cluster run beside the default one: it moves
# every port by 100 per step, the pod network to 10.(244+ID).0.0/16, and renames the bridges, the
# cgroup root and the CNI network, so that neither cluster's down.sh can touch the other's.
LC_K8S_VERSION=v1.37.2
LC_K8S_MAJOR=1
LC_K8S_MINOR=37
LC_CONTAINERD_VERSION=v2.4.2
LC_RUNC_VERSION=v1.5.3
LC_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LC_CACHE="${LIVESYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-livesync}"
LC_DIR="$(realpath -m "${LIVESYNC_CLUSTER_DIR:-$LC_CACHE/cluster}")"
LC_MARK=.livesync-cluster
LC_NODES="${LIVESYNC_CLUSTER_NODES:-2}"
# A cluster's dir records its ID: restart.sh and down.sh given only the dir act on that cluster's
# ports, bridges and cgroups, never on those of the default ID's.
LC_ID="${LIVESYNC_CLUSTER_ID:-0}"
if [[ -f $LC_DIR/$LC_MARK && -s $LC_DIR/id ]]; then
  if [[ -n ${LIVESYNC_CLUSTER_ID:-} && $LIVESYNC_CLUSTER_ID != "$(<"$LC_DIR/id")" ]]; then
    echo "the cluster in $LC_DIR has LIVESYNC_CLUSTER_ID $(<"$LC_DIR/id"), not $LIVESYNC_CLUSTER_ID" >&2
    return 2
  fi
  LC_ID="$(<"$LC_DIR/id")"
fi
if ! [[ $LC_NODES =~ ^[1-9]$ && $LC_ID =~ ^[0-9]$ ]]; then
  echo "LIVESYNC_CLUSTER_NODES must be 1-9 and LIVESYNC_CLUSTER_ID 0-9 (have $LC_NODES, $LC_ID)" >&2
  return 2
fi
lc_port() { echo $(($1 + LC_ID * 100)); }
LC_REGISTRY=127.0.0.1:$(lc_port 5000)
LC_PAUSE_IMAGE="$LC_REGISTRY/pause:3.10"
LC_SOCK="$LC_DIR/containerd.sock" # node 1's containerd
LC_ETCD_PORT=$(lc_port 2379)
LC_ETCD_PEER_PORT=$(lc_port 2380)
LC_APISERVER_PORT=$(lc_port 6443)
LC_CM_PORT=$(lc_port 10257)
LC_SCHED_PORT=$(lc_port 10259)
LC_APISERVER=https://127.0.0.1:$LC_APISERVER_PORT
LC_KUBELET_PORT=10250 # on each node's own IP
LC_KUBELET_HEALTHZ_PORT=10248
# The cgroup root (node N's kubelet has LC_CGROUP/nN, under every cgroup v1 controller) and the CNI
# network's name (its cached results are /var/lib/cni/results/NAME-*): no other ID's is a prefix of it.
LC_NAME=livesync
((LC_ID == 0)) || LC_NAME=livesync$LC_ID
LC_CGROUP=$LC_NAME
LC_CNI_NET=$LC_NAME
LC_POD_NET=10.$((244 + LC_ID)) # node N: LC_POD_NET.(N-1).0/24
# Names the dir of the cluster that holds this ID's bridges and cgroups (lc_owns_host).
LC_OWNER=/run/livesync-cluster/$LC_ID
# The kubelet sets the kernel.* and vm.* ones, the bridge plugin ip_forward, up the fs.inotify.* ones
# (LC_INOTIFY); down puts them back.
LC_SYSCTLS=(net.ipv4.ip_forward kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes fs.inotify.max_user_instances fs.inotify.max_user_watches)
# Every node's kubelet and containerd, the e2e sessions' watchers and sync-back's inotifywait in the
# containers take inotify instances of one user (root): Debian's 128 ran out with two nodes and a few
# tests at once (the kubelet then logs "no space left on device"). The floor kind documents.
LC_INOTIFY=(fs.inotify.max_user_instances=512 fs.inotify.max_user_watches=524288)
# The control plane and the registry; each node adds its kubelet and containerd (lc_dname).
LC_DAEMONS=(kube-scheduler kube-controller-manager kube-apiserver etcd registry)
LC_T0=${LC_T0:-$EPOCHREALTIME}

# Per node N (1-based): its dir, containerd socket, name, IP, bridge, cgroup root, and daemon names.
lc_ndir() { if (($1 == 1)); then echo "$LC_DIR"; else echo "$LC_DIR/n$1"; fi; }
lc_nsock() { echo "$(lc_ndir "$1")/containerd.sock"; }
lc_nname() { echo "$(lc_host)-$1"; }
lc_nip() { echo "$LC_POD_NET.$(($1 - 1)).1"; }
lc_nsubnet() { echo "$LC_POD_NET.$(($1 - 1)).0/24"; }
lc_nbridge() { if ((LC_ID == 0)); then echo "lsync$(($1 - 1))"; else echo "lsync${LC_ID}n$(($1 - 1))"; fi; }
lc_ncgroup() { echo "$LC_CGROUP/n$1"; }
lc_dname() { if (($2 == 1)); then echo "$1"; else echo "$1-$2"; fi; }

# lc_node_nums prints the numbers of the nodes of the cluster in LC_DIR: 1 and every nN dir there,
# or 1..LC_NODES when there is no cluster yet.
lc_node_nums() {
  local d
  if [[ ! -d $LC_DIR ]]; then
    seq 1 "$LC_NODES"
    return
  fi
  echo 1
  for d in "$LC_DIR"/n[0-9]; do [[ -d $d ]] && echo "${d##*/n}"; done
  return 0
}

# lc_daemon_node NAME prints the node of a node daemon (kubelet, containerd-2, ...), else fails.
lc_daemon_node() {
  case $1 in
  kubelet | containerd) echo 1 ;;
  kubelet-[2-9] | containerd-[2-9]) echo "${1##*-}" ;;
  *) return 1 ;;
  esac
}

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

# lc_host prints the prefix of the node names: the host name, lowercased, or "node".
lc_host() {
  local h
  h="$(hostname 2>/dev/null | tr '[:upper:]' '[:lower:]')"
  [[ $h =~ ^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$ ]] || h=node
  echo "$h"
}

lc_step() {
  local d=$((${EPOCHREALTIME/./} - ${LC_T0/./}))
  printf '[%3d.%ds] %s\n' $((d / 1000000)) $((d / 100000 % 10)) "$*" >&2
}

lc_warn() { echo "warning: $*" >&2; }

# lc_alive PID succeeds when PID runs (a zombie does not count) and is one of ours: every process
# the cluster starts names a file under LC_DIR on its command line, which guards against reused pids
# and against another cluster's dir that merely starts with LC_DIR's name.
lc_alive() {
  local pid=$1 k v cmd
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  { while read -r k v _; do
    [[ $k == State: ]] && break
  done </proc/"$pid"/status; } 2>/dev/null || return 1
  [[ -n $v && $v != Z ]] || return 1
  cmd="$(tr '\0' ' ' 2>/dev/null </proc/"$pid"/cmdline)" || return 1
  [[ $cmd == *"$LC_DIR/"* ]]
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

# lc_owns_host succeeds when this cluster may remove what its ID names outside LC_DIR: the
# bridges, the cgroups and the processes in them, the CNI results. Up records LC_DIR in LC_OWNER;
# a cluster of an up.sh before that record owns them while its dir has the mark. So a down.sh of a
# dir that is gone, or of another cluster beside this one, leaves a running cluster's alone.
lc_owns_host() {
  local o
  o="$(cat "$LC_OWNER" 2>/dev/null)" || o=
  [[ $o == "$LC_DIR" ]] && return 0
  [[ -f $LC_DIR/$LC_MARK ]] && { [[ -z $o ]] || [[ ! -f $o/$LC_MARK ]]; }
}

# lc_leftover_pids prints processes the cluster left behind without a pid file: daemons and
# containerd shims that name a file under LC_DIR, and (lc_owns_host) container processes in the
# kubelets' cgroups.
lc_leftover_pids() {
  local f p exe
  grep -lsaF "$LC_DIR/" /proc/[0-9]*/cmdline | while IFS= read -r f; do
    p=${f#/proc/}
    p=${p%/cmdline}
    exe="$(readlink "/proc/$p/exe" 2>/dev/null)" || continue
    case "${exe##*/}" in
    kube-apiserver | kube-controller-manager | kube-scheduler | kubelet | etcd | lcimage | containerd | containerd-shim-runc-v2)
      if lc_alive "$p"; then echo "$p"; fi
      ;;
    esac
  done
  if lc_owns_host; then
    grep -ls ":/$LC_CGROUP/" /proc/[0-9]*/cgroup | sed 's|^/proc/\([0-9]*\)/cgroup$|\1|'
  fi
  return 0
}

# lc_crictl N ARGS... runs crictl against node N's containerd.
lc_crictl() {
  local sock
  sock="$(lc_nsock "$1")"
  shift
  "$LC_DIR/bin/crictl" --runtime-endpoint "unix://$sock" --image-endpoint "unix://$sock" --timeout 20s "$@"
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

# lc_node_ready N succeeds when node N is Ready and has no taints.
lc_node_ready() {
  [[ "$("$LC_DIR/bin/kubectl" --kubeconfig "$LC_DIR/kubeconfig" get node "$(lc_nname "$1")" \
    -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}/{.spec.taints}')" == True/ ]]
}

# lc_healthy NAME succeeds when the daemon NAME serves: the checks up.sh waits on.
lc_healthy() {
  local pki=$LC_DIR/pki
  case $1 in
  etcd) curl -fsS "http://127.0.0.1:$LC_ETCD_PORT/health" ;;
  containerd | containerd-[2-9]) lc_crictl "$(lc_daemon_node "$1")" version ;;
  registry) curl -fsS "http://$LC_REGISTRY/v2/" ;;
  kube-apiserver) curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$LC_APISERVER/readyz" ;;
  kube-controller-manager) curl -fsSk "https://127.0.0.1:$LC_CM_PORT/healthz" ;;
  kube-scheduler) curl -fsSk "https://127.0.0.1:$LC_SCHED_PORT/healthz" ;;
  kubelet | kubelet-[2-9])
    local n
    n="$(lc_daemon_node "$1")"
    curl -fsS "http://$(lc_nip "$n"):$LC_KUBELET_HEALTHZ_PORT/healthz" && lc_node_ready "$n"
    ;;
  *) return 2 ;;
  esac
}

# lc_start_containerd N starts node N's containerd 2 (containerd/build.sh); a cluster up.sh made
# before it had one runs the host's.
lc_start_containerd() {
  local c=containerd
  [[ -x $LC_DIR/containerd-bin/containerd ]] && c=$LC_DIR/containerd-bin/containerd
  lc_start "$(lc_dname containerd "$1")" "$c" --config "$(lc_ndir "$1")/containerd/config.toml"
}

# lc_mounts prints the mount points under LC_DIR, deepest first.
lc_mounts() {
  findmnt -rn -o TARGET | awk -v d="$LC_DIR" 'index($0, d "/") == 1 || $0 == d { print length($0), $0 }' |
    sort -rn | cut -d' ' -f2- | uniq
}

# lc_bridges prints the bridges of this cluster ID that exist, of any node count.
lc_bridges() {
  local n b
  for n in 1 2 3 4 5 6 7 8 9; do
    b="$(lc_nbridge "$n")"
    if ip link show dev "$b" >/dev/null 2>&1; then echo "$b"; fi
  done
}

# lc_leftovers succeeds when anything of a cluster is there: its dir, processes, bridges or cgroups.
lc_leftovers() {
  [[ -e $LC_DIR ]] || [[ -n "$(lc_leftover_pids)" ]] ||
    { lc_owns_host && { [[ -n "$(lc_bridges)" ]] || compgen -G "/sys/fs/cgroup/*/$LC_CGROUP" >/dev/null; }; }
}

# lc_down removes everything lc_up made: processes, pod sandboxes (with CNI DEL), mounts, the bridges,
# cgroups, changed sysctls, files outside LC_DIR, and LC_DIR itself. Idempotent.
lc_down() {
  if [[ -e $LC_DIR && ! -e $LC_DIR/$LC_MARK ]]; then
    echo "refusing to clean $LC_DIR: it has no $LC_MARK, so it is not a local cluster's dir" >&2
    return 1
  fi
  local nodes=() n kubelets=() containerds=()
  mapfile -t nodes < <(lc_node_nums)
  for n in "${nodes[@]}"; do
    kubelets+=("$(lc_dname kubelet "$n")")
    containerds+=("$(lc_dname containerd "$n")")
  done
  # 1. Everything but the containerds, so that nothing recreates pods while they are removed:
  #    clients first, then the apiserver (its shutdown hangs while etcd is gone), then its storage.
  # shellcheck disable=SC2046
  lc_stop 10 $(lc_pids "${kubelets[@]}" kube-scheduler kube-controller-manager)
  # shellcheck disable=SC2046
  lc_stop 10 $(lc_pids kube-apiserver)
  # shellcheck disable=SC2046
  lc_stop 10 $(lc_pids "${LC_DAEMONS[@]}")
  lc_step "down: kubelets, control plane, etcd and registry stopped"

  # 2. Pod sandboxes through each node's containerd, which runs CNI DEL and stops containers and
  #    shims; after a kill -9 of a containerd it comes back for this. Shims keep their sockets
  #    outside LC_DIR (/run/containerd/s/<hash>); each task's bundle names its socket, and a killed
  #    shim leaves it.
  local sockets=() sock nd
  for n in "${nodes[@]}"; do
    nd="$(lc_ndir "$n")"
    for sock in "$nd"/containerd/state/io.containerd.runtime.v2.task/*/*/address; do
      [[ -f $sock ]] && sockets+=("$(<"$sock")")
    done
    if [[ -d $nd/containerd/root && -x $LC_DIR/bin/crictl ]]; then
      if [[ -z "$(lc_pids "$(lc_dname containerd "$n")")" ]]; then
        rm -f "$(lc_nsock "$n")"
        lc_start_containerd "$n"
        local i
        for ((i = 0; i < 200; i++)); do
          lc_crictl "$n" version >/dev/null 2>&1 && break
          sleep 0.05
        done
      fi
      lc_crictl "$n" rmp --force --all >>"$LC_DIR/logs/down.log" 2>&1 ||
        lc_warn "removing node $n's pod sandboxes failed: see $LC_DIR/logs/down.log"
    fi
  done
  # shellcheck disable=SC2046
  lc_stop 10 $(lc_pids "${containerds[@]}")
  lc_step "down: pod sandboxes removed, containerds stopped"

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

  # 5. The bridges and any veth still on them (their routes go with them), and 6. the cgroups,
  #    when no other cluster holds this ID's.
  local owner=1
  if ! lc_owns_host; then
    owner=
    lc_warn "leaving the bridges and cgroups of cluster ID $LC_ID: $LC_OWNER names $(cat "$LC_OWNER" 2>/dev/null || echo 'no cluster'), not $LC_DIR"
  fi
  local b v
  for b in ${owner:+$(lc_bridges)}; do
    for v in $(ip -o link show master "$b" | awk -F': ' '{print $2}' | cut -d@ -f1); do
      ip link del "$v" 2>/dev/null || true
    done
    ip link del "$b" 2>/dev/null || lc_warn "could not delete $b"
  done

  # 6. The kubelet's cgroups, deepest first; a cgroup empties a moment after its last task dies.
  local c
  for c in /sys/fs/cgroup/*/"$LC_CGROUP" /sys/fs/cgroup/"$LC_CGROUP"; do
    [[ -n $owner && -d $c ]] || continue
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
  [[ -z $owner ]] || rm -f /var/lib/cni/results/"$LC_CNI_NET"-*
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
  if [[ "$(cat "$LC_OWNER" 2>/dev/null)" == "$LC_DIR" ]]; then
    rm -f "$LC_OWNER"
    rmdir "${LC_OWNER%/*}" 2>/dev/null || true
  fi
}

# lc_iptables prints the rules of iptables and ip6tables without counters and comments.
lc_iptables() {
  { iptables-save; ip6tables-save; } 2>/dev/null | sed -e '/^#/d' -e 's/\[[0-9]*:[0-9]*\]//'
}
