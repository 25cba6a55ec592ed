package filesync

import (
	"bytes"
	"context"
	"fmt"
	"strings"
)

// Preflight is what a dry run found out about how a real run would sync one
// mapping into one target: the initial sync's DryRun events carry it.
type Preflight struct {
	// UID and GID are whom the target's execs run as ("unknown" without id).
	UID, GID string
	// Transport is how batches would go: TransportStream where the
	// container's dd reads exactly one block from a pipe and the executor
	// keeps streams (see StreamCapable), else TransportExec.
	Transport string
	// Helper: the execs run in a helper container (see HelperArgv).
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
	RootDir     = "dir"
	RootMissing = "missing"
	RootNotDir  = "notdir"
)

func preflightArgv(m *mapping) []string {
	return []string{"sh", "-c", preflightScript, "livesync-preflight", string(m.remoteDir())}
}

// preflight runs preflight.sh for m in t, retrying transient failures as a
// listing does. A failure is returned in Preflight.Err, classified.
func (e *Engine) preflight(ctx context.Context, t Target, m *mapping) *Preflight {
	var out bytes.Buffer
	err := e.retry.do(ctx, e.clk, func() error {
		out.Reset()
		stderr := &tailBuffer{max: 4 << 10}
		if err := e.exec.Exec(ctx, t, preflightArgv(m), nil, &out, stderr); err != nil {
			return classify(err, t, "checking the container", m.remoteDir(), stderr.String())
		}
		return nil
	})
	if err != nil {
		return &Preflight{Err: err}
	}
	pf, stream, err := parsePreflight(out.String())
	if err != nil {
		return &Preflight{Err: fmt.Errorf("checking %q in %s: %w", m.remoteDir(), t, err)}
	}
	pf.Transport = TransportExec
	if stream && e.streamable {
		pf.Transport = TransportStream
	}
	pf.Hint = preflightHint(pf, m)
	return pf
}

// parsePreflight parses preflight.sh's "key=value" lines (its header lists
// them); stream says dd works as a stream needs.
func parsePreflight(out string) (pf *Preflight, stream bool, err error) {
	kv := map[string]string{}
	for line := range strings.Lines(out) {
		k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		if !ok || v == "" {
			return nil, false, fmt.Errorf("unexpected preflight output %q", strings.TrimSpace(out))
		}
		kv[k] = v
	}
	for _, k := range []string{"uid", "gid", "stream", "tar", "root", "writable", "helper"} {
		if kv[k] == "" {
			return nil, false, fmt.Errorf("unexpected preflight output %q: no %s", strings.TrimSpace(out), k)
		}
	}
	switch kv["root"] {
	case RootDir, RootMissing, RootNotDir:
	default:
		return nil, false, fmt.Errorf("unexpected preflight output %q", strings.TrimSpace(out))
	}
	return &Preflight{UID: kv["uid"], GID: kv["gid"], Helper: kv["helper"] == "yes", Tar: kv["tar"] == "yes",
		Root: kv["root"], Writable: kv["writable"] == "yes"}, kv["stream"] == "yes", nil
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
		return permissionHint(dir)
	case !pf.Tar:
		return hintNoTar
	}
	return ""
}
