package remote

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"k8s.io/utils/clock"
)

// Check is what preflight.sh found in a target about a remote directory.
type Check struct {
	// UID and GID are whom the target's execs run as ("unknown" without id).
	UID, GID string
	// Stream: the container's dd reads exactly one block from a pipe, as a
	// stream needs (see Streams).
	Stream bool
	// Helper: the exec ran in a helper container (see HelperArgv).
	Helper bool
	// Tar: tar was found; without it nothing can be copied.
	Tar bool
	// Root is what the remote directory is: RootDir, RootMissing or
	// RootNotDir.
	Root string
	// Writable: Root is a directory the user may create entries in, or is
	// missing and its nearest existing ancestor is one.
	Writable bool
}

// What a remote directory is (Check.Root).
const (
	RootDir     = "dir"
	RootMissing = "missing"
	RootNotDir  = "notdir"
)

// PreflightArgv is the exec that runs preflight.sh, a read-only check of the
// remote directory root.
func PreflightArgv(root string) []string {
	return []string{"sh", "-c", preflightScript, "livesync-preflight", root}
}

// Preflight runs PreflightArgv(root) in t, retrying transient failures by
// retry, and parses what it prints. An exec's failure is classified.
func Preflight(ctx context.Context, ex Executor, clk clock.Clock, retry RetryPolicy, t Target, root string) (*Check, error) {
	var out bytes.Buffer
	err := retry.Do(ctx, clk, func() error {
		out.Reset()
		return Run(ctx, ex, t, "checking the container", root, PreflightArgv(root), nil, &out)
	})
	if err != nil {
		return nil, err
	}
	c, err := ParsePreflight(out.String())
	if err != nil {
		return nil, fmt.Errorf("checking %q in %s: %w", root, t, err)
	}
	return c, nil
}

// ParsePreflight parses preflight.sh's "key=value" lines (its header lists
// them).
func ParsePreflight(out string) (*Check, error) {
	kv := map[string]string{}
	for line := range strings.Lines(out) {
		k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		if !ok || v == "" {
			return nil, fmt.Errorf("unexpected preflight output %q", strings.TrimSpace(out))
		}
		kv[k] = v
	}
	for _, k := range []string{"uid", "gid", "stream", "tar", "root", "writable", "helper"} {
		if kv[k] == "" {
			return nil, fmt.Errorf("unexpected preflight output %q: no %s", strings.TrimSpace(out), k)
		}
	}
	switch kv["root"] {
	case RootDir, RootMissing, RootNotDir:
	default:
		return nil, fmt.Errorf("unexpected preflight output %q", strings.TrimSpace(out))
	}
	return &Check{UID: kv["uid"], GID: kv["gid"], Stream: kv["stream"] == "yes", Helper: kv["helper"] == "yes",
		Tar: kv["tar"] == "yes", Root: kv["root"], Writable: kv["writable"] == "yes"}, nil
}
