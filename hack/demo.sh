#!/usr/bin/env bash
# demo.sh: kubectl livesync end to end on the local cluster, narrated. Leaves the cluster up.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
lc=hack/localcluster
# shellcheck source=hack/localcluster/lib.sh
source $lc/lib.sh
bin="$($lc/build.sh)"
say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
# quote prints its arguments as one command line that a shell reads back as the same words:
# plain words bare, the others in single quotes.
quote() {
  local w out=()
  for w in "$@"; do
    if [[ $w =~ ^[[:alnum:]_@%+=:,./-]+$ ]]; then
      out+=("$w")
    else
      out+=("'${w//\'/\'\\\'\'}'")
    fi
  done
  printf '%s' "${out[*]}"
}
# show prints a command as it can be copied, then runs it.
show() { printf '$ %s\n' "$(quote "$@")"; "$@"; }

say "Starting the local cluster (kube-apiserver, etcd, controllers, a registry; two nodes, each a kubelet on its own containerd)"
KUBECONFIG="$($lc/up.sh | tail -n 1)"
export KUBECONFIG PATH="$PWD/bin:$bin:$PATH"
ns=livesync-demo
img=$LC_REGISTRY/demo-app:dev

show kubectl get nodes
say "Pushing $img and deploying it with imagePullPolicy IfNotPresent, 1 replica, replicas spread over the nodes"
kubectl delete namespace $ns --ignore-not-found --wait=true >/dev/null
kubectl create namespace $ns >/dev/null
until kubectl -n $ns get serviceaccount default >/dev/null 2>&1; do sleep 0.2; done
# No node has the demo's image yet, also when the demo ran before on this cluster.
for n in $(lc_node_nums); do
  for i in $(lc_crictl "$n" images -q "$img" 2>/dev/null); do lc_crictl "$n" rmi "$i" >/dev/null 2>&1 || true; done
done
lcimage build --registry $LC_REGISTRY --kind app --marker "demo-1-$RANDOM" demo-app:dev >/dev/null
# In one create, so that no first ReplicaSet puts the image on a node before the one replica runs.
# At most one replica of a ReplicaSet more on a node than on another: the second replica goes to
# the other node, and so do a rollout's new ones.
kubectl -n $ns create -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: my-app, labels: {app: my-app}}
spec:
  replicas: 1
  selector: {matchLabels: {app: my-app}}
  template:
    metadata: {labels: {app: my-app}}
    spec:
      containers: [{name: demo-app, image: $img, imagePullPolicy: IfNotPresent}]
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule,
         labelSelector: {matchLabels: {app: my-app}}, matchLabelKeys: [pod-template-hash]}
EOF
show kubectl -n $ns rollout status deployment/my-app --timeout=2m

say "What runs, and what the registry serves"
show kubectl livesync -n $ns inspect deploy/my-app

say "Someone pushes a new :dev. With IfNotPresent and no pull secrets, a node that has the image never pulls it again:"
lcimage build --registry $LC_REGISTRY --kind app --marker "demo-2-$RANDOM" demo-app:dev
show kubectl livesync -n $ns inspect deploy/my-app

say "A second replica lands on the other node, which lacks the image: it pulls the moved tag"
show kubectl -n $ns scale deployment/my-app --replicas=2
show kubectl -n $ns rollout status deployment/my-app --timeout=2m
show kubectl livesync -n $ns inspect deploy/my-app

say "refresh pins the moved tag to its digest and waits for a deterministic rollout"
show kubectl livesync -n $ns refresh deploy/my-app
show kubectl livesync -n $ns inspect deploy/my-app

say "restore puts back the image and pull policy livesync changed"
show kubectl livesync -n $ns restore deploy/my-app
show kubectl -n $ns get deployment my-app -o jsonpath='{.spec.template.spec.containers[0].image}{"  "}{.spec.template.spec.containers[0].imagePullPolicy}{"\n"}'

say "Live sync: local edits reach every replica, deletes included"
src="$(mktemp -d)"
printf '<h1>hello</h1>\n' >"$src/index.html"
mkdir -p "$src/static" && printf 'body{}\n' >"$src/static/site.css"
printf '$ kubectl livesync -n %s deploy/my-app %s:/app &\n' $ns "$src"
kubectl livesync -n $ns deploy/my-app "$src:/app" &
sync_pid=$!
trap 'kill -INT $sync_pid 2>/dev/null || true' EXIT
pods() { kubectl -n $ns get pods -l app=my-app --field-selector=status.phase=Running -o name; }
converged() {
  local p
  for p in $(pods); do
    [[ "$(kubectl -n $ns exec "$p" -- sh -c "$1" 2>/dev/null)" == "$2" ]] || return 1
  done
}
until converged 'cat /app/index.html' '<h1>hello</h1>'; do sleep 0.2; done
sleep 0.5
printf '\n$ echo "<h1>edited</h1>" > %s/index.html; rm -r %s/static\n' "$src" "$src"
printf '<h1>edited</h1>\n' >"$src/index.html"
rm -r "$src/static"
until converged 'cat /app/index.html; ls /app' $'<h1>edited</h1>\nindex.html'; do sleep 0.1; done
for p in $(pods); do
  printf '$ kubectl exec %s -- sh -c "cat /app/index.html; ls /app"\n' "${p#pod/}"
  kubectl -n $ns exec "$p" -- sh -c 'cat /app/index.html; ls /app'
done
kill -INT $sync_pid
wait $sync_pid || true
trap - EXIT

say "A distroless image (one static binary, USER 65532, no sh, no tar): synced through an ephemeral helper container"
lcimage build --registry $LC_REGISTRY --kind distroless --marker "demo-3-$RANDOM" demo-distroless:dev >/dev/null
lcimage build --registry $LC_REGISTRY --kind app demo-helper:dev >/dev/null
kubectl -n $ns create deployment tiny --image=$LC_REGISTRY/demo-distroless:dev >/dev/null
show kubectl -n $ns rollout status deployment/tiny --timeout=2m
show kubectl livesync -n $ns deploy/tiny "$src:/app" --helper-image $LC_REGISTRY/demo-helper:dev --once
tiny="$(kubectl -n $ns get pods -l app=tiny -o name | head -n 1)"
show kubectl -n $ns exec "$tiny" -c livesync-helper-1 -- sh -c 'cat /proc/1/root/app/index.html; stat -c "%u:%g %n" /proc/1/root/app/index.html'
rm -rf "$src"

say "Done. The cluster is still up:"
cat <<EOM
  export KUBECONFIG=$KUBECONFIG PATH=$PWD/bin:$bin:\$PATH
  kubectl livesync -n $ns inspect deploy/my-app
  stop it with: make cluster-down   (or hack/localcluster/down.sh)
EOM
