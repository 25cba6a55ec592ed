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
# 	  with "0\n". A line with SEQ alone is a heartbeat and has no chunks.
#
# Lines are read by the shell's read builtin, which reads a pipe byte by
# byte and so never past the newline. Every read of a counted length goes
# through dd with iflag=fullblock,
# which reads exactly that much from a pipe in busybox and GNU; busybox
# `head -c` and busybox `tar -x` read past the end of what they need, so
# tar only ever sees a pipe that dd fills with the frame's bytes. Chunks
# are read 64 KiB per block so that dd's buffer stays small.
#
# Each batch runs applyScript unchanged in a subshell (its `exit`s end the
# batch, not the loop), with the chunks on its stdin; what it leaves unread
# is drained so the next header starts where it should. Then the loop acks:
# "K<SEQ> <STATUS>\0" on stdout, after the batch's own "R./dir\0" reports,
# and "\0\1E<SEQ>\0" on stderr, after the batch's stderr, so the caller knows
# where each stream's part of a batch ends. The loop ends on stdin EOF (the
# client closed the stream, exited or was killed and its connection
# dropped), leaving no process in the container; a malformed header also
# ends it.
#
# livesync_apply stands for apply.sh: stream.go puts its text there.
if ! { command -v dd >/dev/null 2>&1 && [ "$(printf ab | dd bs=2 count=1 iflag=fullblock 2>/dev/null)" = ab ]; }; then printf 'N\0'; exit 0; fi
printf 'Y\0'
rd() { q=$(($1/65536)) r=$(($1%65536)); if [ $q -gt 0 ]; then dd bs=65536 count=$q iflag=fullblock 2>/dev/null || return 1; fi; if [ $r -gt 0 ]; then dd bs=$r count=1 iflag=fullblock 2>/dev/null || return 1; fi; }
# shellcheck disable=SC2034 # used by the eval'd arguments ("$nl", see shellWords)
nl='
'
while read -r seq args; do
  case $seq in ''|*[!0-9]*) exit 2 ;; esac
  if [ -z "$args" ]; then printf 'K%s 0\0' "$seq"; printf '\0\001E%s\0' "$seq" >&2; continue; fi
  { while read -r n; do case $n in ''|*[!0-9]*) exit 2 ;; esac; [ "$n" -gt 0 ] || break; rd "$n" || exit 2; done; } | {
    (eval "set -- $args"
livesync_apply
)
    s=$?; cat >/dev/null; printf 'K%s %s\0' "$seq" "$s"; printf '\0\001E%s\0' "$seq" >&2; }
done
