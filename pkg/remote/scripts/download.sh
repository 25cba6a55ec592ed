# shellcheck shell=sh
# download.sh writes a tar of the named entries of a remote directory to
# stdout, for sync-back, run as `sh -c` (comment lines are dropped before it
# is sent). Arguments: $1 the remote directory, then the names ("./"-prefixed,
# so none starts with "-"). tar stores a symlink as a link, never what it
# points at; the caller checks every entry (names, link targets, and each
# file's hash against the scan's) before anything lands locally, and reads
# a cut-short archive as failed from where it ends. A name that vanished
# since the scan makes tar complain and go on; its status is the script's.
d=$1
shift
if [ -n "${LIVESYNC_ROOTFS:-}" ]; then d=$(livesync_inroot "$d") || exit; fi
cd "$d" || exit
command -v tar >/dev/null 2>&1 || { echo "livesync: tar not found" >&2; exit 127; }
exec tar -c -f - "$@"
