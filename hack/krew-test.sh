#!/usr/bin/env bash
# krew-test.sh checks the krew manifests the way krew-index CI would, and installs the plugin with
# a krew built from source, offline, into a throwaway KREW_ROOT.
#
#   hack/krew-test.sh              (make krew-test, part of make test)
#     1. plugins/livesync.yaml and .krew.yaml (rendered) pass krew's validate-krew-manifest, and
#        .krew.yaml rendered with the committed sums is exactly plugins/livesync.yaml;
#     2. builds this platform's archive from the working tree (hack/release.sh), renders a
#        temporary manifest with that archive's sum (the committed sums are for the release
#        source, not for every dev build), and runs
#        `kubectl krew install --manifest=… --archive=dist/…`;
#     3. runs `kubectl livesync version` through kubectl's plugin discovery, links the
#        completion shim as the caveats say, and runs hack/completion-test.sh through kubectl.
#   hack/krew-test.sh --committed  (make verify-dist, after make dist)
#     installs every platform of the committed plugins/livesync.yaml from dist/ (KREW_OS and
#     KREW_ARCH), so krew itself checks that every committed sum matches its archive.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode=local
[[ "${1:-}" == --committed ]] && mode=committed
start=$SECONDS
tools="$(hack/krew-tools.sh)"
kbin="$(hack/localcluster/build.sh)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export KREW_NO_UPGRADE_CHECK=1
go build -o "$tmp/releasetool" ./hack/releasetool
manifest=plugins/livesync.yaml
version="$(awk '$1 == "version:" { print $2; exit }' "$manifest")"

validate() {
  "$tools/validate-krew-manifest" -manifest "$1" -skip-install 2>"$tmp/validate.log" || {
    cat "$tmp/validate.log" >&2
    echo "krew-test: $1 is not a valid krew manifest" >&2
    exit 1
  }
  echo "krew-test: valid: $1 ($2)"
}

# sums_of MANIFEST prints "SUM  ARCHIVE" for each platform of a rendered manifest.
sums_of() {
  awk '$1 == "uri:" { n = split($2, p, "/"); name = p[n] } $1 == "sha256:" { print $2 "  " name }' "$1"
}

# krew_install ROOT MANIFEST ARCHIVE [OS ARCH]: a user's `kubectl krew install`, with krew found
# by kubectl as a plugin.
krew_install() {
  local root="$1" manifest="$2" archive="$3"
  env KREW_ROOT="$root" ${4:+KREW_OS=$4} ${5:+KREW_ARCH=$5} PATH="$tools:$kbin:$PATH" \
    kubectl krew install --manifest="$manifest" --archive="$archive" >"$tmp/install.log" 2>&1 || {
    cat "$tmp/install.log" >&2
    echo "krew-test: kubectl krew install --manifest=$manifest --archive=$archive failed" >&2
    exit 1
  }
}

# 1. Both manifests are valid and say the same.
validate "$manifest" "committed"
sums_of "$manifest" >"$tmp/committed.sums"
mkdir -p "$tmp/template"
"$tmp/releasetool" krew -template .krew.yaml -tag "$version" -checksums "$tmp/committed.sums" -o "$tmp/template/livesync.yaml"
validate "$tmp/template/livesync.yaml" ".krew.yaml rendered for $version"
if ! diff -u <(grep -v '^#' "$manifest") "$tmp/template/livesync.yaml"; then
  echo "krew-test: $manifest is not .krew.yaml rendered: run make dist-manifest" >&2
  exit 1
fi
echo "krew-test: $manifest is .krew.yaml rendered with its sums"

if [[ "$mode" == committed ]]; then
  while read -r sum name; do
    [[ -f "dist/$name" ]] || { echo "krew-test: dist/$name missing: run make dist" >&2; exit 1; }
    platform="${name#kubectl-livesync_"${version}"_}" platform="${platform%%.*}"
    os="${platform%_*}" arch="${platform#*_}"
    root="$tmp/krew-$platform"
    krew_install "$root" "$manifest" "dist/$name" "$os" "$arch"
    exe=kubectl-livesync
    [[ "$os" == windows ]] && exe+=.exe
    for f in "$exe" LICENSE; do
      [[ -f "$root/store/livesync/$version/$f" ]] || { echo "krew-test: $name: $f not installed" >&2; exit 1; }
    done
    echo "krew-test: installed $name (sha256 $sum) for $os/$arch"
  done <"$tmp/committed.sums"
  echo "krew-test: every committed sum matches dist/ ($((SECONDS - start))s)"
  exit 0
fi

# 2. Install this platform's archive, built from the working tree.
os="$(go env GOOS)" arch="$(go env GOARCH)"
RELEASE_VERSION="$version" hack/release.sh --platforms "$os/$arch"
archive="$(awk -v p="_${os}_${arch}." 'index($2, p) { print $2 }' dist/checksums.txt)"
# The committed sums for the other platforms, this build's for this one.
awk 'NR == FNR { fresh[$2] = $1; next } { print ($2 in fresh ? fresh[$2] : $1) "  " $2 }' \
  dist/checksums.txt "$tmp/committed.sums" >"$tmp/local.sums"
mkdir -p "$tmp/local"
"$tmp/releasetool" krew -template .krew.yaml -tag "$version" -checksums "$tmp/local.sums" -o "$tmp/local/livesync.yaml"
validate "$tmp/local/livesync.yaml" "with the sum of dist/$archive"
root="$tmp/krew"
krew_install "$root" "$tmp/local/livesync.yaml" "dist/$archive"
echo "krew-test: kubectl krew install --manifest=… --archive=dist/$archive: ok"

# 3. kubectl finds the plugin in KREW_ROOT/bin, as a krew user's PATH has it.
export PATH="$root/bin:$kbin:$PATH"
[[ "$(command -v kubectl-livesync)" == "$root/bin/kubectl-livesync" ]] ||
  { echo "krew-test: kubectl-livesync on PATH is $(command -v kubectl-livesync), not krew's" >&2; exit 1; }
plugins="$(kubectl plugin list 2>/dev/null || true)"
[[ "$plugins" == *"$root/bin/kubectl-livesync"* ]] ||
  { echo "krew-test: kubectl plugin list does not show krew's kubectl-livesync" >&2; exit 1; }
out="$(kubectl livesync version)"
echo "krew-test: kubectl livesync version: $out"
[[ "$out" == "kubectl-livesync $version (commit $version, built "* ]] ||
  { echo "krew-test: unexpected version output" >&2; exit 1; }
[[ "$(kubectl livesync version -o json)" == *"\"version\": \"$version\""* ]] ||
  { echo "krew-test: kubectl livesync version -o json lacks $version" >&2; exit 1; }
# (kubectl krew list would want the index, which is on GitHub; the receipt is what it reads.)
[[ -f "$root/receipts/livesync.yaml" ]] || { echo "krew-test: krew wrote no receipt for livesync" >&2; exit 1; }
[[ -f "$root/store/livesync/$version/LICENSE" ]] || { echo "krew-test: LICENSE not installed" >&2; exit 1; }

# The shim as the caveats tell users to link it; then "kubectl livesync <TAB>" in bash.
ln -s "$root/store/livesync/$version/kubectl_complete-livesync" "$root/bin/"
hack/completion-test.sh
echo "krew-test: passed in $((SECONDS - start))s"
