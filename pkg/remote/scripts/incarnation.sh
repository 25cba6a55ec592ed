# shellcheck shell=sh
# incarnation.sh prints which container incarnation it runs in, the same
# token scan.sh's header carries: the mount namespace (the helper's target
# process's, through a helper), which a restarted container gets anew.
# Sync-back records it before a container's initial sync, so that a restart
# between that sync and the first scan is never read against the ancestor
# of the container before. Nothing when it can't tell.
if [ -n "${LIVESYNC_ROOTFS:-}" ]; then livesync_pinned || exit; fi
readlink "/proc/${LIVESYNC_PID:-self}/ns/mnt" 2>/dev/null || :
