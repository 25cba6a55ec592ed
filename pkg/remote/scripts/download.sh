# shellcheck shell=sh
# download.sh writes a tar of the named entries of a remote directory to
# stdout, for sync-back, run as `sh -c` (comment lines are dropped before it
# is sent). Arguments: $1 the remote directory, $2 "z" to gzip the tar
# (gzip -1, where gzip is found; the caller tells the two apart by gzip's
# magic bytes, which no tar header starts with) or "", then the names
# ("./"-prefixed, so none starts with "-"). tar stores a symlink as a link,
# never what it points at; the caller checks every entry (names, link
# targets, and each file's hash against the scan's) before anything lands
# locally, and reads a cut-short archive as failed from where it ends. A
# name that vanished since the scan makes tar complain and go on; its status
# is the script's (through gzip: sh has no pipefail, so tar's status comes
# back on fd 3 through the command substitution; a gzip that fails cuts the
# stream, which the caller refuses).
d=$1 z=$2
shift 2
if [ -n "${LIVESYNC_ROOTFS:-}" ]; then d=$(livesync_inroot "$d") || exit; fi
cd "$d" || exit
command -v tar >/dev/null 2>&1 || { echo "livesync: tar not found" >&2; exit 127; }
if [ "$z" = z ] && command -v gzip >/dev/null 2>&1; then
  exec 4>&1
  z=$({ { tar -c -f - "$@" 3>&- 4>&-; echo $? >&3; } | gzip -1 -c >&4 3>&- 4>&-; } 3>&1)
  exit "${z:-1}"
fi
exec tar -c -f - "$@"
