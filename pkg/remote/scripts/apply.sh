# shellcheck shell=sh
# apply.sh is the whole remote side of a batch, run as `sh -c` (comment lines
# are dropped before it is sent). Arguments:
#
#   $1  the remote directory (absolute), created if missing
#   $2  "x": extract the tar on stdin; "z": the same tar, gzip-compressed
#       (only sent where list.sh found gzip); "d": no tar
#   $3  a file mapping's entry ("./name"), "" for a directory mapping
#   $4  how many checks follow, $5 how many takes and rmdirs, $6 how many
#       places and chmods
#   then the checks, the takes, the rmdirs, the places, the chmods, and the
#   deletes (all the rest)
#
# Every path is "./"-prefixed and relative to $1, travels as its own argv
# element and is never parsed by a shell, so spaces, newlines, quotes and
# unicode are safe. The steps run in this order:
#
#  1. A root of the wrong type is refused, never replaced: $1 must be a
#     directory (or missing), and a file mapping's entry must not be one.
#  2. Checks, parents first, so that nothing below is reached through a
#     symlink the container has below $1 (tar writes `etc/passwd` through
#     an existing link `etc -> /etc`, busybox tar chmods a directory entry
#     through one, and `rm -rf ./etc/passwd` deletes through one):
#     "p./dir": the local side has a directory here: a symlink is removed
#     (the link itself) and replaced by an empty directory, and reported on
#     stdout as "R./dir\0" so its former contents are sent again;
#     "k./dir": the local side has no directory here (a remote-only one
#     listed by mirror): a symlink stops the script before any delete;
#     "w./dir": make the directory u+rwx (best effort) so that a non-root
#     tar can fill it; a chmod below restores its mode.
#     Moves follow the other checks, each as two arguments: "m<sha256>./src"
#     or "c<sha256>./src", then "t<mode>./dst": the container already holds
#     dst's new content at src (a rename, git mv, a moved directory, a
#     copy), so it moves ("m") or copies ("c") it there instead of receiving
#     it again; see step 2b.
#     Recoveries lead the list, "U" + a precondition: a batch killed in a
#     place or a take of that path (a stream fenced, an exec cut) may have
#     left its file staged and what was there renamed aside; each is ended
#     first (see unswap), so nothing below ever finds the path missing.
#     Preconditions follow (sync-back's, see ExpectFile), and all of
#     them are tested before any other check: each names what the batch
#     replaces or deletes and what the container must still hold there,
#     the state the client last confirmed.
#     "h<sha256>:<size>:<mtime>./name": a regular file (not a symlink),
#     with that sha256 where sha256sum is found and <sha256> is not "",
#     else that size and mtime (seconds);
#     "a./name": nothing at all;
#     "o<sha256>,<sha256>./name" (any number): one of these sha256s, "-" for
#     nothing at all (what the client sent without an ack, or what was
#     there before); a regular file passes where sha256sum is not found;
#     "n<count>./dir": at most <count> entries at and under it (find's),
#     so a delete of the directory takes nothing the client never saw.
#     Each that fails is reported on stdout as "C<now>./name\0", <now>
#     being what is there: its sha256 (or "<size>:<mtime>", as compared),
#     "-" for nothing, "!" for something else than a regular file, "+<n>"
#     for the entries under a directory; then
#     the script exits 5 with nothing below $1 changed, and the caller
#     sends the batch again without those names.
#  2b. Moves, after every check: first, before anything changes, each
#     source must be a regular file reached through no symlink, whose
#     sha256 is the one the client confirmed there; else "M./src\0" is
#     reported for each that is not and the script exits 6 with nothing
#     changed (the client sends the batch again whole). Then each: dst must
#     not be a directory nor reached through a symlink, its missing parents
#     are made (tar fills their modes in), the source is renamed aside to
#     ".livesync-mv.<pid>" in dst's directory (one rename takes whatever
#     the latest save left) and hashed there: one that is no longer a
#     regular file, or differs (a save that landed after the check), goes
#     back, unless the container made the source again since; else it
#     gets <mode> and is renamed over dst
#     (rename(2): atomic, and it replaces a link rather than follow it);
#     a copy goes through ".livesync-cp.<pid>" in dst's
#     directory, hashed there (the source checked before may have been
#     written since: a copy of a file the container changed in place
#     meanwhile put the container's bytes under the local name, TestModel
#     seed 15561879248287108722 round 706), renamed over dst likewise. One that fails exits 6 too: what
#     was moved holds the right content, and the whole batch comes again.
#     A moved source is deleted by the batch (step 3) if the client says so.
#  2c. A patch (mode "p": stdin holds the patch's literal bytes; "q": the
#     same gzip-compressed, unpacked beside the file first), after
#     the moves, as arguments among the checks: "P<old>:<new>:<mode>:<bs>./name"
#     (sha256 of the file the container holds and of the new one, the new
#     mode, the block size), then "B<start>:<count>" (that many blocks of
#     the old file from block <start>) and "L<len>" (that many bytes of
#     stdin), in the new file's order, then "E". The old file is checked
#     with the moves' sources, before anything changes (a regular file
#     reached through no symlink, where sha256sum is found; <old> is not
#     hashed: what is built from it is); the new one is built in
#     ".livesync-patch.<name>" beside it, hashed against <new>, given
#     <mode>, and renamed over it; anything else (the old file changed, a
#     short read of stdin, a hash that differs) removes the temporary file
#     and exits 7, the old file as it was, and the client sends the file
#     whole. A patch is not checked against <old> itself: its exec
#     carries the file's precondition where the client has one (see
#     above), which a change the blocks would not carry (bytes appended
#     past the last one) fails with exit 5, before anything is built.
#  3. Deletes, with rm -rf and never a trailing slash, so a symlink is
#     removed, not followed. They run before the tar so a type change
#     (dir→file) extracts cleanly.
#  3b. Takes, "D" + a file's precondition: a file deleted only if it still
#     holds what the precondition says at the moment it goes (see swap):
#     passing the preconditions above tells only that nothing changed
#     before them, and a container save landing after them was deleted.
#  4. rmdirs, deepest first: a directory that still holds something stays.
#  5. The tar. `tar -o` (don't restore owner) means the same in GNU tar and
#     busybox tar; mtimes are kept so an initial sync against an image
#     without sha256sum/md5sum can still compare size+mtime. A "z" tar goes
#     through `gzip -dc` first, not `tar -z` (busybox may be built without
#     it); sh has no pipefail, so gzip's status comes back on fd 3 through
#     the command substitution, whose own status is tar's.
#  5b. Places, "S" + a file's precondition: the tar brought the file in
#     beside its path, as ".livesync-new.<name>", and it replaces the path
#     only if the path still holds what the precondition says at that
#     moment (see swap). A patch's result and a move's or copy's
#     destination go the same way where a precondition names their path.
#     A take or a place that finds its path changed leaves it as the
#     container holds it, reports it as a precondition does
#     ("C<now>./name"), and the script ends with status 8 once the rest of
#     the batch is done.
#  6. chmods ("555./dir", deepest first, best effort): directory modes that
#     lack u+rwx, applied after their contents exist (busybox tar as
#     non-root never chmods, and a 0555 directory created first refused its
#     children).
#
# In a helper container (helper.sh defines LIVESYNC_ROOTFS and
# livesync_inroot, see HelperArgv) $1 is reached through the target's
# /proc/PID/root; with LIVESYNC_OWNER (a root helper writing for a non-root
# target) tar restores the archive's uid:gid, which is that owner, and the
# directories this script creates get it too: each one it makes on the way
# to $1, never one that was there.
#
# Shell loops over "$@" run builtins only, except where a link is replaced
# or a mode fixed, and the deletes go to one rm. On failure the script adds
# the container user's uid to stderr for the error message, and a missing
# tar exits 127 with its own marker.
set -e
fail() { s=$?; echo "livesync: $1 failed" >&2; echo "livesync: uid $(id -u 2>/dev/null || echo unknown)" >&2; exit $s; }
root=$1 mode=$2 file=$3 nc=$4 nr=$5 nm=$6 own=${LIVESYNC_OWNER:-} o=-o
shift 6
if [ -n "${LIVESYNC_ROOTFS:-}" ]; then root=$(livesync_inroot "$root") || exit; fi
[ -z "$own" ] || o=
if { [ "$mode" = x ] || [ "$mode" = z ]; } && ! command -v tar >/dev/null 2>&1; then echo "livesync: tar not found" >&2; exit 127; fi
if [ "$mode" = z ] && ! command -v gzip >/dev/null 2>&1; then echo "livesync: gzip not found" >&2; exit 1; fi
if [ -z "$file" ] && { [ -e "$root" ] || [ -L "$root" ]; } && [ ! -d "$root" ]; then echo "livesync: conflict: not a directory" >&2; exit 3; fi
if [ ! -d "$root" ] && [ -z "$own" ]; then mkdir -p "$root" || fail mkdir; fi
if [ ! -d "$root" ]; then
  # What mkdir -p would make, one directory at a time below the deepest
  # that exists, each chowned ($root is absolute, its links resolved by
  # livesync_inroot); one made meanwhile by another exec is left as it is.
  a=$root
  while [ -n "$a" ] && [ ! -d "$a" ]; do a=${a%/*}; done
  rest=${root#"$a"}
  while [ -n "$rest" ]; do
    rest=${rest#/} c=${rest%%/*} rest=${rest#"$c"}
    [ -n "$c" ] || continue
    a=$a/$c
    if mkdir -- "$a" 2>/dev/null; then chown "$own" -- "$a" || fail chown; elif [ ! -d "$a" ]; then mkdir -- "$a" || fail mkdir; fi
  done
fi
cd "$root" || fail cd
if [ -n "$file" ] && [ -d "$file" ] && [ ! -L "$file" ]; then echo "livesync: conflict: a directory" >&2; exit 3; fi
# 1b. A tar behind preconditions is staged whole before they are tested
# (the stream loop stages every frame already): fed from the wire, a file
# could be replaced while its bytes were still coming, long after its check,
# and a container write that landed in between was lost under it (an atomic
# save made 1 ms after the local one). Staged, the check is followed at once
# by what it guards. In $TMPDIR as the loop's stage file is, under a name of
# its kind (built-in ignores), and made with noclobber: never through a link
# another process left there. Where $TMPDIR takes no file, the tar is read
# from the wire as before.
if [ -z "${livesync_stage:-}" ] && [ "$nc" -gt 0 ] && { [ "$mode" = x ] || [ "$mode" = z ]; } && command -v cat >/dev/null 2>&1; then
  case ${1:-} in
  h*|a*|n*|o*|U*)
    st="${TMPDIR:-/tmp}/livesync-frame.$$"
    rm -f -- "$st" 2>/dev/null || :
    if (umask 077; set -C; : >"$st") 2>/dev/null; then
      trap 'rm -f -- "$st"' EXIT
      cat >>"$st" || fail stage
      exec <"$st"
    fi ;;
  esac
fi
# pre TOKEN PATH: whether PATH holds what TOKEN, a precondition (see
# above), expects; n is what it holds, as a failure reports it.
pre() {
  e=${1%%./*} n=-
  case $1 in
  n*) n=$(find "$2" 2>/dev/null | wc -l) || :; n=$((n)); [ "$n" -le "${e#n}" ] && return; n=+$n; return 1 ;;
  o*)
    if [ -L "$2" ] || { [ -e "$2" ] && [ ! -f "$2" ]; }; then n='!'
    elif [ -e "$2" ]; then hashes || return 0; n=$(sha256sum <"$2") || n='?'; n=${n%% *}; fi
    case ,${e#?}, in *,"$n",*) return 0 ;; esac
    return 1 ;;
  esac
  # "a" expects "-" as the sha256, so that a file there is hashed.
  e=${e#?}; [ -n "$e" ] || e=-::
  if [ -L "$2" ] || { [ -e "$2" ] && [ ! -f "$2" ]; }; then n='!'
  elif [ ! -e "$2" ]; then e=${e%%:*}
  elif [ -n "${e%%:*}" ] && hashes; then n=$(sha256sum <"$2") || n='?'; n=${n%% *}; e=${e%%:*}
  else n=$(stat -c %s:%Y -- "$2") || n='?'; e=${e#*:}; fi
  [ "$n" = "$e" ]
}
hs=
hashes() { if [ -z "$hs" ]; then if command -v sha256sum >/dev/null 2>&1; then hs=y; else hs=n; fi; fi; [ "$hs" = y ]; }
# Every component of $1 ("./a/b") that exists is not a symlink.
nolink() { q=. r=${1#./}; while :; do q=$q/${r%%/*}; [ ! -L "$q" ] || return 1; case $r in */*) r=${r#*/} ;; *) return 0 ;; esac; done; }
# same A B: whether A and B are one file. -ef is in every sh an image has
# (busybox, dash, bash, mksh); where the test lacks it, it is false (swap
# then leaves what it placed).
# shellcheck disable=SC3013
same() { [ "$1" -ef "$2" ] 2>/dev/null; }
# back TAKEN NAME: what was taken aside from NAME (a swap's old file, a
# move's source found changed or not put) goes back to NAME, unless the
# container made NAME again since: that is newer, and stays. TAKEN goes.
back() {
  if [ -e "$1" ] || [ -L "$1" ]; then ln -- "$1" "$2" 2>/dev/null || [ -e "$2" ] || [ -L "$2" ] || mv -f -- "$1" "$2" || :; fi
  rm -f -- "$1" 2>/dev/null || :
}
# unswap TOKEN: ends what a batch killed mid-way (a stream fenced, an exec
# cut) left of its place or take of the path TOKEN, its precondition,
# names (see swap): what it had renamed aside goes back where the path is
# missing; where the killed batch had linked its file in and what it took
# aside fails TOKEN (a save that landed after its check), that goes back
# too, as swap would have done; else it goes. The staged file goes.
unswap() {
  xp=./${1#*./}
  nolink "${xp%/*}" || return 0
  xn=${xp%/*}/.livesync-new.${xp##*/}
  for xo in "${xp%/*}/.livesync-old.${xp##*/}".*; do
    [ -e "$xo" ] || [ -L "$xo" ] || continue
    if [ ! -e "$xp" ] && [ ! -L "$xp" ]; then
      back "$xo" "$xp"
    elif [ -f "$xn" ] && same "$xp" "$xn" && ! pre "$1" "$xo"; then
      mv -f -- "$xo" "$xp" || :
    fi
    rm -f -- "$xo" 2>/dev/null || :
  done
  rm -f -- "$xn" 2>/dev/null || :
}
# 1c. The recoveries ("U" + a precondition) lead the list: before anything
# is tested, the paths a killed batch left are as it found them, or as it
# would have left them.
i=0
for a; do
  [ $i -lt "$nc" ] || break
  case $a in U*) unswap "${a#U}" ;; *) break ;; esac
  i=$((i+1))
done
# 2. Preconditions first (sync-back's; see above), all of them.
i=0 c=0
for a; do
  [ $i -lt "$nc" ] || break
  case $a in U*) i=$((i+1)); continue ;; h*|a*|n*|o*) ;; *) break ;; esac
  i=$((i+1)) p=./${a#*./}
  pre "$a" "$p" || { printf 'C%s%s\0' "$n" "$p"; c=1; }
done
[ $c = 0 ] || exit 5
# swap NEW TOKEN: NEW, a file this script made in the directory of the path
# TOKEN names ("" to delete it), replaces that path if it held what TOKEN,
# a precondition, expects, and no write that lands meanwhile is lost. What
# is there is renamed aside (.livesync-old.<name>.PID: one rename takes whatever
# the latest save left) and NEW is linked in at once, which fails where
# anything was made at the path since: that is newer, and stays. Only then
# is what was taken aside checked, so that the path is missing for no
# longer than ln takes to start (a reader may find nothing there, as it
# may while tar replaces a file). If that fails (a save landed after the
# preconditions were tested), it goes back, unless the container saved
# there again since. A path left as the container holds it is reported as
# a precondition is ("C<now>./name"), with c set, and the script ends with
# status 8. Where the file system has no hard links, NEW is renamed over
# the path instead.
swap() {
  xp=./${2#*./} xl=
  xo=${xp%/*}/.livesync-old.${xp##*/}.$$
  rm -f -- "$xo" 2>/dev/null || :
  if [ -e "$xp" ] || [ -L "$xp" ]; then mv -f -- "$xp" "$xo" || return; fi
  if [ -n "$1" ]; then
    if ln -- "$1" "$xp" 2>/dev/null; then xl=y
    elif [ -e "$xp" ] || [ -L "$xp" ]; then
      pre "$2" "$xp" || :; printf 'C%s%s\0' "$n" "$xp"; c=1
      rm -f -- "$xo" "$1" 2>/dev/null || :
      return 0
    else mv -f -- "$1" "$xp" || return; fi
  fi
  if ! pre "$2" "$xo"; then
    printf 'C%s%s\0' "$n" "$xp"; c=1
    if [ -z "$1" ]; then
      back "$xo" "$xp"
    elif [ -z "$xl" ] || same "$xp" "$1"; then
      if [ -e "$xo" ] || [ -L "$xo" ]; then mv -f -- "$xo" "$xp" || :; else rm -f -- "$xp" || :; fi
    fi
  fi
  rm -f -- "$xo" ${1:+"$1"} 2>/dev/null || :
}
# put NEW NAME ARGS...: NEW over NAME, through swap where one of ARGS'
# preconditions (the first $nc) names NAME, else renamed over it.
put() {
  xn=$1 xd=$2 xi=0; shift 2
  for xa; do
    [ $xi -lt "$nc" ] || break
    xi=$((xi+1))
    case $xa in h*|a*|o*) [ "./${xa#*./}" != "$xd" ] || { swap "$xn" "$xa"; return; } ;; n*) ;; *) break ;; esac
  done
  mv -f -- "$xn" "$xd"
}
# 2b. The moves' sources, all of them.
i=0 hs=
for a; do
  [ $i -lt "$nc" ] || break
  i=$((i+1))
  case $a in m*|c*|P*) ;; *) continue ;; esac
  e=${a%%./*} p=./${a#*./} n='!'
  [ -n "$hs" ] || if command -v sha256sum >/dev/null 2>&1; then hs=y; else hs=n; fi
  # A patch's old file is not hashed here: what is built from it is.
  case $a in P*) if [ "$hs" = y ] && nolink "$p" && [ -f "$p" ]; then continue; fi; printf 'M%s\0' "$p"; exit 7 ;; esac
  if [ "$hs" = y ] && nolink "$p" && [ -f "$p" ]; then n=$(sha256sum <"$p") || n='?'; n=${n%% *}; fi
  [ "$n" = "${e#?}" ] || { printf 'M%s\0' "$p"; c=1; }
done
[ $c = 0 ] || exit 6
# 2. Checks.
i=0
for a; do
  [ $i -lt "$nc" ] || break
  i=$((i+1)) p=${a#?}
  case $a in
  p*) if [ -L "$p" ]; then rm -f -- "$p" || fail rm; mkdir -- "$p" || fail mkdir; [ -z "$own" ] || chown "$own" -- "$p" || fail chown; printf 'R%s\0' "$p"; fi ;;
  k*) if [ -L "$p" ]; then printf 'livesync: symlink in the way: %s\n' "$p" >&2; exit 4; fi ;;
  w*) [ ! -d "$p" ] || chmod u+rwx -- "$p" 2>/dev/null || : ;;
  m*|c*) k=${a%"${a#?}"} sp=./${a#*./} ks=${a%%./*}; ks=${ks#?} ;;
  t*)
    d=./${a#*./} md=${a%%./*}
    if ! nolink "$d" || [ -d "$d" ] || ! mkdir -p -- "${d%/*}" 2>/dev/null; then printf 'livesync: move: %s is in the way\n' "$d" >&2; exit 6; fi
    if [ "$k" = m ]; then
      t=${d%/*}/.livesync-mv.$$
      rm -f -- "$t" && mv -f -- "$sp" "$t" 2>/dev/null && { [ ! -L "$t" ] && [ -f "$t" ] && n=$(sha256sum <"$t") && [ "${n%% *}" = "$ks" ] && chmod "${md#t}" -- "$t" 2>/dev/null && put "$t" "$d" "$@" 2>/dev/null || { back "$t" "$sp"; false; }; }
    else
      t=${d%/*}/.livesync-cp.$$
      rm -f -- "$t" && cp -- "$sp" "$t" 2>/dev/null && n=$(sha256sum <"$t") && [ "${n%% *}" = "$ks" ] && chmod "${md#t}" -- "$t" && { [ -z "$own" ] || chown "$own" -- "$t"; } && put "$t" "$d" "$@" || { rm -f -- "$t"; false; }
    fi || { printf 'livesync: move to %s failed\n' "$d" >&2; exit 6; } ;;
  P*)
    pf=./${a#*./} ph=${a%%./*}; ph=${ph#P?*:} pt=${pf%/*}/.livesync-patch.${pf##*/}
    pn=${ph%%:*} ph=${ph#*:}; pm=${ph%%:*} pb=${ph#*:}
    rm -f -- "$pt" && [ ! -e "$pt" ] && [ ! -L "$pt" ] && exec 4>"$pt" || exit 7
    if [ "$mode" = q ]; then
      # The bytes come gzip-compressed: unpacked beside, read from fd 5.
      pl=${pf%/*}/.livesync-lit.${pf##*/}
      { rm -f -- "$pl" && [ ! -e "$pl" ] && [ ! -L "$pl" ] && gzip -dc >"$pl" && exec 5<"$pl"; } || { rm -f -- "$pt" "$pl"; exit 7; }
      rm -f -- "$pl"
    else exec 5<&0; fi ;;
  B*) s=${a#B}; dd if="$pf" bs="$pb" skip="${s%%:*}" count="${s#*:}" 2>/dev/null >&4 || { rm -f -- "$pt"; exit 7; } ;;
  L*)
    s=${a#L} q=$((${a#L}/65536)); s=$((s%65536))
    { [ $q = 0 ] || dd bs=65536 count=$q iflag=fullblock 2>/dev/null; [ $s = 0 ] || dd bs=$s count=1 iflag=fullblock 2>/dev/null; } <&5 >&4 || { rm -f -- "$pt"; exit 7; } ;;
  E)
    exec 4>&- 5<&-
    n=$(sha256sum <"$pt") || n=
    if [ "${n%% *}" = "$pn" ] && chmod "$pm" -- "$pt" && { [ -z "$own" ] || chown "$own" -- "$pt"; } && put "$pt" "$pf" "$@"; then :
    else rm -f -- "$pt"; printf 'livesync: patch of %s failed\n' "$pf" >&2; exit 7; fi ;;
  esac
done
shift "$nc"
# 3. Deletes: whatever follows the rmdirs and chmods.
[ $# -eq $((nr+nm)) ] || (shift $((nr+nm)); exec rm -rf -- "$@") || fail rm
# 4. rmdirs.
i=0
for a; do
  [ $i -lt "$nr" ] || break
  i=$((i+1))
  case $a in D*) swap '' "${a#D}" || fail rm ;; *) rmdir -- "$a" 2>/dev/null || : ;; esac
done
shift "$nr"
# 5. The tar, after what a killed exec may have left under the names of
# the files it brings aside (see 6).
i=0
for a; do
  [ $i -lt "$nm" ] || break
  i=$((i+1))
  case $a in S*) p=./${a#*./}; rm -f -- "${p%/*}/.livesync-new.${p##*/}" || fail rm ;; *) break ;; esac
done
[ "$mode" != x ] || tar -x ${o:+"$o"} -f - || fail tar
if [ "$mode" = z ]; then
  zs=$({ { gzip -dc 3>&-; echo $? >&3; } | tar -x ${o:+"$o"} -f - >&2 3>&-; } 3>&1) || fail tar
  [ "$zs" = 0 ] || fail gzip
fi
# 6. chmods.
i=0
for a; do
  [ $i -lt "$nm" ] || break
  i=$((i+1))
  case $a in
  S*)
    p=./${a#*./}; t=${p%/*}/.livesync-new.${p##*/}
    if [ -f "$t" ] && [ ! -L "$t" ]; then swap "$t" "${a#S}" || fail place; fi ;;
  *) chmod "${a%%./*}" -- "./${a#*./}" 2>/dev/null || : ;;
  esac
done
[ $c = 0 ] || exit 8
