#!/usr/bin/env bash
# wine.sh runs the Windows build of kubectl-livesync and its tests under wine, on Linux.
#
#   hack/wine.sh setup               install wine + mingw-w64 (Debian) if missing, build the prefix
#   hack/wine.sh unit                the Windows unit tests of the OS-dependent packages (make test-windows)
#   hack/wine.sh test GO_TEST_ARGS   GOOS=windows go test under wine, through hack/check-skips.sh
#   hack/wine.sh exec PROG [ARGS]    run a Windows program in the prefix (go test -exec; the e2e)
#   hack/wine.sh env                 print the environment `exec` uses (WINEPREFIX=..., one a line)
#   hack/wine.sh stop                stop the prefix's wineserver (and with it every wine process)
#
# Debian 12 ships wine 8, which lacks bcryptprimitives.dll; Go >= 1.22 Windows programs load it from
# system32 at start-up (ProcessPrng) and panic without it. hack/wine/bcryptprimitives.c is that one
# function over advapi32's RtlGenRandom, as wine 9 has it; setup builds it with mingw-w64 into the
# prefix. The prefix lives in the build cache (~/.cache/kubectl-livesync/wine) and is rebuilt when the
# DLL's source changes. setup is idempotent: when all is in place it touches neither apt nor wine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${LIVESYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-livesync}/wine"
prefix="$cache/prefix"
wine=/usr/lib/wine/wine64
wineserver=/usr/lib/wine/wineserver64
pkgs=(wine64 gcc-mingw-w64-x86-64-win32)

wine_env() {
  # WINEDEBUG=-all: no fixme noise on stderr. WINEDLLOVERRIDES: no mono/gecko install prompts (the
  # prefix needs neither .NET nor a browser engine).
  export WINEPREFIX="$prefix" WINEDEBUG="${WINEDEBUG:--all}" WINEDLLOVERRIDES="mscoree,mshtml="
  # wine's console programs need no display; an inherited one would only start a desktop.
  unset DISPLAY WAYLAND_DISPLAY
}

install_pkgs() {
  local missing=() p
  for p in "${pkgs[@]}"; do
    if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" != installed ]]; then
      missing+=("$p")
    fi
  done
  ((${#missing[@]} == 0)) && return 0
  if [[ $EUID -ne 0 ]]; then
    echo "wine.sh: missing Debian packages: ${missing[*]} (run as root: apt-get install -y --no-install-recommends ${missing[*]})" >&2
    exit 1
  fi
  echo "wine.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# setup_prefix builds the DLL and a prefix that holds it; the stamp names the DLL source's hash, so
# an edit of the source rebuilds both.
setup_prefix() {
  local src="$root/hack/wine/bcryptprimitives.c" def="$root/hack/wine/bcryptprimitives.def" sum
  sum="$(cat "$src" "$def" | sha256sum | cut -c1-16)"
  [[ -f "$prefix/.livesync-$sum" ]] && return 0
  mkdir -p "$cache"
  # One builder at a time; a second waits, then finds the prefix built.
  exec 9>"$cache/.lock"
  flock 9
  [[ -f "$prefix/.livesync-$sum" ]] && return 0
  echo "wine.sh: building the wine prefix in $prefix" >&2
  "$wineserver" -k 2>/dev/null || true
  rm -rf "$prefix"
  local tmp
  tmp="$(mktemp -d "$cache/tmp.XXXXXX")"
  x86_64-w64-mingw32-gcc -O2 -Wall -Wextra -Werror -shared -nostdlib -e DllMain -s \
    -Wl,--no-insert-timestamp -o "$tmp/bcryptprimitives.dll" "$src" "$def" -ladvapi32 -lkernel32
  wine_env
  "$wine" wineboot -i >/dev/null 2>&1
  "$wineserver" -w
  install -m 0644 "$tmp/bcryptprimitives.dll" "$prefix/drive_c/windows/system32/bcryptprimitives.dll"
  rm -rf "$tmp"
  touch "$prefix/.livesync-$sum"
}

# overlay writes a go build -overlay file that patches one line of the installed Go's
# internal/syscall/windows: wine 8 answers FileDispositionInformationEx (class 64, POSIX-semantics
# deletes, asked for by os.RemoveAll and os.Root's Remove) with STATUS_NOT_IMPLEMENTED where Windows
# before 10 1607 answers STATUS_INVALID_INFO_CLASS, which Go takes as "use the older delete". The patch
# adds wine's status to that fallback, so under wine Go deletes as it does on FAT and older Windows;
# without it every t.TempDir cleanup fails with "Invalid function".
overlay() {
  local goroot src out sum
  goroot="$(go env GOROOT)"
  src="$goroot/src/internal/syscall/windows/at_windows.go"
  sum="$( (go version; cat "$src") | sha256sum | cut -c1-16)"
  out="$cache/overlay-$sum"
  if [[ ! -f "$out/overlay.json" ]]; then
    mkdir -p "$out"
    local pat='STATUS_NOT_SUPPORTED:     // the file system'
    if ! grep -qF "$pat" "$src"; then
      echo "wine.sh: $src no longer has the delete fallback this script patches for wine (update overlay() in hack/wine.sh)" >&2
      exit 1
    fi
    sed "s|$pat|STATUS_NOT_SUPPORTED, NTStatus(0xC0000002) /* wine 8: STATUS_NOT_IMPLEMENTED */: // the file system|" \
      "$src" >"$out/at_windows.go"
    printf '{"Replace":{"%s":"%s"}}\n' "$src" "$out/at_windows.go" >"$out/overlay.json.tmp"
    mv "$out/overlay.json.tmp" "$out/overlay.json"
  fi
  echo "$out/overlay.json"
}

# stop_wine ends every wine process of the prefix (its wineserver), waits for them, and empties the
# prefix's temp directories. Never fails: it runs from traps.
stop_wine() {
  [[ -d "$prefix" ]] || return 0
  WINEPREFIX="$prefix" "$wineserver" -k 2>/dev/null || true
  WINEPREFIX="$prefix" "$wineserver" -w 2>/dev/null || true
  rm -rf "$prefix"/drive_c/users/*/Temp/* || true
}

# gotest runs go test for Windows under wine through hack/check-skips.sh, with wine's own skip list.
gotest() {
  local ov
  ov="$(overlay)"
  wine_env
  # Nothing of wine outlives the run: kill the prefix's wineserver and its processes, wait, and
  # empty the prefix's temp directories (pkg/watch's tests may leave a directory notify still held).
  trap 'stop_wine' EXIT
  # -p 1: one test binary at a time (they share the prefix's one wineserver; the machine is small).
  GOOS=windows GOARCH=amd64 CGO_ENABLED=0 LIVESYNC_SKIPS_ALLOWED="$root/hack/skips-wine.txt" \
    "$root/hack/check-skips.sh" -exec "$root/hack/wine.sh exec" -overlay "$ov" -p 1 "$@"
}

cmd="${1:-}"
shift || true
case "$cmd" in
setup)
  install_pkgs
  setup_prefix
  ;;
exec)
  if [[ ! -f "$prefix/drive_c/windows/system32/bcryptprimitives.dll" ]]; then
    echo "wine.sh: no wine prefix in $prefix: run hack/wine.sh setup first" >&2
    exit 1
  fi
  wine_env
  exec "$wine" "$@"
  ;;
env)
  wine_env
  printf '%s\n' "WINEPREFIX=$WINEPREFIX" "WINEDEBUG=$WINEDEBUG" "WINEDLLOVERRIDES=$WINEDLLOVERRIDES" "WINE=$wine"
  ;;
overlay)
  overlay
  ;;
stop)
  wine_env
  stop_wine
  ;;
test)
  install_pkgs
  setup_prefix
  gotest "$@"
  ;;
unit)
  install_pkgs
  setup_prefix
  start=$SECONDS
  # Every test of the packages whose behaviour depends on the OS: watching (ReadDirectoryChangesW
  # through notify), the local disk (atomic replace, os.Root, case folding), ignore rules, project
  # files, the saved sync state. Of pkg/planner and pkg/syncback only the tests that need no container side: the others
  # run the remote scripts with Linux's busybox, which a Windows program cannot start.
  gotest -count=1 ./pkg/watch ./pkg/localtree ./pkg/ignore ./pkg/project ./pkg/syncstate
  gotest -count=1 -run '^Test(ParseMapping|ParseMappingWindows|ValidateMappings)$' ./pkg/planner
  gotest -count=1 -run '^Test(Decide|ExpectOnlyOnTheSource|SourceIsTheOldestPod|TriggerWants)$' ./pkg/syncback
  echo "wine.sh: Windows unit tests under wine in $((SECONDS - start))s" >&2
  ;;
*)
  sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
  ;;
esac
