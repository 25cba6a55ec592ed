# shellcheck shell=sh
# helper-probe.sh runs in a helper container after helper.sh (see
# HelperProbe) and finds the target container's main process in the process
# namespace they share. $1 is the target's container ID (hex, without the
# runtime:// prefix). Prints one line: "P <pid> <start> <uid> <gid>
# <ok|denied>", where start is its start time (see livesync_started), uid
# and gid are the target's (from /proc/PID/status, readable by anyone) and
# denied says that this helper may not reach /proc/PID/root (same uid:gid,
# or CAP_SYS_PTRACE, is needed). No process of the target: "N".
#
# The target's processes are those outside the helper's mount namespace (a
# link this helper can't read is not its own) whose cgroup names the
# container ID: a pod with shareProcessNamespace shows every container's
# processes and the pause process too, and their roots are other
# containers' files, so nothing else is taken for the target's. Of its
# processes the one that started first is its main one, the lowest PID on a
# tie (PIDs wrap; glob order is not theirs either, 15 before 7): the others
# are its children, and a worker that exits (nginx -s reload) would leave
# the helper without a root.
[ -n "$1" ] || { echo N; exit 0; }
self=$(readlink "$LIVESYNC_PROC/self/ns/mnt")
pick='' first=''
for d in "$LIVESYNC_PROC"/[0-9]*; do
  [ -r "$d/status" ] || continue
  n=${d##*/} c=''
  { while read -r l; do case $l in *"$1"*) c=y; break ;; esac; done <"$d/cgroup"; } 2>/dev/null || :
  [ -n "$c" ] || continue
  m=$(readlink "$d/ns/mnt" 2>/dev/null) || m=''
  [ "$m" != "$self" ] || continue
  livesync_started "$n"
  [ -n "$livesync_st" ] || continue
  if [ -z "$pick" ] || [ "$livesync_st" -lt "$first" ] || { [ "$livesync_st" -eq "$first" ] && [ "$n" -lt "$pick" ]; }; then
    pick=$n first=$livesync_st
  fi
done
[ -n "$pick" ] || { echo N; exit 0; }
u='' g=''
while read -r k v _; do case $k in Uid:) u=$v ;; Gid:) g=$v ;; esac; done <"$LIVESYNC_PROC/$pick/status"
a=denied
ls "$LIVESYNC_PROC/$pick/root/" >/dev/null 2>&1 && a=ok
echo "P $pick $first $u $g $a"
