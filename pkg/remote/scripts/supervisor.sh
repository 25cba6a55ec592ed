# shellcheck shell=sh
# supervisor.sh is the command that --restart process installs in a
# container (see SupervisorCommand), as `sh -c SCRIPT livesync-supervisor
# ARGV...`: it runs ARGV, the container's own command, as its child and
# restarts it when livesync asks (restart.sh sends it USR1). It forwards TERM
# and INT to the child and exits with the child's status once the child is
# gone. A child that exits on its own before livesync ever restarted it ends
# the supervisor the same way, so the container behaves as it did without
# it; after a restart the supervisor stays when the child exits (a bad
# build), keeping the container and so the synced files, until the next ask.
#
# It keeps its state for restart.sh in the first writable of
# /tmp/.livesync-supervisor and /dev/shm/.livesync-supervisor, replaced by a
# rename: "PID GEN STATUS RUNNING CRASHED", its own PID, how many children
# it started, how the last child before the current one ended ("-": none
# yet), whether a child runs (1) or ended on its own (0), and whether that
# last child had ended on its own before livesync asked (1) or was stopped
# by the ask (0). LIVESYNC_STATE_DIRS
# replaces the two directories, in tests.
lsv_state=
for lsv_d in ${LIVESYNC_STATE_DIRS:-/tmp /dev/shm}; do
  if { : >"$lsv_d/.livesync-supervisor.tmp"; } 2>/dev/null; then
    lsv_state=$lsv_d/.livesync-supervisor
    break
  fi
done
lsv_gen=0 lsv_status=- lsv_child='' lsv_ask='' lsv_stop='' lsv_restarted='' lsv_killer='' lsv_trapped='' lsv_fwd='' lsv_crashed=0
lsv_write() {
  [ -n "$lsv_state" ] || return 0
  { printf '%s %s %s %s %s\n' "$$" "$lsv_gen" "$lsv_status" "$1" "$lsv_crashed" >"$lsv_state.tmp" && mv -f "$lsv_state.tmp" "$lsv_state"; } 2>/dev/null || :
}
# A non-interactive shell starts an asynchronous command with stdin on
# /dev/null; the child gets the container's (fd 3). It also starts it with
# INT and QUIT ignored, which no trap undoes without job control (and that
# needs a terminal): a forwarded INT reaches a child that handles it (Go,
# node, most servers install their handler); one that relies on INT's
# default action ignores it. The kubelet stops a container with TERM.
exec 3<&0
# The state goes first: restart.sh returns once it sees the new GEN.
lsv_start() {
  lsv_gen=$((lsv_gen + 1))
  lsv_write 1
  lsv_crashed=0
  "$@" <&3 3<&- &
  lsv_child=$! lsv_fwd=''
}
# lsv_zombie tells whether process $1 ended and waits to be reaped.
lsv_zombie() {
  lsv_z=''
  { read -r lsv_z <"/proc/$1/stat"; } 2>/dev/null || return 1
  case ${lsv_z##*') '} in Z*) return 0 ;; esac
  return 1
}
# lsv_ended stops the timer that kills a child that ignores TERM.
lsv_ended() {
  [ -z "$lsv_killer" ] || kill "$lsv_killer" 2>/dev/null || :
  lsv_killer='' lsv_child=''
}
# The traps only take note; the loop below acts, between its waits.
trap 'lsv_trapped=1 lsv_ask=1' USR1
trap 'lsv_trapped=1 lsv_stop=TERM' TERM
trap 'lsv_trapped=1 lsv_stop=INT' INT
lsv_start "$@"
lsv_idle=''
while :; do
  if [ -z "$lsv_child" ]; then
    # A restarted child ended on its own: wait for the next ask, or the end.
    if [ -n "$lsv_stop" ]; then exit "$lsv_status"; fi
    if [ -n "$lsv_ask" ]; then
      lsv_ask=''
      [ -z "$lsv_idle" ] || kill "$lsv_idle" 2>/dev/null || :
      lsv_idle=''
      echo "livesync-supervisor: starting the process again" >&2
      lsv_start "$@"
      continue
    fi
    [ -n "$lsv_idle" ] || { sleep 2147483647 & lsv_idle=$!; }
    wait "$lsv_idle" || :
    continue
  fi
  # Act on what the traps noted, then wait; again after every trap: one
  # may have cut the wait short (status 128+N), or come right after the
  # child's own end, when waiting again returns 127 (a PID the shell no
  # longer knows) and the status stays the one the last wait returned.
  lsv_st=127 lsv_trapped=1
  while [ -n "$lsv_trapped" ]; do
    lsv_trapped=''
    if [ -n "$lsv_stop" ] && [ -z "$lsv_fwd" ]; then
      kill -"$lsv_stop" "$lsv_child" 2>/dev/null || :
      lsv_fwd=1
    elif [ -n "$lsv_ask" ] && [ -z "$lsv_stop" ] && [ -z "$lsv_killer" ]; then
      if lsv_zombie "$lsv_child"; then lsv_crashed=1; fi
      kill -TERM "$lsv_child" 2>/dev/null || :
      # A child that ignores TERM gets KILL after 10s; the timer holds no
      # output open (its sleep may outlive a killed timer).
      (sleep 10; kill -KILL "$lsv_child") >/dev/null 2>&1 3<&- &
      lsv_killer=$!
    fi
    wait "$lsv_child"
    lsv_st2=$?
    [ "$lsv_st2" -eq 127 ] || lsv_st=$lsv_st2
  done
  lsv_ended
  if [ -n "$lsv_stop" ]; then exit "$lsv_st"; fi
  lsv_status=$lsv_st
  if [ -n "$lsv_ask" ]; then
    lsv_ask='' lsv_restarted=1
    echo "livesync-supervisor: the process ended with status $lsv_st; starting it again" >&2
    lsv_start "$@"
    continue
  fi
  if [ -z "$lsv_restarted" ]; then exit "$lsv_st"; fi
  lsv_crashed=1
  lsv_write 0
  echo "livesync-supervisor: the process ended with status $lsv_st; waiting for the next sync to start it again" >&2
done
