# shellcheck shell=sh
# helper-probe.sh runs in a helper container (see helper.sh) and finds the
# target container's main process in the process namespace they share. $1 is
# the target's container ID (hex, without the runtime:// prefix). Prints one
# line: "P <pid> <uid> <gid> <ok|denied>", where uid and gid are the
# target's (from /proc/PID/status, readable by anyone) and denied says that
# this helper may not reach /proc/PID/root (same uid:gid, or CAP_SYS_PTRACE,
# is needed). No candidate: "N".
#
# The target's processes are those outside the helper's mount namespace
# (a link this helper can't read is not its own); one whose cgroup names the
# container ID wins (a pod with shareProcessNamespace shows every
# container's processes and the pause process), else the first.
self=$(readlink /proc/self/ns/mnt)
pick=''
for d in /proc/[0-9]*; do
  [ -r "$d/status" ] || continue
  m=$(readlink "$d/ns/mnt" 2>/dev/null) || m=''
  [ "$m" != "$self" ] || continue
  if [ -n "$1" ] && grep -q -- "$1" "$d/cgroup" 2>/dev/null; then pick=${d#/proc/}; break; fi
  [ -n "$pick" ] || pick=${d#/proc/}
done
[ -n "$pick" ] || { echo N; exit 0; }
u='' g=''
while read -r k v _; do case $k in Uid:) u=$v ;; Gid:) g=$v ;; esac; done < "/proc/$pick/status"
a=denied
ls "/proc/$pick/root/" >/dev/null 2>&1 && a=ok
echo "P $pick $u $g $a"
