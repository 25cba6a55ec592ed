#!/usr/bin/env bash
# up.sh starts a real single-node Kubernetes on this machine: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, a kubelet on a private containerd with runc and a CNI
# bridge, and an image registry on 127.0.0.1:5000. Progress goes to stderr; the last line on stdout
# is the admin kubeconfig. A no-op when the cluster is up and healthy; cleans up a crashed one first.
#
#   LIVESYNC_CLUSTER_DIR  all state (default ~/.cache/kubectl-livesync/cluster)
#   LIVESYNC_CACHE        binaries cache (default ~/.cache/kubectl-livesync)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

lc_lock
node="$(lc_node)"
pki="$LC_DIR/pki"
kubeconfig="$LC_DIR/kubeconfig"

hint() {
  cat >&2 <<EOF
  export KUBECONFIG=$kubeconfig
  kubectl:  $LC_DIR/bin/kubectl   (or: eval "\$(hack/localcluster/env.sh)")
  registry: $LC_REGISTRY   images: $LC_DIR/bin/lcimage build NAME:TAG --kind app|app-gnu|app-notar|app-nodd|app-nonroot|distroless
  stop:     hack/localcluster/down.sh
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
  for n in "${LC_DAEMONS[@]}" containerd; do
    [[ -n "$(lc_pids "$n")" ]] || return 1
  done
  lc_node_ready 2>/dev/null
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
if ((${#LC_SOCK} > 100)); then
  echo "up: LIVESYNC_CLUSTER_DIR is too long for a unix socket path: $LC_DIR" >&2
  exit 1
fi

mkdir -p "$LC_DIR"/{pids,cmds,logs,pki,etcd,registry,kubelet,pod-logs,cni/net.d,cni/ipam,containerd,runc} \
  "$LC_DIR/certs.d/$LC_REGISTRY"
touch "$LC_DIR/$LC_MARK"
ln -sfn "$bin" "$LC_DIR/bin"
ln -sfn "$cbin" "$LC_DIR/containerd-bin"
# Host state the cluster changes: sysctls are put back by down, iptables must not change at all.
for s in "${LC_SYSCTLS[@]}"; do echo "$s=$(sysctl -n "$s")"; done >"$LC_DIR/sysctl.before"
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
  cert node "/O=system:nodes/CN=system:node:$node" clientAuth
  cert kubelet "/CN=$node" serverAuth "DNS:$node,DNS:localhost,IP:127.0.0.1"
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
for n in controller-manager scheduler node; do write_kubeconfig "$pki/$n.kubeconfig" "$n"; done
lc_step "certificates"

# --- configs -------------------------------------------------------------------------------------
cat >"$LC_DIR/certs.d/$LC_REGISTRY/hosts.toml" <<EOF
server = "http://$LC_REGISTRY"
[host."http://$LC_REGISTRY"]
  capabilities = ["pull", "resolve"]
EOF
cat >"$LC_DIR/containerd/config.toml" <<EOF
version = 2
root = "$LC_DIR/containerd/root"
state = "$LC_DIR/containerd/state"
temp = "$LC_DIR/containerd/tmp"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$LC_SOCK"
[ttrpc]
  address = "$LC_SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$LC_DIR/containerd/opt"
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
        Root = "$LC_DIR/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$LC_DIR/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$LC_DIR/certs.d"
EOF
# Pods get addresses on the bridge, but no masquerading and no default route: nothing leaves the host.
cat >"$LC_DIR/cni/net.d/10-$LC_CNI_NET.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$LC_CNI_NET",
  "plugins": [{
    "type": "bridge", "bridge": "$LC_BRIDGE", "isGateway": true, "ipMasq": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "dataDir": "$LC_DIR/cni/ipam"}
  }]
}
EOF
cat >"$LC_DIR/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$LC_CGROUP
makeIPTablesUtilChains: false
readOnlyPort: 0
address: 127.0.0.1
healthzBindAddress: 127.0.0.1
containerRuntimeEndpoint: unix://$LC_SOCK
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $pki/kubelet.crt
tlsPrivateKeyFile: $pki/kubelet.key
failSwapOn: false
evictionHard: {memory.available: 50Mi, nodefs.available: 1%, nodefs.inodesFree: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
podLogsDir: $LC_DIR/pod-logs
volumePluginDir: $LC_DIR/kubelet/volume-plugins
# Image volumes report their digest (status.containerStatuses[].volumeMounts[].volumeStatus.image).
featureGates: {ImageVolumeWithDigest: true}
EOF
# The kubelet's cgroupRoot must exist in every hierarchy; cpuset children start without cpus and mems.
if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
  mkdir -p "/sys/fs/cgroup/$LC_CGROUP"
else
  for c in /sys/fs/cgroup/*/; do
    [[ -f $c/cgroup.procs && ! -e $c/cgroup.controllers ]] || continue
    mkdir -p "$c$LC_CGROUP"
    if [[ -f $c/cpuset.cpus ]]; then
      cat "$c/cpuset.cpus" >"$c$LC_CGROUP/cpuset.cpus"
      cat "$c/cpuset.mems" >"$c$LC_CGROUP/cpuset.mems"
    fi
  done
fi
lc_step "configs"

# --- daemons -------------------------------------------------------------------------------------
lc_start etcd "$bin/etcd" --name livesync --data-dir "$LC_DIR/etcd" --unsafe-no-fsync \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster livesync=http://127.0.0.1:2380 --log-level warn
lc_start registry "$bin/lcimage" serve --addr "$LC_REGISTRY" --dir "$LC_DIR/registry"
lc_start_containerd
lc_start kube-apiserver "$bin/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port 6443 --cert-dir "$pki/generated" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" --client-ca-file "$pki/ca.crt" \
  --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
  --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$pki/ca.crt" --kubelet-preferred-address-types Hostname \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-cluster-ip-range 10.96.0.0/16 --authorization-mode Node,RBAC --allow-privileged \
  --endpoint-reconciler-type none --enable-priority-and-fairness=false --profiling=false \
  --feature-gates ImageVolumeWithDigest=true
wait_for etcd 30 lc_healthy etcd
lc_step "etcd healthy"
wait_for containerd 30 lc_healthy containerd
lc_step "containerd ready"
lc_start kubelet "$bin/kubelet" --config "$LC_DIR/kubelet/config.yaml" --kubeconfig "$pki/node.kubeconfig" \
  --root-dir "$LC_DIR/kubelet" --hostname-override "$node"
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
  --bind-address 127.0.0.1 --cert-dir "$pki/generated" --leader-elect=false --profiling=false \
  --use-service-account-credentials --root-ca-file "$pki/ca.crt" --cluster-name livesync \
  --controllers deployment-controller,replicaset-controller,statefulset-controller,daemonset-controller,job-controller,serviceaccount-controller,root-ca-certificate-publisher-controller,garbage-collector-controller,namespace-controller,pod-garbage-collector-controller,node-lifecycle-controller,taint-eviction-controller,endpointslice-controller,clusterrole-aggregation-controller
lc_start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$pki/scheduler.kubeconfig" \
  --authentication-kubeconfig "$pki/scheduler.kubeconfig" --authorization-kubeconfig "$pki/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false --profiling=false
wait_for kubelet 90 lc_healthy kubelet
lc_step "node $node ready"
wait_for kube-controller-manager 60 kubectl -n default get serviceaccount default
lc_step "default service account exists: cluster up"
hint
