# shellcheck shell=sh
# watch.sh is sync-back's trigger, run as `sh -c` in the source container
# (comment lines are dropped before it is sent): where the image has
# inotifywait, it watches the listed paths' start points under the remote
# directory and prints one record per event, so that a write is scanned for
# at once rather than at the next interval. It is only a trigger: what
# comes back is still decided by a scan (scan.sh), and the interval's scans
# go on, so an event it misses (a directory made and filled before its
# watch was added, a name it can't print) costs only the wait for the next
# one. It writes nothing, and runs until the client closes its stdin.
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
# inotifywait runs in the background and the shell waits for it; a subshell
# reads stdin, which the client holds open and never writes, and ends
# inotifywait at its EOF: the client closed the exec, or was killed and its
# connection dropped. Without it, inotifywait would outlive the session,
# holding its watches, until its next event's write failed. A background
# list's stdin is /dev/null unless redirected: fd 3 carries the exec's.
exec 3<&0
inotifywait -m -r -P -e close_write,create,delete,moved_to,moved_from,attrib --format '%e %w%f%0' --no-newline "$@" <&- &
w=$!
(while read -r _; do :; done; kill "$w" 2>/dev/null) <&3 >/dev/null 2>&1 &
r=$!
exec 3<&-
wait "$w"
s=$?
kill "$r" 2>/dev/null
exit "$s"
