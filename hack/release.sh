#!/usr/bin/env bash
# release.sh builds the release archives into dist/: one per platform, each holding the binary,
# LICENSE and the kubectl_complete-livesync shim, plus dist/checksums.txt. The same source and Go
# version give the same bytes: -trimpath, an empty build ID, no VCS stamp, fixed version, commit
# and date, and archives with sorted entries, fixed times and no owners (hack/releasetool).
#
#   hack/release.sh                          all six platforms
#   hack/release.sh --platforms linux/amd64  a subset (make test builds only this one)
#   hack/release.sh --update-manifest        all six, then rewrite plugins/livesync.yaml from
#                                            .krew.yaml with their sums
#   hack/release.sh --check-manifest         all six, then fail unless plugins/livesync.yaml
#                                            carries exactly their sums
#
# RELEASE_VERSION (v0.1.0), RELEASE_COMMIT (the version: a commit hash would change the bytes on
# every commit, including the one that records the sums) and RELEASE_DATE stamp the binary.
#
# Every platform is built with CGO_ENABLED=0. A published darwin build should use cgo on a macOS
# runner instead: rjeczalik/notify then watches with FSEvents rather than one kqueue descriptor
# per file, which runs out of descriptors on big trees. Its sums then differ from the committed
# manifest, which krew-release-bot recomputes from the published archives anyway.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

RELEASE_VERSION="${RELEASE_VERSION:-v0.1.0}"
RELEASE_COMMIT="${RELEASE_COMMIT:-$RELEASE_VERSION}"
RELEASE_DATE="${RELEASE_DATE:-2026-12-01T00:00:00Z}"
all_platforms="darwin/amd64 darwin/arm64 linux/amd64 linux/arm64 windows/amd64 windows/arm64"
platforms="$all_platforms"
mode=build
while (($#)); do
  case "$1" in
  --platforms) platforms="$2"; shift 2 ;;
  --update-manifest) mode=update; shift ;;
  --check-manifest) mode=check; shift ;;
  *) echo "usage: $0 [--platforms 'OS/ARCH ...'] [--update-manifest | --check-manifest]" >&2; exit 2 ;;
  esac
done
if [[ "$mode" != build && "$platforms" != "$all_platforms" ]]; then
  echo "release.sh: the manifest needs all platforms; drop --platforms" >&2
  exit 2
fi

pkg=github.com/livesync-dev/kubectl-livesync
ldflags="-s -w -buildid= -X $pkg/pkg/version.Version=$RELEASE_VERSION -X $pkg/pkg/version.Commit=$RELEASE_COMMIT -X $pkg/pkg/version.Date=$RELEASE_DATE"
# Pin what the environment could otherwise change in the output.
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOAMD64=v1 GOARM64=v8.0 GOEXPERIMENT=

start=$SECONDS
mkdir -p dist
tool="$(mktemp -d)"
trap 'rm -rf "$tool"' EXIT
go build -o "$tool/releasetool" ./hack/releasetool

archives=()
for p in $platforms; do
  os="${p%/*}" arch="${p#*/}"
  exe="" ext=tar.gz shim=cmd/kubectl_complete-livesync/kubectl_complete-livesync
  if [[ "$os" == windows ]]; then
    exe=.exe ext=zip shim+=.cmd
  fi
  out="dist/build/${os}_${arch}"
  rm -rf "$out"
  mkdir -p "$out"
  t=$SECONDS
  GOOS="$os" GOARCH="$arch" go build -trimpath -ldflags "$ldflags" -o "$out/kubectl-livesync$exe" ./cmd/kubectl-livesync
  name="kubectl-livesync_${RELEASE_VERSION}_${os}_${arch}.$ext"
  "$tool/releasetool" archive -mtime "$RELEASE_DATE" -o "dist/$name" "$out/kubectl-livesync$exe" LICENSE "$shim"
  archives+=("$name")
  echo "release.sh: dist/$name ($((SECONDS - t))s)" >&2
done

# checksums.txt lists the archives of this run, sorted, in sha256sum's format.
(cd dist && sha256sum "${archives[@]}" | sort -k2 >checksums.txt)
echo "release.sh: ${#archives[@]} archive(s) in $((SECONDS - start))s with $(go env GOVERSION); dist/checksums.txt:" >&2
cat dist/checksums.txt >&2

render() {
  "$tool/releasetool" krew -template .krew.yaml -tag "$RELEASE_VERSION" -checksums dist/checksums.txt \
    -header "Rendered from .krew.yaml by hack/release.sh --update-manifest (sums of make dist with $(go env GOVERSION)); do not edit." "$@"
}
case "$mode" in
update)
  render -o plugins/livesync.yaml
  echo "release.sh: wrote plugins/livesync.yaml" >&2
  ;;
check)
  render -o "$tool/livesync.yaml"
  if ! diff -u <(grep -v '^#' plugins/livesync.yaml) <(grep -v '^#' "$tool/livesync.yaml"); then
    echo "release.sh: plugins/livesync.yaml does not carry the sums of these archives (it says: $(head -n1 plugins/livesync.yaml))." >&2
    echo "release.sh: after a code change that is expected; refresh it with: make dist-manifest" >&2
    exit 1
  fi
  echo "release.sh: plugins/livesync.yaml matches the archives" >&2
  ;;
esac
