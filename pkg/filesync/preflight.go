package filesync

import (
	"context"
	"fmt"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// Preflight is what a dry run found out about how a real run would sync one
// mapping into one target: the initial sync's DryRun events carry it.
type Preflight struct {
	// UID and GID are whom the target's execs run as ("unknown" without id).
	UID, GID string
	// Transport is how batches would go: TransportStream where the
	// container's dd reads exactly one block from a pipe and the executor
	// keeps streams (see remote.StreamCapable), else TransportExec.
	Transport string
	// Helper: the execs run in a helper container (see remote.HelperArgv).
	Helper bool
	// Tar: tar was found; without it nothing can be copied.
	Tar bool
	// Root is what the mapping's remote directory is: RootDir, RootMissing
	// or RootNotDir.
	Root string
	// Writable: Root is a directory the user may create entries in, or is
	// missing and its nearest existing ancestor is one (the sync creates it).
	Writable bool
	// Hint says what to do when Writable or Tar is false.
	Hint string
	// Err is why the check could not run, one line (e.g. a helper that only
	// a real run adds); the other fields are then zero.
	Err error
}

// What a mapping's remote directory is (Preflight.Root).
const (
	RootDir     = remote.RootDir
	RootMissing = remote.RootMissing
	RootNotDir  = remote.RootNotDir
)

// preflight runs preflight.sh for m in t, retrying transient failures as a
// listing does. A failure is returned in Preflight.Err, classified.
func (e *Engine) preflight(ctx context.Context, t Target, m *mapping) *Preflight {
	c, err := remote.Preflight(ctx, e.exec, e.clk, e.retry, t, string(m.remoteDir()))
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
func preflightHint(pf *Preflight, m *mapping) string {
	dir := m.remoteDir()
	switch {
	case pf.Root == RootNotDir && !m.file:
		return conflictError(m, "", remoteNotDir).Hint
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
