# shellcheck shell=sh
# preflight.sh is what --dry-run runs in a target, once per mapping, to say
# how it would be synced; it reads and changes nothing. $1 is the mapping's
# remote directory; in a helper container it is reached through the
# target's /proc/PID/root (see apply.sh). Prints one "key=value" line each:
#
#   uid, gid  whom this exec runs as (id -u, id -g), "unknown" without id
#   stream    "yes" when dd reads exactly one block from a pipe, the probe of
#             stream.sh: a persistent stream would work
#   tar       "yes" when tar is found
#   root      "dir", "missing", or "notdir" when $1 is something else
#   writable  "yes" when $1 is a directory this user may create entries in,
#             or is missing and its nearest existing ancestor is one, so that
#             apply.sh's mkdir -p would work
#   helper    "yes" in a helper container
#
# The remote directory never appears in the output, so any name is safe.
d=$1 hp=no
if [ -n "${LIVESYNC_ROOTFS:-}" ]; then d=$(livesync_inroot "$1") || exit; hp=yes; fi
u=$(id -u 2>/dev/null) || u=unknown
g=$(id -g 2>/dev/null) || g=unknown
s=no
if command -v dd >/dev/null 2>&1 && [ "$(printf ab | dd bs=2 count=1 iflag=fullblock 2>/dev/null)" = ab ]; then s=yes; fi
t=no
if command -v tar >/dev/null 2>&1; then t=yes; fi
r=dir a=$d
if [ ! -e "$d" ] && [ ! -L "$d" ]; then
  r=missing
  while [ -n "$a" ] && [ ! -e "$a" ] && [ ! -L "$a" ]; do
    case $a in */*) a=${a%/*} ;; *) a=. ;; esac
  done
  [ -n "$a" ] || a=/
elif [ ! -d "$d" ]; then
  r=notdir
fi
w=no
if [ "$r" != notdir ] && [ -d "$a" ] && [ -w "$a" ] && [ -x "$a" ]; then w=yes; fi
printf 'uid=%s\ngid=%s\nstream=%s\ntar=%s\nroot=%s\nwritable=%s\nhelper=%s\n' "$u" "$g" "$s" "$t" "$r" "$w" "$hp"
