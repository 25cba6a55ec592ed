# shellcheck shell=sh
# list-chunk.sh lists one chunk of names handed over by find (see list.sh);
# $1 is the hash tool for a chunk of regular files, else "". With
# LIVESYNC_NS set (list.sh's nohash) stat adds %y, whose fraction is the
# mtime's nanoseconds. With LIVESYNC_REG set, every name is a regular file
# (find -type f, which never follows a link): no name needs readlink, and
# the loop that asks each would cost a start of 100,000 files 0.35 s of
# the container's CPU. A name that became a link since is still listed as
# one by stat, with no target, which never matches a saved one.
h=$1; shift
printf 'C\0'; printf '%s\0' "$@"
sf='%f %s %Y'; [ -z "${LIVESYNC_NS:-}" ] || sf='%f %s %Y %y'
printf 'S\0'; stat -c "$sf %n" "$@" 2>/dev/null; printf '\0'
printf 'L\0'
[ -n "${LIVESYNC_REG:-}" ] || for f; do if [ -L "$f" ]; then printf '%s\0' "$f"; readlink "$f" 2>/dev/null; printf '\0'; fi; done
printf 'H\0'
# $h is a tool name or empty, never a path with spaces.
[ -z "$h" ] || $h "$@" 2>/dev/null
printf '\0'
