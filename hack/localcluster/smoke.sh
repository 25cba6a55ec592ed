#!/usr/bin/env bash
# smoke.sh proves a running local cluster does what the e2e suite needs: a Deployment from the local
# registry, a tar stream through kubectl exec, a new :dev pinned by digest and rolled out, an image
# without tar, and one running as uid 1000. Run after up.sh; leaves namespace lc-smoke deleted.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export KUBECONFIG="$LC_DIR/kubeconfig"
bin="$LC_DIR/bin"
ns=lc-smoke
k() { "$bin/kubectl" -n "$ns" "$@"; }
die() {
  echo "smoke: $*" >&2
  exit 1
}

"$bin/kubectl" delete namespace "$ns" --ignore-not-found --wait >/dev/null
"$bin/kubectl" create namespace "$ns" >/dev/null
until k get serviceaccount default >/dev/null 2>&1; do sleep 0.1; done

first="$("$bin/lcimage" build --registry "$LC_REGISTRY" app:dev --kind app)"
"$bin/lcimage" build --registry "$LC_REGISTRY" app-notar:dev --kind app-notar >/dev/null
"$bin/lcimage" build --registry "$LC_REGISTRY" app-nonroot:dev --kind app-nonroot >/dev/null
lc_step "images pushed (app:dev $first)"

k create deployment web --image "$LC_REGISTRY/app:dev" --replicas 2 >/dev/null
k create deployment notar --image "$LC_REGISTRY/app-notar:dev" >/dev/null
k create deployment nonroot --image "$LC_REGISTRY/app-nonroot:dev" >/dev/null
for d in web notar nonroot; do k rollout status "deployment/$d" --timeout 120s >/dev/null; done
lc_step "deployments web (2 replicas), notar, nonroot rolled out"

pod="$(k get pods -l app=web -o 'jsonpath={.items[0].metadata.name}')"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/sub" && echo hello >"$tmp/src/sub/a.txt"
tar -C "$tmp/src" -cf - . | k exec -i "$pod" -- tar -xf - -C /app
[[ "$(k exec "$pod" -- cat /app/sub/a.txt)" == hello ]] || die "tar through exec did not land in $pod"
k exec "$pod" -- sha256sum /app/sub/a.txt >/dev/null
lc_step "tar -x through kubectl exec into $pod"

second="$("$bin/lcimage" build --registry "$LC_REGISTRY" app:dev --kind app --marker "$RANDOM$RANDOM")"
[[ $second != "$first" ]] || die "a rebuild with a marker kept digest $first"
[[ "$("$bin/lcimage" digest "$LC_REGISTRY/app:dev")" == "$second" ]] || die "registry does not serve $second for app:dev"
k set image deployment/web "app=$LC_REGISTRY/app:dev@$second" >/dev/null
k rollout status deployment/web --timeout 120s >/dev/null
# Terminating pods of the old ReplicaSet may still be listed: wait until only new ones are.
for ((i = 0; i < 100; i++)); do
  ids="$(k get pods -l app=web -o 'jsonpath={range .items[*]}{.status.containerStatuses[0].imageID}{"\n"}{end}')"
  [[ "$(grep -c . <<<"$ids")" == 2 && "$(grep -c "@$second\$" <<<"$ids")" == 2 ]] && break
  sleep 0.2
done
((i < 100)) || die "web pods do not all run $second: $ids"
lc_step "new :dev pinned as $second and rolled out to both replicas"

npod="$(k get pods -l app=notar -o 'jsonpath={.items[0].metadata.name}')"
k exec "$npod" -- sh -c 'command -v tar' >/dev/null 2>&1 && die "tar present in app-notar"
k exec "$npod" -- sh -c 'true' || die "sh missing in app-notar"
rpod="$(k get pods -l app=nonroot -o 'jsonpath={.items[0].metadata.name}')"
[[ "$(k exec "$rpod" -- id -u)" == 1000 ]] || die "app-nonroot does not run as uid 1000"
k exec "$rpod" -- sh -c 'touch /home/app/ok && ! touch /app-root-owned/x 2>/dev/null' || die "app-nonroot permissions wrong"
lc_step "app-notar has sh without tar; app-nonroot runs as uid 1000"

"$bin/kubectl" delete namespace "$ns" --wait=false >/dev/null
lc_step "smoke test passed"
