#!/usr/bin/env bash
# up.sh starts a real Kubernetes of LIVESYNC_CLUSTER_NODES nodes on this machine: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, an image registry on 127.0.0.1:5000, and
# per node a kubelet on a containerd of its own with runc and a CNI bridge of its own. Progress goes
# to stderr; the last line on stdout is the admin kubeconfig. A no-op when the cluster is up, healthy
# and of that many nodes; cleans up a crashed (or differently sized) one first.
#
#   LIVESYNC_CLUSTER_DIR    all state (default ~/.cache/kubectl-livesync/cluster)
#   LIVESYNC_CLUSTER_NODES  number of nodes, 1-9 (default 2)
#   LIVESYNC_CLUSTER_ID     0-9 (default 0): another ID's ports, pod network, bridges and cgroups differ,
#                           so a second cluster (with its own LIVESYNC_CLUSTER_DIR) runs beside it
#   LIVESYNC_CACHE          binaries cache (default ~/.cache/kubectl-livesync)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lc_lock
pki="$LC_DIR/pki"
kubeconfig="$LC_DIR/kubeconfig"

hint() {
  cat >&2 <<EOF
  export KUBECONFIG=$kubeconfig
  kubectl:  $LC_DIR/bin/kubectl   (or: eval "\$(hack/localcluster/env.sh)")
  registry: $LC_REGISTRY   images: $LC_DIR/bin/lcimage build NAME:TAG --kind app|app-gnu|app-notar|app-nodd|app-nonroot|distroless
  nodes:    $(awk '{printf "%s on %s, ", $2, $3}' "$LC_DIR/nodes" 2>/dev/null)pids/ and logs/ name node N's kubelet-N, containerd-N (node 1's: kubelet, containerd)
  stop:     LIVESYNC_CLUSTER_DIR=$LC_DIR hack/localcluster/down.sh
EOF
  echo "$kubeconfig"
}

# fail NAME MSG prints the tail of NAME's log and exits; the cluster stays for inspection.
fail() {
  echo "up: $2" >&2
  if [[ -f $LC_DIR/logs/$1.log ]]; then
    echo "--- last lines of $LC_DIR/logs/$1.log" >&2
    tail -n 25 "$LC_DIR/logs/$1.log" >&2
  fi
  echo "up: logs in $LC_DIR/logs; clean up with hack/localcluster/down.sh" >&2
  exit 1
}

# wait_for NAME SECONDS CMD... polls CMD until it succeeds, failing early when a started daemon dies.
wait_for() {
  local name=$1 secs=$2 end f
  shift 2
  end=$((${EPOCHREALTIME/./} + secs * 1000000))
  until "$@" >/dev/null 2>&1; do
    for f in "$LC_DIR"/pids/*; do
      lc_alive "$(<"$f")" || fail "${f##*/}" "${f##*/} exited"
    done
    ((${EPOCHREALTIME/./} < end)) || fail "$name" "$name not ready after ${secs}s"
    sleep 0.1
  done
}

kubectl() { "$LC_DIR/bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

healthy() {
  local n
  [[ -f $LC_DIR/$LC_MARK && -f $kubeconfig ]] || return 1
  [[ "$(lc_node_nums | tr '\n' ' ')" == "$(seq 1 "$LC_NODES" | tr '\n' ' ')" ]] || return 1
  for n in "${LC_DAEMONS[@]}"; do
    [[ -n "$(lc_pids "$n")" ]] || return 1
  done
  for ((n = 1; n <= LC_NODES; n++)); do
    [[ -n "$(lc_pids "$(lc_dname containerd $n)")" && -n "$(lc_pids "$(lc_dname kubelet $n)")" ]] || return 1
    lc_node_ready $n 2>/dev/null || return 1
  done
}

"$LC_HERE/../deps.sh"
bin="$("$LC_HERE/build.sh")"
# containerd and runc are cached apart from Kubernetes, keyed by their own inputs.
cbin="$("$LC_HERE/containerd/build.sh")"
lc_step "binaries in $bin and $cbin"

if healthy; then
  lc_step "cluster already up in $LC_DIR"
  hint
  exit 0
fi
if lc_leftovers; then
  lc_step "cleaning up a previous cluster"
  lc_down
fi
# Another cluster holds this ID's bridges (its dir is not LC_DIR): two would share pod networks.
if [[ -n "$(lc_bridges)" ]] || [[ -s $LC_OWNER && "$(<"$LC_OWNER")" != "$LC_DIR" && -f "$(<"$LC_OWNER")/$LC_MARK" ]]; then
  echo "up: cluster ID $LC_ID is in use ($(lc_bridges | tr '\n' ' ')${LC_OWNER}: $(cat "$LC_OWNER" 2>/dev/null)): start this one with another LIVESYNC_CLUSTER_ID (0-9)" >&2
  exit 1
fi
if ((${#LC_SOCK} + 3 > 100)); then
  echo "up: LIVESYNC_CLUSTER_DIR is too long for a unix socket path: $LC_DIR" >&2
  exit 1
fi

mkdir -p "$LC_DIR"/{pids,cmds,logs,pki,etcd,registry} "$LC_DIR/certs.d/$LC_REGISTRY"
for ((n = 1; n <= LC_NODES; n++)); do
  mkdir -p "$(lc_ndir $n)"/{kubelet,pod-logs,cni/net.d,cni/ipam,containerd,runc}
done
touch "$LC_DIR/$LC_MARK"
echo "$LC_ID" >"$LC_DIR/id"
mkdir -p "${LC_OWNER%/*}"
echo "$LC_DIR" >"$LC_OWNER"
ln -sfn "$bin" "$LC_DIR/bin"
ln -sfn "$cbin" "$LC_DIR/containerd-bin"
# Host state the cluster changes: sysctls are put back by down, iptables must not change at all.
for s in "${LC_SYSCTLS[@]}"; do echo "$s=$(sysctl -n "$s")"; done >"$LC_DIR/sysctl.before"
for kv in "${LC_INOTIFY[@]}"; do
  (($(sysctl -n "${kv%%=*}") >= ${kv#*=})) || sysctl -qw "$kv" >/dev/null
done
lc_iptables >"$LC_DIR/iptables.before"
for d in /var/log/containers /var/lib/cni/results /var/lib/cni /run/containerd/s /run/containerd; do
  [[ -e $d ]] || echo "$d"
done >"$LC_DIR/created-outside"

# --- certificates: ECDSA P-256, one CA ---------------------------------------------------------
(
  cd "$pki"
  exec 2>>"$LC_DIR/logs/pki.log"
  openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -days 3650 \
    -keyout ca.key -out ca.crt -subj /CN=livesync-local-ca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
  # cert NAME SUBJECT EKU [SANS]
  cert() {
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -keyout "$1.key" -subj "$2" |
      openssl x509 -req -CA ca.crt -CAkey ca.key -set_serial "0x$(openssl rand -hex 16)" -days 3650 \
        -out "$1.crt" -extfile <(
          echo "basicConstraints=critical,CA:FALSE"
          echo "keyUsage=critical,digitalSignature"
          echo "extendedKeyUsage=$3"
          [[ -z ${4:-} ]] || echo "subjectAltName=$4"
        )
  }
  cert apiserver /CN=kube-apiserver serverAuth \
    DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  cert admin "/O=system:masters/CN=livesync-admin" clientAuth
  cert controller-manager /CN=system:kube-controller-manager clientAuth
  cert scheduler /CN=system:kube-scheduler clientAuth
  for ((n = 1; n <= LC_NODES; n++)); do
    name="$(lc_nname $n)"
    cert node$n "/O=system:nodes/CN=system:node:$name" clientAuth
    cert kubelet$n "/CN=$name" serverAuth "DNS:$name,IP:$(lc_nip $n)"
  done
  openssl ecparam -name prime256v1 -genkey -noout -out sa.key
  openssl ec -in sa.key -pubout -out sa.pub
) || fail pki "creating certificates failed"

# write_kubeconfig FILE CERT writes a kubeconfig with the CA and CERT's key pair embedded.
write_kubeconfig() {
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: livesync
  cluster:
    server: $LC_APISERVER
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$pki/$2.crt")
    client-key-data: $(base64 -w0 "$pki/$2.key")
contexts:
- name: livesync
  context: {cluster: livesync, user: $2}
current-context: livesync
EOF
}
write_kubeconfig "$kubeconfig" admin
for n in controller-manager scheduler; do write_kubeconfig "$pki/$n.kubeconfig" "$n"; done
for ((n = 1; n <= LC_NODES; n++)); do write_kubeconfig "$pki/node$n.kubeconfig" node$n; done
lc_step "certificates"

# --- configs -------------------------------------------------------------------------------------
cat >"$LC_DIR/certs.d/$LC_REGISTRY/hosts.toml" <<EOF
server = "http://$LC_REGISTRY"
[host."http://$LC_REGISTRY"]
  capabilities = ["pull", "resolve"]
EOF
# node_configs N writes node N's containerd config, CNI network and kubelet config, and makes its
# bridge and cgroup root.
node_configs() {
  local n=$1 nd sock br c cg
  nd="$(lc_ndir "$n")"
  sock="$(lc_nsock "$n")"
  br="$(lc_nbridge "$n")"
  cg="$(lc_ncgroup "$n")"
  # NRI is off: its socket (/var/run/nri/nri.sock) is one per host, and each containerd would take it.
  cat >"$nd/containerd/config.toml" <<EOF
version = 2
root = "$nd/containerd/root"
state = "$nd/containerd/state"
temp = "$nd/containerd/tmp"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.nri.v1.nri"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$nd/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$LC_PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # root here lacks CAP_SYS_RESOURCE: runc could not set the kubelet's oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      runtime_path = "$LC_DIR/containerd-bin/containerd-shim-runc-v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$LC_DIR/containerd-bin/runc"
        Root = "$nd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$nd/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$LC_DIR/certs.d"
EOF
  # Pods get addresses on their node's bridge and one route, to the other nodes' pods through the
  # host (the bridges are all in its network namespace); no masquerading and no default route:
  # nothing leaves the host.
  cat >"$nd/cni/net.d/10-$LC_CNI_NET.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$LC_CNI_NET",
  "plugins": [{
    "type": "bridge", "bridge": "$br", "isGateway": true, "ipMasq": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "$(lc_nsubnet "$n")", "gateway": "$(lc_nip "$n")"}]],
      "routes": [{"dst": "$LC_POD_NET.0.0/16"}], "dataDir": "$nd/cni/ipam"}
  }]
}
EOF
  cat >"$nd/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$cg
makeIPTablesUtilChains: false
readOnlyPort: 0
address: $(lc_nip "$n")
port: $LC_KUBELET_PORT
healthzBindAddress: $(lc_nip "$n")
healthzPort: $LC_KUBELET_HEALTHZ_PORT
containerRuntimeEndpoint: unix://$sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $pki/kubelet$n.crt
tlsPrivateKeyFile: $pki/kubelet$n.key
failSwapOn: false
evictionHard: {memory.available: 50Mi, nodefs.available: 1%, nodefs.inodesFree: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
podLogsDir: $nd/pod-logs
volumePluginDir: $nd/kubelet/volume-plugins
# Image volumes report their digest (status.containerStatuses[].volumeMounts[].volumeStatus.image).
featureGates: {ImageVolumeWithDigest: true}
EOF
  # The node IP is the bridge's own address: the kubelet wants a non-loopback address of this host
  # to listen on, and the bridge plugin finds the bridge and its gateway address in place.
  ip link add "$br" type bridge
  ip addr add "$(lc_nip "$n")/24" dev "$br"
  ip link set "$br" up
  # The kubelet's cgroupRoot must exist in every hierarchy; cpuset children start without cpus and mems.
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    mkdir -p "/sys/fs/cgroup/$cg"
  else
    for c in /sys/fs/cgroup/*/; do
      [[ -f $c/cgroup.procs && ! -e $c/cgroup.controllers ]] || continue
      mkdir -p "$c$cg"
      if [[ -f $c/cpuset.cpus ]]; then
        cat "$c/cpuset.cpus" >"$c$LC_CGROUP/cpuset.cpus"
        cat "$c/cpuset.mems" >"$c$LC_CGROUP/cpuset.mems"
        cat "$c/cpuset.cpus" >"$c$cg/cpuset.cpus"
        cat "$c/cpuset.mems" >"$c$cg/cpuset.mems"
      fi
    done
  fi
}
for ((n = 1; n <= LC_NODES; n++)); do
  node_configs $n
  echo "$n $(lc_nname $n) $(lc_nip $n)"
done >"$LC_DIR/nodes"
lc_step "configs"

# --- daemons -------------------------------------------------------------------------------------
lc_start etcd "$bin/etcd" --name livesync --data-dir "$LC_DIR/etcd" --unsafe-no-fsync \
  --listen-client-urls "http://127.0.0.1:$LC_ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$LC_ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$LC_ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$LC_ETCD_PEER_PORT" \
  --initial-cluster "livesync=http://127.0.0.1:$LC_ETCD_PEER_PORT" --log-level warn
lc_start registry "$bin/lcimage" serve --addr "$LC_REGISTRY" --dir "$LC_DIR/registry"
for ((n = 1; n <= LC_NODES; n++)); do lc_start_containerd $n; done
# The apiserver reaches each kubelet (logs, exec, port-forward) on its node IP.
lc_start kube-apiserver "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$LC_ETCD_PORT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$LC_APISERVER_PORT" --cert-dir "$pki/generated" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" --client-ca-file "$pki/ca.crt" \
  --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
  --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$pki/ca.crt" --kubelet-preferred-address-types InternalIP \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-cluster-ip-range 10.96.0.0/16 --authorization-mode Node,RBAC --allow-privileged \
  --endpoint-reconciler-type none --enable-priority-and-fairness=false --profiling=false \
  --feature-gates ImageVolumeWithDigest=true
wait_for etcd 30 lc_healthy etcd
lc_step "etcd healthy"
for ((n = 1; n <= LC_NODES; n++)); do
  c="$(lc_dname containerd $n)"
  wait_for "$c" 30 lc_healthy "$c"
  lc_step "$c ready"
  lc_start "$(lc_dname kubelet $n)" "$bin/kubelet" --config "$(lc_ndir $n)/kubelet/config.yaml" \
    --kubeconfig "$pki/node$n.kubeconfig" --root-dir "$(lc_ndir $n)/kubelet" \
    --hostname-override "$(lc_nname $n)" --node-ip "$(lc_nip $n)"
done
wait_for registry 30 lc_healthy registry
"$bin/lcimage" build --registry "$LC_REGISTRY" "${LC_PAUSE_IMAGE#"$LC_REGISTRY"/}" --kind pause >/dev/null 2>>"$LC_DIR/logs/registry.log" ||
  fail registry "pushing the pause image failed"
lc_step "registry ready, $LC_PAUSE_IMAGE pushed"
wait_for kube-apiserver 60 lc_healthy kube-apiserver
lc_step "kube-apiserver ready"
# Started only now: before RBAC is bootstrapped the controller-manager exits on a forbidden configmap.
lc_start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$pki/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$pki/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$pki/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$LC_CM_PORT" --cert-dir "$pki/generated" --leader-elect=false --profiling=false \
  --use-service-account-credentials --root-ca-file "$pki/ca.crt" --cluster-name livesync \
  --controllers deployment-controller,replicaset-controller,statefulset-controller,daemonset-controller,job-controller,serviceaccount-controller,root-ca-certificate-publisher-controller,garbage-collector-controller,namespace-controller,pod-garbage-collector-controller,node-lifecycle-controller,taint-eviction-controller,endpointslice-controller,clusterrole-aggregation-controller
lc_start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$pki/scheduler.kubeconfig" \
  --authentication-kubeconfig "$pki/scheduler.kubeconfig" --authorization-kubeconfig "$pki/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$LC_SCHED_PORT" --leader-elect=false --profiling=false
for ((n = 1; n <= LC_NODES; n++)); do
  wait_for "$(lc_dname kubelet $n)" 90 lc_healthy "$(lc_dname kubelet $n)"
  lc_step "node $(lc_nname $n) ready"
done
wait_for kube-controller-manager 60 kubectl -n default get serviceaccount default
lc_step "default service account exists: cluster up"
hint
