# shellcheck shell=sh
# stream.sh is the remote side of a persistent stream: one exec per target
# that applies batch after batch until its stdin ends. It first probes its
# framing tool and prints "Y\0" (ready) or "N\0" (missing: the caller falls
# back to an exec per batch, and the loop exits).
#
# Frames on stdin:
#
# 	"SEQ WORDS\n": applyScript's arguments as shell words on one line
# 	  (see shellWords), then the tar in chunks "LEN\n" + LEN bytes, ending
# 	  with "0\n";
# 	"SEQ/LEN WORDS\n": the same with the whole tar, LEN bytes, right after
# 	  the line (LEN 0: no tar). The client sends a batch whose archive fits
# 	  in 1 MiB (an edit, a few files) this way: it costs the container
# 	  two processes fewer than chunks do (the chunk reader's subshell and
# 	  the drain), and the shell forks are most of what a small batch costs
# 	  it;
# 	"SEQ=NONCE WORDS\n": a run of one of the loop's other scripts, named by
# 	  the first word (livesync_scan: scan.sh, livesync_download:
# 	  download.sh), with the rest as its arguments and no stdin. Its output
# 	  goes out as it is, between "Z\0" and "\0Z<NONCE>\0" (NONCE: hex, new
# 	  per frame from the client, so no output can end it early; the NUL
# 	  before it ends whatever token a cut-short output left open, and the
# 	  client drops it), then its stderr and ack as a batch's. A scan costs
# 	  no exec, and no process but its find (and its subshell): the loop
# 	  reads its mount namespace and makes its markers once, and before
# 	  each scan reads the time and stamps a marker in its own shell with
# 	  builtins (livesync_mark, see marks.sh);
# 	"SEQ\n": a heartbeat ("SEQ/LEN\n" without words is malformed).
#
# Lines are read by the shell's read builtin, which reads a pipe byte by
# byte and so never past the newline. Every read of a counted length goes
# through dd with iflag=fullblock (livesync_rd), which reads exactly that
# much from a pipe in busybox and GNU; busybox `head -c` and busybox `tar -x`
# read past the end of what they need. Chunks are read 64 KiB per block so
# that dd's buffer stays small (the client cuts every chunk but the last in
# whole blocks, so each costs one dd; up to 4 MiB); a length of at most 1 MiB
# is read in one block.
#
# Every frame is whole before anything of it is applied: its tar goes into
# the loop's stage file (livesync-frame.PID in $TMPDIR, or /tmp) and the
# apply reads it from there once the frame's last byte came. A frame cut
# short (stdin ended, the client gave up on the stream) applies nothing: no
# delete of it runs, and no file is left truncated under its real name, as
# a tar fed from the wire was (a 2 MiB file became the 1 MiB that had come).
# dd exits 0 after an early end, with what it got: livesync_rd checks its
# count of records.
#
# But for a parted frame, "SEQ~ WORDS\n", whose batch only copies (a plain
# tar; no precondition, recovery, move, patch or delete: see parted in
# stream.go), an initial sync's or a burst's: its chunks come as above, and a
# chunk "LEN.\n" ends a part, whole tar entries up to there (the client cuts
# parts at the end of an entry, every 2 MiB or more). The batch's apply runs
# in the background from the frame's first line, its tar reading the loop's
# FIFO (livesync-frame.PID.p), and each part, staged whole in
# livesync-frame.PID.0 or .1, goes into the FIFO by a cat of its own while
# the next part comes: the transfer and the extraction overlap, as in a tar
# pipe, where a frame staged whole took them in turn. A cut frame leaves the
# whole files of the parts that came, never a truncated one, nor anything of
# a part cut short; the loop ends once its apply did (see livesync_cut), and
# the client sends the batch again. The frame is acked once the apply ended,
# as any other. Where the loop could not make its FIFO (no mkfifo), a parted
# frame is staged whole.
#
# The fence: a container never applies a frame of a stream the client has
# replaced. The client sends "F<FAMILY>\n" first (FAMILY: hex, one per client
# and target); the loop records itself as livesync-stream.FAMILY.PID beside
# its stage file, with its start time, and before it reads its first frame
# kills every loop recorded under FAMILY before it, with every process under
# it (livesync_kill). A loop the client gave up on may still have frames
# held in flight (a stalled link, a loop or tar frozen) that arrive after
# the new stream's batches were acked; nothing is left to read them. Kill,
# not a lock or an epoch checked per frame: a frame that is checked and then
# applied can be frozen between the two (a stopped tar resumes and writes
# the old content over the new), and a lock held by a frozen loop would stop
# every later stream; a killed process writes no more. The start time tells
# the recorded loop from a process that took its PID since. The loop
# answers "N" (an exec per batch) where it has no writable temp directory
# or no /proc of its own to find its processes in.
#
# Each batch runs applyScript unchanged (as the function livesync_apply) in
# a command substitution (a subshell: its `exit`s end the batch, not the
# loop), with the stage file (or /dev/null) on its stdin, its stdout on the
# loop's (fd 3) and its stderr captured. A one-frame "x" batch (an edit)
# costs the container three processes: dd, the subshell and tar. Then the
# loop acks on stdout, after
# the batch's own "R./dir\0" reports: the batch's stderr as "e<TEXT>\0" if
# it wrote any (it has no NUL: it is messages), then "K<SEQ> <STATUS>\0". A
# batch's whole answer is on one stream, so a batch that writes no stderr
# costs one message back on every hop to the client, not two. The loop
# ends on stdin EOF (the client closed the stream, exited or was killed
# and its connection dropped), leaving no process in the container; a
# malformed header or a frame cut short also ends it. So does a batch that exits 75, a helper's
# target process that is gone (see helper.sh): with that status and the
# batch's stderr on the loop's own, and no ack, so the caller finds the
# process again before the batch is sent again.
#
# livesync_apply_body, livesync_marks_body, livesync_scan_body and
# livesync_download_body stand for apply.sh, marks.sh, scan.sh and
# download.sh: stream_script.go puts their text there.
# What the loop itself keeps while a script runs goes by names that start
# with livesync_, which no script sets (apply.sh runs in this shell's
# subshell, and its variables would change the loop's).
# livesync_rd copies $1 bytes of stdin to stdout, and fails unless all of
# them came.
livesync_rd() {
  livesync_rq=$(($1/65536)) livesync_rr=$(($1%65536))
  if [ "$1" -le 1048576 ]; then livesync_rq=1 livesync_rr=$1; elif [ $livesync_rr -gt 0 ]; then livesync_rd_ 65536 "$livesync_rq" || return 1; livesync_rq=1; else livesync_rr=65536; fi
  livesync_rd_ "$livesync_rr" "$livesync_rq"
}
livesync_rd_() {
  LC_ALL=C dd bs="$1" count="$2" iflag=fullblock 2>"$livesync_stage.e" || return 1
  livesync_rl=''; read -r livesync_rl <"$livesync_stage.e" || :
  [ "$livesync_rl" = "$2+0 records in" ]
}
# livesync_rmstage removes a loop's stage file $1 and what goes beside it:
# dd's count (.e), a parted frame's parts (.0, .1), its apply's stderr (.x)
# and the FIFO (.p).
livesync_rmstage() { rm -f -- "$1" "$1.e" "$1.0" "$1.1" "$1.x" "$1.p"; }
# livesync_stat sets livesync_fs to the fields of /proc/$1/stat after the
# name (which may hold spaces and parentheses): state, ppid, pgrp, …; "" when
# there is no such process.
livesync_stat() {
  livesync_fs=''
  { read -r livesync_fs <"/proc/$1/stat"; } 2>/dev/null || :
  livesync_fs=${livesync_fs##*') '}
}
# livesync_kill kills process $1 and every process under it or in its group:
# stopped first, so that none forks again, until a walk of /proc finds no new
# one; then killed, and waited for until each is gone or a zombie.
livesync_kill() {
  livesync_fv=$1
  kill -STOP "$livesync_fv" 2>/dev/null || return 0
  livesync_fk=" $livesync_fv " livesync_fn=1
  while [ $livesync_fn = 1 ]; do
    livesync_fn=0
    for livesync_fq in /proc/[0-9]*; do
      livesync_fq=${livesync_fq#/proc/}
      case $livesync_fk in *" $livesync_fq "*) continue ;; esac
      [ "$livesync_fq" != $$ ] || continue
      livesync_stat "$livesync_fq"
      # shellcheck disable=SC2086 # numbers and a state letter
      set -- $livesync_fs
      case $livesync_fk in *" ${2:-} "*) ;; *) [ "${3:-}" = "$livesync_fv" ] || continue ;; esac
      kill -STOP "$livesync_fq" 2>/dev/null || continue
      livesync_fk="$livesync_fk$livesync_fq " livesync_fn=1
    done
  done
  for livesync_fq in $livesync_fk; do kill -KILL "$livesync_fq" 2>/dev/null || :; done
  for livesync_fq in $livesync_fk; do
    livesync_fn=0
    while [ $livesync_fn -lt 100000 ]; do
      livesync_stat "$livesync_fq"
      # shellcheck disable=SC2086
      set -- $livesync_fs
      case ${1:-Z} in Z|X) break ;; esac
      livesync_fn=$((livesync_fn+1))
    done
  done
}
# livesync_fence kills the loops recorded under the family before this one
# (see above) and records this one.
livesync_fence() {
  for livesync_fr in "$livesync_sd/livesync-stream.$livesync_fam".*; do
    livesync_fp=${livesync_fr##*.}
    case $livesync_fp in ''|*[!0-9]*) continue ;; esac
    [ "$livesync_fp" != $$ ] || continue
    livesync_fo=''
    { read -r livesync_fo <"$livesync_fr"; } 2>/dev/null || :
    livesync_stat "$livesync_fp"
    # shellcheck disable=SC2086
    set -- $livesync_fs
    if [ -n "$livesync_fo" ] && [ "${20:-}" = "$livesync_fo" ]; then livesync_kill "$livesync_fp"; fi
    rm -f -- "$livesync_fr"
    livesync_rmstage "$livesync_sd/livesync-frame.$livesync_fp"
  done
  livesync_stat $$
  # shellcheck disable=SC2086
  set -- $livesync_fs
  printf '%s\n' "${20}" >"$livesync_rec"
}
livesync_sd=${TMPDIR:-/tmp}
livesync_stage=$livesync_sd/livesync-frame.$$
livesync_stat $$
# shellcheck disable=SC2086
set -- $livesync_fs
if ! { [ -n "${20:-}" ] && command -v dd >/dev/null 2>&1 && printf 'a\n' | livesync_rd 2 2>/dev/null >"$livesync_stage" && read -r livesync_rl <"$livesync_stage" && [ "$livesync_rl" = a ]; }; then
  rm -f -- "$livesync_stage" "$livesync_stage.e" 2>/dev/null; printf 'N\0'; exit 0
fi
livesync_rec=''
# What the loop made goes when it ends (marks.sh's trap runs this too).
livesync_atexit() { livesync_rmstage "$livesync_stage"; rm -f -- ${livesync_rec:+"$livesync_rec"}; }
# The FIFO of parted frames ("" for none: they are staged whole).
livesync_fifo=$livesync_stage.p
rm -f -- "$livesync_fifo" 2>/dev/null || :
{ command -v mkfifo && command -v cat && mkfifo -m 600 "$livesync_fifo"; } >/dev/null 2>&1 || livesync_fifo=''
# shellcheck disable=SC2034 # run by marks.sh's EXIT trap
livesync_onexit=livesync_atexit
trap livesync_atexit EXIT
trap 'exit 129' HUP
trap 'exit 143' TERM
printf 'Y\0'
IFS= read -r livesync_fam || exit 0
livesync_fam=${livesync_fam#F}
case $livesync_fam in ''|*[!0-9a-f]*) exit 2 ;; esac
livesync_rec=$livesync_sd/livesync-stream.$livesync_fam.$$
livesync_fence
exec 3>&1
livesync_apply() {
livesync_apply_body
}
# livesync_cut ends a parted frame cut short: the parts fed go into the tar,
# nothing more, and the loop exits once its apply ended, so that no process
# of it outlives the loop's record, where a later stream's fence finds and
# kills whatever a frozen one still holds.
livesync_cut() {
  exec 4>&-
  [ -z "$livesync_f" ] || wait "$livesync_f"
  wait "$livesync_ap"
  exit 2
}
livesync_marks_body
livesync_scan() {
livesync_scan_body
}
livesync_download() {
livesync_download_body
}
# shellcheck disable=SC2034 # used by the eval'd arguments ("$nl", see shellWords)
nl='
'
while read -r hd args; do
  case $hd in
  *=*)
    seq=${hd%%=*} livesync_z=${hd#*=}
    case $seq in ''|*[!0-9]*) exit 2 ;; esac
    case $livesync_z in ''|*[!0-9a-f]*) exit 2 ;; esac
    eval "set -- $args"
    case ${1:-} in livesync_scan) livesync_mark ;; livesync_download) ;; *) exit 2 ;; esac
    printf 'Z\0'
    e=$( { "$@"; } </dev/null 2>&1 >&3 3>&-); s=$?
    [ "$s" != 75 ] || { printf '%s\n' "$e" >&2; exit 75; }
    printf '\0Z%s\0' "$livesync_z"
    [ -z "$e" ] || printf 'e%s\n\0' "$e"; printf 'K%s %s\0' "$seq" "$s"; continue ;;
  esac
  seq=${hd%/*} livesync_pt=''
  # A parted frame is staged whole unless the FIFO is still one (a
  # cleaner of $TMPDIR may have taken it).
  case $seq in *"~") seq=${seq%"~"}; [ "$hd" = "$seq~" ] || exit 2; [ ! -p "$livesync_fifo" ] || livesync_pt=y ;; esac
  case $seq in ''|*[!0-9]*) exit 2 ;; esac
  if [ -z "$args" ]; then [ "$hd" = "$seq" ] || exit 2; printf 'K%s 0\0' "$seq"; continue; fi
  case $hd in
  */*)
    n=${hd#*/}
    case $n in ''|*[!0-9]*) exit 2 ;; esac
    if [ "$n" -gt 0 ]; then livesync_rd "$n" >"$livesync_stage" || exit 2; fi ;;
  *)
    # Chunks "LEN\n" (or "LEN.\n") + LEN bytes, up to "0\n"; n is what
    # they held.
    n=0 livesync_end=''
    if [ -n "$livesync_pt" ]; then
      # A parted frame (see above): the apply runs now, reading the FIFO.
      eval "set -- $args"
      { livesync_apply "$@"; } <"$livesync_fifo" >&3 2>"$livesync_stage.x" 3>&- &
      livesync_ap=$! livesync_f='' livesync_pi=0
      exec 4>"$livesync_fifo"
      : >"$livesync_stage.0"
      while read -r livesync_c; do
        livesync_p=${livesync_c%.}
        case $livesync_p in ''|*[!0-9]*) livesync_cut ;; esac
        [ "$livesync_p" -gt 0 ] || { livesync_end=y; break; }
        livesync_rd "$livesync_p" >>"$livesync_stage.$livesync_pi" || livesync_cut
        [ "$livesync_p" != "$livesync_c" ] || continue
        # A part came whole: into the FIFO, once the one before is in.
        [ -z "$livesync_f" ] || wait "$livesync_f"
        cat "$livesync_stage.$livesync_pi" >&4 2>/dev/null &
        livesync_f=$! livesync_pi=$((1-livesync_pi))
        : >"$livesync_stage.$livesync_pi"
      done
      [ -n "$livesync_end" ] || livesync_cut
      [ -z "$livesync_f" ] || wait "$livesync_f"
      [ ! -s "$livesync_stage.$livesync_pi" ] || cat "$livesync_stage.$livesync_pi" >&4 2>/dev/null
      exec 4>&-
      wait "$livesync_ap"; s=$?
      e=''
      [ ! -s "$livesync_stage.x" ] || e=$(cat "$livesync_stage.x")
      : >"$livesync_stage.0"; : >"$livesync_stage.1"; : >"$livesync_stage.x"
      [ "$s" != 75 ] || { printf '%s\n' "$e" >&2; exit 75; }
      [ -z "$e" ] || printf 'e%s\n\0' "$e"; printf 'K%s %s\0' "$seq" "$s"
      continue
    fi
    while read -r livesync_c; do
      livesync_c=${livesync_c%.}
      case $livesync_c in ''|*[!0-9]*) exit 2 ;; esac
      [ "$livesync_c" -gt 0 ] || { livesync_end=y; break; }
      livesync_rd "$livesync_c" || exit 2
      n=$((n+livesync_c))
    done >"$livesync_stage"
    [ -n "$livesync_end" ] || exit 2 ;;
  esac
  eval "set -- $args"
  if [ "$n" -gt 0 ]; then
    e=$( { livesync_apply "$@"; } <"$livesync_stage" 2>&1 >&3 3>&-); s=$?
    : >"$livesync_stage"
  else
    e=$( { livesync_apply "$@"; } </dev/null 2>&1 >&3 3>&-); s=$?
  fi
  [ "$s" != 75 ] || { printf '%s\n' "$e" >&2; exit 75; }
  [ -z "$e" ] || printf 'e%s\n\0' "$e"; printf 'K%s %s\0' "$seq" "$s"
done
