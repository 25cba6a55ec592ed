# shellcheck shell=sh
# on-sync.sh runs the user's --on-sync command ($2) with the changed remote
# paths ($1, newline-separated) in LIVESYNC_CHANGED.
export LIVESYNC_CHANGED="$1"; exec sh -c "$2"
