# shellcheck shell=sh
# shellcheck disable=SC2034,SC2329 # the loop (stream.sh) calls these, and scan.sh reads what they set
# marks.sh is the stream loop's side of sync-back's scans (see stream.sh):
# what gives a scan run in the loop (scan.sh, as livesync_scan) its mount
# namespace, its time and its marker without a process of its own. A scan
# run as an exec reads `date +%s` and back-dates a marker with `touch -d`:
# two processes (a fork and an exec each) a second besides its find, which
# is all a scan of a quiet tree needs.
#
# The time: the loop reads `date +%s` once a minute (and whenever a reading
# looks wrong), and between those adds what /proc/uptime moved since, which
# the shell's read builtin takes in with no process. Both count the same
# seconds (the kernel slews them alike; only a step of the wall clock, a
# settimeofday, moves one without the other), but each is read in whole
# seconds, so what comes out is a pair of bounds on the wall clock's
# seconds: livesync_t, never later, is a scan's "now" (it may be a second
# or two early, which only widens the caller's next look back); livesync_h,
# never earlier, bounds the mtime of a file written before the reading (the
# coarse clock that stamps files is never ahead of the wall clock).
#
# The marker: each scan stamps one of a ring of eight files by a redirection
# to it (a builtin, which sets its mtime to now: no process), and the loop
# records bounds of that mtime, read after the stamp. A scan then takes the
# newest file whose mtime is certainly no later than the time it asks for
# ($2 of scan.sh, which the caller sets two seconds before the previous
# scan's now): with a scan a second, the file stamped five seconds
# before. A marker older than asked for lists more, which the caller weeds
# out against its index; a newer one would hide a write: so every bound
# errs towards the older. When no file of the ring qualifies (the loop's
# first scans, after a pause, a clock set forward), the spare one is
# back-dated with `touch -d` as an exec's marker is, and when that fails
# too, the listing is full.
#
# A wall clock set back makes the times the caller holds too late, a marker
# at them too new: once a reading of date is below what the loop derived for
# it, the next scan lists everything (no marker), and the caller starts again
# from that scan's now.
#
# livesync_prep reads, once per loop, the mount namespace the scans report
# (the helper's target's: livesync_pinned in each scan fails once that
# process is gone), makes the ring's directory, which the loop removes when
# it ends (with what the loop's livesync_onexit names), and reads the clock's base. livesync_dir is empty when no temp
# directory is writable: each scan then lists everything, as its exec would.
livesync_prep() {
  [ -z "${livesync_ns+x}" ] || return 0
  livesync_ns=$(readlink "/proc/${LIVESYNC_PID:-self}/ns/mnt" 2>/dev/null) || livesync_ns=''
  livesync_dir=$(mktemp -d "${TMPDIR:-/tmp}/livesync-scan.XXXXXX" 2>/dev/null) || livesync_dir=''
  # shellcheck disable=SC2154 # livesync_onexit: set by stream.sh's loop, or unset
  if [ -n "$livesync_dir" ]; then trap 'rm -rf "$livesync_dir"; ${livesync_onexit:-}' EXIT; trap 'exit 129' HUP; trap 'exit 143' TERM; fi
  livesync_k=0 livesync_t='' livesync_h='' livesync_b='' livesync_full=''
  livesync_base
}
#
# livesync_up sets livesync_u to the whole seconds of /proc/uptime, and
# fails without them.
livesync_up() {
  livesync_u=''
  { read -r livesync_u livesync_idle </proc/uptime; } 2>/dev/null || :
  livesync_u=${livesync_u%%.*}
  case $livesync_u in ''|*[!0-9]*) livesync_u=''; return 1 ;; esac
}
#
# livesync_base reads the wall clock, livesync_d, between two readings of
# the uptime, livesync_b before it and livesync_a after (both empty without
# /proc/uptime: then every scan reads date). A reading below the lowest the
# loop derived for that moment, from the base before or else from the last
# scan's now, means the clock was set back: livesync_full asks the next scan
# for a full listing.
livesync_base() {
  livesync_up || :
  livesync_x=$livesync_u
  livesync_y=$(date +%s 2>/dev/null) || livesync_y=''
  case $livesync_y in ''|*[!0-9]*) livesync_t='' livesync_h='' livesync_b=''; return 1 ;; esac
  livesync_lo=$livesync_t
  if [ -n "$livesync_b" ] && [ -n "$livesync_x" ]; then livesync_lo=$((livesync_d + livesync_x - livesync_a - 1)); fi
  if [ -n "$livesync_lo" ] && [ "$livesync_y" -lt "$livesync_lo" ]; then livesync_full=1; fi
  livesync_d=$livesync_y livesync_b='' livesync_a=''
  if [ -n "$livesync_x" ] && livesync_up; then livesync_b=$livesync_x livesync_a=$livesync_u; fi
}
#
# livesync_now sets livesync_t and livesync_h to the bounds of the wall
# clock's seconds now: date's reading plus the whole seconds the uptime
# moved since, each side widened by what the readings may have cut off
# (the base's date lies between livesync_b and livesync_a + 1 of uptime).
# It reads the base again a minute after the last, and when the uptime is
# missing or went back. livesync_t is empty when date failed.
livesync_now() {
  if [ -z "$livesync_b" ] || ! livesync_up || [ "$livesync_u" -lt "$livesync_a" ] || [ "$livesync_u" -ge $((livesync_b + 60)) ]; then
    livesync_base || return 0
  fi
  if [ -n "$livesync_b" ]; then
    livesync_t=$((livesync_d + livesync_u - livesync_a - 1)) livesync_h=$((livesync_d + livesync_u - livesync_b + 1))
  else
    livesync_t=$livesync_d livesync_h=$livesync_d
  fi
}
#
# livesync_mark runs before each scan, in the loop's own shell (a scan runs
# in a subshell, whose variables end with it): it sets the scan's time and
# stamps file livesync_k of the ring, recording the uptime second it read
# after the stamp (livesync_mu<k>) and the bound of its mtime that the base
# gave then (livesync_mh<k>). The ring moves on once that second is not the
# previous file's, so that its files are eight different seconds however
# many mappings are scanned in one. Without /proc/uptime it stamps none.
livesync_mark() {
  livesync_prep
  livesync_full=''
  livesync_now
  [ -n "$livesync_dir" ] && [ -n "$livesync_b" ] && [ -n "$livesync_t" ] || return 0
  eval "livesync_mu$livesync_k= livesync_mh$livesync_k="
  true 2>/dev/null >"$livesync_dir/$livesync_k" && livesync_up && [ "$livesync_u" -ge "$livesync_a" ] || return 0
  livesync_x=$((livesync_d + livesync_u - livesync_b + 1)) livesync_y=$(((livesync_k + 7) % 8))
  eval "livesync_mu$livesync_k=\$livesync_u livesync_mh$livesync_k=\$livesync_x livesync_y=\${livesync_mu$livesync_y-}"
  [ "$livesync_y" = "$livesync_u" ] || livesync_k=$(((livesync_k + 1) % 8))
}
#
# livesync_pick sets livesync_m to the marker of a scan that looks back to
# the container time $1: the newest file of the ring whose mtime is no later
# than $1 by both its bounds, the one recorded with it and the one the base
# gives now from its uptime second (the first holds unless the clock was set
# forward before the stamp, the second unless it was set back after it).
# Failing that, the spare file back-dated to $1; "" for a full listing:
# after the clock went back, without a writable directory or a time, or for
# a $1 later than now may be.
livesync_pick() {
  livesync_m=''
  [ -z "$livesync_full" ] && [ -n "$livesync_dir" ] && [ -n "$livesync_t" ] || return 0
  case $1 in ''|*[!0-9]*) return 0 ;; esac
  [ "$1" -le "$livesync_h" ] || return 0
  livesync_best='' livesync_bh='' livesync_mu=''
  for livesync_i in 0 1 2 3 4 5 6 7; do
    eval "livesync_mh=\${livesync_mh$livesync_i-} livesync_mu=\${livesync_mu$livesync_i-}"
    if [ -z "$livesync_mh" ] || [ "$livesync_mh" -gt "$1" ]; then continue; fi
    if [ -n "$livesync_b" ]; then [ $((livesync_d + livesync_mu - livesync_b + 1)) -le "$1" ] || continue; fi
    if [ -z "$livesync_best" ] || [ "$livesync_mh" -gt "$livesync_bh" ]; then livesync_best=$livesync_i livesync_bh=$livesync_mh; fi
  done
  if [ -n "$livesync_best" ]; then livesync_m=$livesync_dir/$livesync_best; return 0; fi
  touch -d "@$1" "$livesync_dir/s" 2>/dev/null && livesync_m=$livesync_dir/s
}
