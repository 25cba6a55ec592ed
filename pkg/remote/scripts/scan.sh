# shellcheck shell=sh
# scan.sh looks for what changed in the container under the paths listed for
# sync-back, run as `sh -c` (comment lines are dropped before it is sent).
# Arguments: $1 the remote directory, $2 the container time (seconds) to
# look back to, or "" for a full listing, $3 list-chunk.sh, $4 the number
# of words of hash tests at the end, then the start points ("./name": one
# component each, so that find never resolves a symlink on its way to
# one; find itself never follows one below them), then the hash tests:
# find tests, each "!", a test and its pattern ("! -path ./gen/*"), that
# a file which a glob may list fails at least one of. A full listing
# hashes only the files that fail one (all of them when there are none),
# and lists the others as it does every other entry, without a hash; a
# listing of what changed leaves the tests out (it hashes what changed).
#
# Output, NUL-terminated tokens:
#
#   SB1 <now> <incarnation> <"newer" | "">
#   M <start point> ...      for each start point that does not exist
#   then list.sh's format (LS2 header, C/S/L/H chunks, END), over
#   what changed since $2 (or everything), with "V <dir>... \"\"" among
#   the chunks naming the directories whose every entry it lists (a full
#   listing names none: it lists every entry), and finally
#   OK | PARTIAL             whether every find finished cleanly.
#
# Now is the container's clock when the scan started, in seconds: `date +%s`,
# or in the stream's loop a second or two earlier (see marks.sh), never later.
#
# A listing without its last token was cut short: the caller treats it as
# a failure, never as deletions. PARTIAL (a directory find could not read)
# lets what was seen come back but no delete be inferred from it.
#
# The incarnation is the mount namespace the scan runs in (the helper's
# target process's, through a helper): a restarted container runs in a new
# one, and a scan that lands in it must not be read against the ancestor of
# the container before.
#
# "Since" is a marker file whose mtime is no later than $2, which the
# caller sets two seconds before the previous scan's now: a marker as new as
# the scan misses writes in the same timestamp tick (GNU find compares
# nanoseconds that the kernel's coarse clock leaves equal; busybox compares
# seconds). What comes back twice is weeded out by the caller against its
# index. A rename keeps the file's old mtime, so the entries of every
# directory that changed are listed too. Without a writable temp directory
# for the marker, the listing is full.
#
# Run by the stream's loop (livesync_scan in stream.sh), it takes the mount
# namespace, the time and the marker the loop keeps (see marks.sh: the loop
# has read the time and stamped a marker for this scan in its own shell)
# instead of a readlink, a date, a mktemp and a touch of its own; run as an
# exec ($0 is not the loop's), it takes nothing from its environment for
# them, and its marker is back-dated to $2 exactly.
d=$1 since=$2 chunk=$3
shift 3
if [ -n "${LIVESYNC_ROOTFS:-}" ]; then d=$(livesync_inroot "$d") || exit; fi
h=
if command -v sha256sum >/dev/null 2>&1; then h=sha256sum; fi
m=
# shellcheck disable=SC2154 # the loop's names, set by marks.sh
if [ "$0" = livesync-stream ]; then
  now=$livesync_t ns=$livesync_ns
  # The loop read no time (date failed): run it here for its status and message.
  if [ -z "$now" ]; then now=$(date +%s) || exit; fi
  if [ -n "$since" ]; then livesync_pick "$since"; m=$livesync_m; fi
else
  now=$(date +%s) || exit
  ns=$(readlink "/proc/${LIVESYNC_PID:-self}/ns/mnt" 2>/dev/null) || ns=
  if [ -n "$since" ] && m=$(mktemp "${TMPDIR:-/tmp}/livesync-scan.XXXXXX" 2>/dev/null); then
    trap 'rm -f "$m"' EXIT
    touch -d "@$since" "$m" 2>/dev/null || { rm -f "$m"; m=; }
  fi
fi
printf 'SB1\0%s\0%s\0%s\0' "$now" "$ns" "${m:+newer}"
if [ ! -d "$d" ]; then
  s=none; { [ ! -e "$d" ] && [ ! -L "$d" ]; } || s=notdir
  printf 'LS2\0%s\0\0%s\0END\0OK\0' "$h" "$s"; exit 0
fi
cd "$d" || exit
for c in find stat; do command -v $c >/dev/null 2>&1 || { echo "livesync: $c not found" >&2; exit 127; }; done
k=$1; shift
# The start points that exist, then the hash tests when the listing is
# full ($t of them: only a full listing uses them).
n=$# t=0 i=0
for s; do
  i=$((i + 1))
  if [ "$i" -gt $((n - k)) ]; then
    if [ -z "$m" ]; then set -- "$@" "$s"; t=$((t + 1)); fi
  elif [ -e "$s" ] || [ -L "$s" ]; then set -- "$@" "$s"
  else printf 'M\0%s\0' "$s"; fi
done
shift "$n"
printf 'LS2\0%s\0\0dir\0' "$h"
st=OK
# One walk each: an unanchored glob (package-lock.json matches at any depth)
# starts at ".", so a walk per kind would cost a find of the mapping each.
# An -exec ... + is true, so files go to the first, the rest to the second,
# and directories to the third too. No parentheses: busybox find never runs
# an -exec ... + inside them. With hash tests, the full listing's first
# -exec takes what passes all of them (no glob lists it: no hash), the
# second the files among the rest, the third what is left.
#
# The inner find lists every entry of a directory that changed, not only
# those the outer walk left to it: a file rewritten between the two (temp +
# rename: old when the walk passed it, new when its directory is listed)
# would be in neither, and a complete listing without it reads as a delete.
# The new files it meets are listed without a hash (the walk hashed those
# it saw; the parser keeps that hash); one it did not see comes back by
# size and mtime, and the next scan hashes it. It first names the
# directories it lists ("V", the names, ""): only their entries are all
# there. A directory that changed after the walk passed it is listed too,
# with its new mtime, as an entry of a parent that changed, but none of its
# own entries are (TestModel seed 4338312530518604372 round 163 read them
# as deleted).
if [ $# -gt "$t" ] && [ -n "$m" ]; then
  # The inner find's {} is spelled "{""}": GNU find refuses a second {}
  # among the arguments of an -exec ... +, even inside another's script.
  # shellcheck disable=SC2016 # expanded by the inner sh
  find "$@" -newer "$m" -type f -exec sh -c "$chunk" sh "$h" {} + -o -newer "$m" -exec sh -c "$chunk" sh "" {} + -type d \
    -exec sh -c 'm=$1 c=$2 h=$3; shift 3; printf "V\0"; printf "%s\0" "$@"; printf "\0"; find "$@" -mindepth 1 -maxdepth 1 ! -newer "$m" -type f -exec sh -c "$c" sh "$h" "{""}" + -o -exec sh -c "$c" sh "" "{""}" +' sh "$m" "$chunk" "$h" {} + || st=PARTIAL
elif [ $# -gt "$t" ] && [ "$t" -gt 0 ]; then
  find "$@" -exec sh -c "$chunk" sh "" {} + -o -type f -exec sh -c "$chunk" sh "$h" {} + -o -exec sh -c "$chunk" sh "" {} + || st=PARTIAL
elif [ $# -gt "$t" ]; then
  find "$@" -type f -exec sh -c "$chunk" sh "$h" {} + -o -exec sh -c "$chunk" sh "" {} + || st=PARTIAL
fi
printf 'END\0%s\0' "$st"
