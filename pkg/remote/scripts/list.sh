# shellcheck shell=sh
# list.sh prints what the container has under a directory, in one exec, run
# as `sh -c` (comment lines are dropped before it is sent). Arguments: $1 the
# remote directory, $2 a single name to list instead of the whole directory
# (file mappings) or "", $3 list-chunk.sh, $4 "nohash" to hash nothing (a
# start against a saved ancestor compares stat data, the mtime to the
# nanosecond; see ListStat), or "names" to list and hash only the regular
# files named after it ("./"-prefixed, never descended into; see
# ListNames). In a helper container $1 is reached through the target's
# /proc/PID/root (see apply.sh).
#
# Output is a stream of NUL-terminated tokens, unambiguous for any name:
#
#   LS2 <hash tool or ""> <"gzip" when `gzip -dc` works, else "">
#       <"dir" | "none" when $1 (or $1/$2) is missing |
#       "notdir" when $1 of a directory mapping is something else>
#   then per chunk of names that find hands to list-chunk.sh (regular
#   files first, then everything else, so that no shell loop has to pick
#   the files to hash out of a chunk: rebuilding "$@" one name at a time
#   is quadratic, 18 s for 10,000 names in busybox sh):
#   C <name>...                     names as found, "./"-prefixed
#   S <stat lines>                  "%f %s %Y %n\n" per name stat could read
#                                   (nohash: "%f %s %Y %y %n\n", %y for the
#                                   mtime's nanoseconds: busybox has no %.9Y)
#   L [<name> <readlink output>]... symlink targets
#   H <hash tool output>            for regular files only
#   and finally END.
#
# Neither stat nor sha256sum can print a name unambiguously (busybox prints
# newlines raw; GNU sha256sum escapes), so the parser reads their lines
# against the names already known from the C section, in order. Hashes are
# what make a restart cheap: a fresh container layer holds the image's copy
# of the sources, whose mtimes never match the local ones, so size+mtime would
# resend everything while equal hashes send nothing. Without sha256sum or
# md5sum it falls back to size+mtime, which still matches files this tool
# extracted earlier (tar keeps mtimes).
d=$1
if [ -n "${LIVESYNC_ROOTFS:-}" ]; then d=$(livesync_inroot "$1") || exit; fi
h=
if command -v sha256sum >/dev/null 2>&1; then h=sha256sum
elif command -v md5sum >/dev/null 2>&1; then h=md5sum; fi
# nohash: the header still names the tool (what later batches may rely on), no
# chunk hashes with it.
hc=$h
if [ "${4:-}" = nohash ]; then hc=''; LIVESYNC_NS=1; export LIVESYNC_NS; fi
# An empty gzip member: a busybox gzip built without decompression fails it.
z=
if command -v gzip >/dev/null 2>&1 && printf '\037\213\010\000\000\000\000\000\000\003\003\000\000\000\000\000\000\000\000\000' | gzip -dc >/dev/null 2>&1; then z=gzip; fi
start=. min=1
[ -z "$2" ] || { start="./$2"; min=0; }
if [ ! -d "$d" ] || { [ -n "$2" ] && [ ! -e "$d/$2" ] && [ ! -L "$d/$2" ]; }; then
  s=none; [ -n "$2" ] || { [ ! -e "$d" ] && [ ! -L "$d" ]; } || s=notdir
  printf 'LS2\0%s\0%s\0%s\0END\0' "$h" "$z" "$s"; exit 0
fi
cd "$d" || exit
for c in find stat; do command -v $c >/dev/null 2>&1 || { echo "livesync: $c not found" >&2; exit 127; }; done
printf 'LS2\0%s\0%s\0dir\0' "$h" "$z"
if [ "${4:-}" = names ]; then
  c=$3; shift 4
  [ $# -eq 0 ] || LIVESYNC_REG=1 find "$@" -maxdepth 0 -type f -exec sh -c "$c" sh "$h" {} +
  printf 'END\0'; exit 0
fi
LIVESYNC_REG=1 find "$start" -mindepth $min -type f -exec sh -c "$3" sh "$hc" {} +
find "$start" -mindepth $min ! -type f -exec sh -c "$3" sh "" {} +
printf 'END\0'
