# shellcheck shell=sh
# watch.sh is sync-back's trigger, run as `sh -c` in the source container
# (comment lines are dropped before it is sent): where the image has
# inotifywait, it watches the listed paths' start points under the remote
# directory and prints one record per event, so that a write is scanned for
# at once rather than at the next interval. It is only a trigger: what
# comes back is still decided by a scan (scan.sh), and the interval's scans
# go on, so an event it misses (a directory made and filled before its
# watch was added, a name it can't print) costs only the wait for the next
# one. It writes nothing, and runs until the exec ends.
#
# Arguments: $1 the remote directory, then the start points ("./name": one
# component each, as scan.sh takes them). When one of them does not exist
# yet, the whole directory is watched: a generator that makes gen/ later
# must still trigger a scan.
#
# Output: "EVENTS ./path\0" per event (EVENTS: inotifywait's comma-separated
# names, ISDIR among them for a directory); on stderr, inotifywait's
# "Watches established." once every watch is in place. Exit 127 without
# inotifywait: the caller then relies on the interval alone.
d=$1
shift
if [ -n "${LIVESYNC_ROOTFS:-}" ]; then d=$(livesync_inroot "$d") || exit; fi
command -v inotifywait >/dev/null 2>&1 || { echo "livesync: inotifywait not found" >&2; exit 127; }
cd "$d" || exit
for s; do
  if [ ! -e "$s" ] || [ -L "$s" ]; then set -- .; break; fi
done
[ $# -gt 0 ] || set -- .
exec inotifywait -m -r -P -e close_write,create,delete,moved_to,moved_from,attrib --format '%e %w%f%0' --no-newline "$@"
