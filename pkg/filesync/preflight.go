package filesync

import (
	"context"
	"fmt"

	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// preflight runs preflight.sh for m in t, retrying transient failures as a
// listing does. A failure is returned in Preflight.Err, classified.
func (e *Engine) preflight(ctx context.Context, t Target, m *planner.Resolved) *Preflight {
	c, err := remote.Preflight(ctx, e.exec, e.clk, e.retry, t, string(m.RemoteDir()))
	if err != nil {
		return &Preflight{Err: err}
	}
	pf := &Preflight{UID: c.UID, GID: c.GID, Helper: c.Helper, Tar: c.Tar, Root: c.Root, Writable: c.Writable,
		Transport: TransportExec}
	if c.Stream && e.streamable {
		pf.Transport = TransportStream
	}
	pf.Hint = preflightHint(pf, m)
	return pf
}

// preflightHint says what to do about what pf found wrong in m's remote
// directory, as the error a real run would get does.
func preflightHint(pf *Preflight, m *planner.Resolved) string {
	dir := m.RemoteDir()
	switch {
	case pf.Root == RootNotDir && !m.File:
		return planner.ConflictError(m, "", planner.RemoteNotDir).Hint
	case pf.Root == RootNotDir:
		return fmt.Sprintf("%q must be a directory (or missing) to hold the file", dir)
	case !pf.Writable && pf.UID == "0":
		return fmt.Sprintf("a read-only file system? mount an emptyDir volume at %q", dir)
	case !pf.Writable && pf.Helper:
		return fmt.Sprintf("make %q writable for uid %s (mount an emptyDir volume there, or set fsGroup)", dir, pf.UID)
	case !pf.Writable:
		return remote.PermissionHint(string(dir))
	case !pf.Tar:
		return remote.HintNoTar
	}
	return ""
}
