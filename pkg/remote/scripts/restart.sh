# shellcheck shell=sh
# restart.sh asks the supervisor of a container (supervisor.sh) to restart
# its child and waits until it started the new one. It prints the
# supervisor's state line before ("B PID GEN STATUS RUNNING CRASHED") and after
# ("A ..."). It exits 3 when the container runs no supervisor, and 4 when
# the supervisor did not start a child within $1 tenths of a second.
# Under a helper the state is read through LIVESYNC_ROOTFS; see
# supervisor.sh for LIVESYNC_STATE_DIRS.
lsr_f=''
for lsr_d in ${LIVESYNC_STATE_DIRS:-/tmp /dev/shm}; do
  if [ -f "${LIVESYNC_ROOTFS:-}$lsr_d/.livesync-supervisor" ]; then
    lsr_f=${LIVESYNC_ROOTFS:-}$lsr_d/.livesync-supervisor
    break
  fi
done
[ -n "$lsr_f" ] || exit 3
read -r lsr_pid lsr_gen lsr_rest <"$lsr_f" || exit 3
kill -0 "$lsr_pid" 2>/dev/null || exit 3
echo "B $lsr_pid $lsr_gen $lsr_rest"
kill -USR1 "$lsr_pid" || exit 3
lsr_n=0
while :; do
  read -r lsr_p lsr_g lsr_rest <"$lsr_f" || :
  if [ "$lsr_p" = "$lsr_pid" ] && [ "$lsr_g" != "$lsr_gen" ]; then
    echo "A $lsr_p $lsr_g $lsr_rest"
    exit 0
  fi
  lsr_n=$((lsr_n + 1))
  [ "$lsr_n" -lt "$1" ] || exit 4
  sleep 0.1
done
