# shellcheck shell=sh
# helper.sh goes before every script that runs in a helper container (see
# HelperArgv): an ephemeral container that shares the target container's
# process namespace and reaches its files through /proc/PID/root, for images
# without sh or tar, or directories their user can't write. HelperArgv puts
# the assignments of LIVESYNC_ROOTFS (/proc/PID/root) and, for a root helper
# writing for a non-root target, LIVESYNC_OWNER (uid:gid) before it.
#
# livesync_inroot prints the path $1 has in the target's root, with every
# symlink on the way resolved inside that root, as the target resolves it: a
# plain /proc/PID/root/$1 would follow an absolute link against the helper's
# own root. A path that doesn't exist yet resolves as far as it exists.
livesync_inroot() {
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
