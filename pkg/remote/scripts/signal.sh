# shellcheck shell=sh
# signal.sh reaches the container's main process: PID 1, or LIVESYNC_PID
# under a helper. "signal.sh check" prints the Name, Pid, SigCgt and SigIgn
# lines of its /proc status (whether it catches a signal is decided by the
# caller); "signal.sh send SIG" sends it SIG.
lss_proc=${LIVESYNC_PROC:-/proc}/${LIVESYNC_PID:-1}
case $1 in
check)
  while IFS= read -r lss_l; do
    case $lss_l in Name:* | Pid:* | SigCgt:* | SigIgn:*) printf '%s\n' "$lss_l" ;; esac
  done <"$lss_proc/status"
  ;;
send) kill -s "$2" "${LIVESYNC_PID:-1}" ;;
*) exit 2 ;;
esac
