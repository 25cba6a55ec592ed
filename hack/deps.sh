#!/usr/bin/env bash
# deps.sh installs the Debian packages the local cluster and its tests need. Idempotent: when every
# package is already installed it touches neither apt nor the network.
set -euo pipefail
# git: pkg/ignore compares its matcher with `git check-ignore`. shellcheck: hack/verify.sh checks the
# scripts in pkg/remote/scripts. inotify-tools: the e2e tests' app-gnu image holds the host's inotifywait
# (sync-back's trigger).
# gcc and libseccomp-dev: the local cluster's runc is built from source (cgo, seccomp); containerd
# and runc: the host's, only for clusters made before the local cluster built its own.
pkgs=(gcc libseccomp-dev containerd runc containernetworking-plugins busybox-static openssl iproute2 iptables curl procps bash-completion git shellcheck inotify-tools)

# pkg/watch runs a test in a new user namespace (to lower its inotify limit); it needs no package,
# only a kernel that allows user namespaces. A limit of 0 disables them: raise it when we may.
userns_limit=/proc/sys/user/max_user_namespaces
if [[ -r $userns_limit && "$(<$userns_limit)" == 0 ]]; then
  if [[ $EUID -eq 0 ]]; then
    echo "deps.sh: enabling user namespaces (sysctl user.max_user_namespaces=15000)" >&2
    sysctl -qw user.max_user_namespaces=15000
  else
    echo "deps.sh: user namespaces are disabled (run as root: sysctl -w user.max_user_namespaces=15000)" >&2
    exit 1
  fi
fi

missing=()
for p in "${pkgs[@]}"; do
  if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" != installed ]]; then
    missing+=("$p")
  fi
done
((${#missing[@]} == 0)) && exit 0
if [[ $EUID -ne 0 ]]; then
  echo "deps.sh: missing Debian packages: ${missing[*]} (run as root: apt-get install -y ${missing[*]})" >&2
  exit 1
fi
echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian enables the host's containerd; the local cluster runs its own, so stop the host one rather
# than let two daemons share the machine.
if command -v systemctl >/dev/null && systemctl is-active -q containerd 2>/dev/null; then
  systemctl disable --now containerd >/dev/null 2>&1 || true
fi
