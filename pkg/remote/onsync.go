package remote

import (
	"context"
	"strings"
)

// OnSyncArgv is the exec that runs command as `sh -c command` in a target
// with LIVESYNC_CHANGED set to changed (newline-separated remote paths); see
// scripts/on-sync.sh.
func OnSyncArgv(changed, command string) []string {
	return []string{"sh", "-c", onSyncScript, "livesync-on-sync", changed, command}
}

// RunOnSync runs OnSyncArgv(changed, command) in t and returns the tail of
// its stdout and stderr together, at most max bytes, cut at a line start when
// possible, and the executor's error (an ExitError for a non-zero exit).
func RunOnSync(ctx context.Context, ex Executor, t Target, changed, command string, max int) (string, error) {
	out := &TailBuffer{Max: max}
	err := ex.Exec(ctx, t, OnSyncArgv(changed, command), nil, out, out)
	return tailLines(out), err
}

// tailLines returns what t holds, without a partial first line when the
// start was cut.
func tailLines(t *TailBuffer) string {
	s := t.String()
	if !t.Truncated() {
		return s
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		return s[i+1:]
	}
	return s
}
