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
# through dd with iflag=fullblock,
# which reads exactly that much from a pipe in busybox and GNU; busybox
# `head -c` and busybox `tar -x` read past the end of what they need, so
# tar only ever sees a pipe that dd fills with the frame's bytes. Chunks
# are read 64 KiB per block so that dd's buffer stays small (the client
# cuts every chunk but the last in whole blocks, so each costs one dd; up
# to 4 MiB); a whole tar of one frame is at most 1 MiB, read in one block,
# so dd has taken all of it from stdin before the apply may stop reading.
#
# Each batch runs applyScript unchanged (as the function livesync_apply) in
# a command substitution (a subshell: its `exit`s end the batch, not the
# loop), with the tar on its stdin, its stdout on the loop's (fd 3) and its
# stderr captured; what a chunked batch leaves unread is drained so the
# next header starts where it should. A one-frame "x" batch (an edit) costs
# the container three processes: the subshell, dd and tar. Its tar reads the
# frame through dd itself: inside the subshell, tar is a function that runs
# `dd | command tar`, so the apply's checks and deletes run in the subshell
# with no pipeline (and no process of its own) in front of it. The function
# first writes SOH to the captured stderr: without it, the apply stopped
# before its tar, and the loop drains the frame. Then the loop acks on stdout, after
# the batch's own "R./dir\0" reports: the batch's stderr as "e<TEXT>\0" if
# it wrote any (it has no NUL: it is messages), then "K<SEQ> <STATUS>\0". A
# batch's whole answer is on one stream, so a batch that writes no stderr
# costs one message back on every hop to the client, not two. The loop
# ends on stdin EOF (the client closed the stream, exited or was killed
# and its connection dropped), leaving no process in the container; a
# malformed header also ends it. So does a batch that exits 75, a helper's
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
if ! { command -v dd >/dev/null 2>&1 && [ "$(printf ab | dd bs=2 count=1 iflag=fullblock 2>/dev/null)" = ab ]; }; then printf 'N\0'; exit 0; fi
printf 'Y\0'
exec 3>&1
livesync_apply() {
livesync_apply_body
}
livesync_marks_body
livesync_scan() {
livesync_scan_body
}
livesync_download() {
livesync_download_body
}
rd() { q=$(($1/65536)) r=$(($1%65536)); if [ $q -gt 0 ]; then dd bs=65536 count=$q iflag=fullblock 2>/dev/null || return 1; fi; if [ $r -gt 0 ]; then dd bs=$r count=1 iflag=fullblock 2>/dev/null || return 1; fi; }
# shellcheck disable=SC2034 # used by the eval'd arguments ("$nl", see shellWords)
nl='
'
soh=$(printf '\001')
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
  seq=${hd%/*}
  case $seq in ''|*[!0-9]*) exit 2 ;; esac
  if [ -z "$args" ]; then [ "$hd" = "$seq" ] || exit 2; printf 'K%s 0\0' "$seq"; continue; fi
  case $hd in
  */*)
    n=${hd#*/}
    case $n in ''|*[!0-9]*) exit 2 ;; esac
    eval "set -- $args"
    if [ "$n" -gt 0 ] && [ "$2" = x ]; then
      # The frame's length goes by a name apply.sh never sets: the apply runs
      # in this shell and its own variables (n among them) would change it.
      livesync_len=$n
      # shellcheck disable=SC2329,SC2317 # tar is called by livesync_apply
      e=$(if command -v tar >/dev/null 2>&1; then tar() { printf '\001' >&2; dd bs="$livesync_len" count=1 iflag=fullblock 2>/dev/null | command tar "$@"; }; fi
        { livesync_apply "$@"; } 2>&1 >&3 3>&-); s=$?
      case $e in
      *"$soh"*) e=${e%%"$soh"*}${e#*"$soh"} ;;
      *) dd bs="$n" count=1 iflag=fullblock >/dev/null 2>&1 || exit 2 ;;
      esac
    elif [ "$n" -gt 0 ]; then
      e=$(dd bs="$n" count=1 iflag=fullblock 2>/dev/null | { livesync_apply "$@"; } 2>&1 >&3 3>&-); s=$?
    else
      e=$( { eval "livesync_apply $args"; } </dev/null 2>&1 >&3 3>&-); s=$?
    fi
    [ "$s" != 75 ] || { printf '%s\n' "$e" >&2; exit 75; }
    [ -z "$e" ] || printf 'e%s\n\0' "$e"; printf 'K%s %s\0' "$seq" "$s" ;;
  *)
    { while read -r n; do case $n in ''|*[!0-9]*) exit 2 ;; esac; [ "$n" -gt 0 ] || break; rd "$n" || exit 2; done; } | {
      e=$( { eval "livesync_apply $args"; } 2>&1 >&3 3>&-); s=$?
      [ "$s" != 75 ] || { printf '%s\n' "$e" >&2; exit 75; }
      cat >/dev/null; [ -z "$e" ] || printf 'e%s\n\0' "$e"; printf 'K%s %s\0' "$seq" "$s"; } || [ $? != 75 ] || exit 75 ;;
  esac
done
