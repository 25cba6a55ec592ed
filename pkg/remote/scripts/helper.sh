# shellcheck shell=sh
# helper.sh goes before every script that runs in a helper container (see
# HelperArgv): an ephemeral container that shares the target container's
# process namespace and reaches its files through /proc/PID/root, for images
# without sh or tar, or directories their user can't write. HelperArgv puts
# the assignments of LIVESYNC_PID and LIVESYNC_START (the target's main
# process, as helper-probe.sh found it, and its start time) and, for a root
# helper writing for a non-root target, LIVESYNC_OWNER (uid:gid) before it;
# helper-probe.sh runs after it without them. LIVESYNC_PROC is /proc, but in
# tests.
LIVESYNC_PROC=${LIVESYNC_PROC:-/proc}
if [ -n "${LIVESYNC_PID:-}" ]; then LIVESYNC_ROOTFS=$LIVESYNC_PROC/$LIVESYNC_PID/root; fi
#
# livesync_started sets livesync_st to the start time of process $1, field
# 22 of its stat, counted after the last ")": the name before it (field 2)
# may hold spaces and parentheses. "" when there is no such process.
livesync_started() {
  livesync_st=''
  { read -r livesync_st <"$LIVESYNC_PROC/$1/stat"; } 2>/dev/null || :
  livesync_st=${livesync_st##*') '}
  # shellcheck disable=SC2086 # the fields after the name: numbers and a state letter
  set -- $livesync_st
  livesync_st=${20:-}
}
#
# livesync_pinned fails, with status 75 and "livesync: helper target moved"
# first on stderr, unless process LIVESYNC_PID is still the one that started
# at LIVESYNC_START. Once it ended (its container restarted, or stopped) the
# PID may be another's, another container's even, whose files a write
# through /proc/PID/root would reach. The caller probes anew (see
# HelperExecutor in pkg/workload). Every script checks it before it starts,
# and livesync_inroot before each use, so each batch of a stream does.
livesync_pinned() {
  [ -n "${LIVESYNC_PID:-}" ] || return 0
  livesync_started "$LIVESYNC_PID"
  [ "$livesync_st" != "$LIVESYNC_START" ] || return 0
  printf 'livesync: helper target moved: process %s that started at %s is gone\n' "$LIVESYNC_PID" "$LIVESYNC_START" >&2
  return 75
}
#
# livesync_inroot prints the path $1 has in the target's root, with every
# symlink on the way resolved inside that root, as the target resolves it: a
# plain /proc/PID/root/$1 would follow an absolute link against the helper's
# own root. A path that doesn't exist yet resolves as far as it exists.
livesync_inroot() {
  livesync_pinned || return
  r=$LIVESYNC_ROOTFS p='' rest=${1#/} n=0
  while [ -n "$rest" ]; do
    c=${rest%%/*}
    case $rest in */*) rest=${rest#*/} ;; *) rest='' ;; esac
    case $c in ''|.) continue ;; ..) p=${p%/*}; continue ;; esac
    if [ -L "$r$p/$c" ]; then
      n=$((n+1))
      [ $n -le 40 ] || { printf 'livesync: too many symlinks in %s\n' "$1" >&2; return 1; }
      l=$(readlink "$r$p/$c") || return 1
      case $l in /*) p='' ;; esac
      rest=${l#/}${rest:+/$rest}
    else
      p=$p/$c
    fi
  done
  printf '%s\n' "$r$p"
}
livesync_pinned || exit
