package filesync

import (
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/localexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// writeTree and readTree are testtree's Write and Read.
func writeTree(t *testing.T, dir string, entries map[string]string) {
	t.Helper()
	testtree.Write(t, dir, entries)
}
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	return testtree.Read(t, dir)
}

// diffTrees is testtree's Diff.
func diffTrees(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	testtree.Diff(t, what, got, want)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testMapping(t *testing.T, local, remote string, match planner.Matcher) *planner.Resolved {
	t.Helper()
	m, err := planner.Resolve(planner.Mapping{Local: planner.LocalPath(local), Remote: planner.RemotePath(remote)}, match)
	must(t, err)
	return m
}

// globMatcher ignores paths whose base name matches one of its patterns.
type globMatcher []string

func (g globMatcher) Match(rel string, isDir bool) bool {
	for _, p := range g {
		if ok, _ := filepath.Match(p, filepath.Base(rel)); ok {
			return true
		}
	}
	return false
}

// localExecutor runs this package's scripts on this machine (see
// localexec), with a sandbox per target and failure injection.
type localExecutor struct {
	localexec.Runner
	// Sandbox, if set, prefixes the remote directory argument of this
	// package's scripts with a per-target host directory, so several targets
	// can share one machine.
	Sandbox func(Target) string
	// Fail, if set, is consulted before each call; a non-nil error is
	// returned instead of running it (failure injection).
	Fail func(t Target, argv []string) error
}

func (l *localExecutor) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if l.Fail != nil {
		if err := l.Fail(t, argv); err != nil {
			return err
		}
	}
	if l.Sandbox != nil {
		argv = localexec.Sandboxed(argv, l.Sandbox(t))
	}
	return l.Run(ctx, argv, stdin, stdout, stderr)
}

// busybox returns an executor whose tools are busybox applets (see
// localexec.Busybox).
func busybox(t testing.TB, without ...string) *localExecutor {
	t.Helper()
	return &localExecutor{Runner: *localexec.Busybox(t, without...)}
}

// executors returns the busybox and GNU (host) variants to run a test with.
func executors(t *testing.T) map[string]*localExecutor {
	t.Helper()
	out := map[string]*localExecutor{}
	for name, r := range localexec.Variants(t) {
		out[name] = &localExecutor{Runner: *r}
	}
	return out
}

// isApply, isList and isStreamLoop tell the remote scripts apart by their $0.
func isApply(argv []string) bool      { return len(argv) > 4 && argv[3] == "livesync" }
func isList(argv []string) bool       { return len(argv) > 3 && argv[3] == "livesync-list" }
func isStreamLoop(argv []string) bool { return len(argv) > 3 && argv[3] == "livesync-stream" }

func must2(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// syncedIndex returns the index of a target that has everything under m.
func syncedIndex(t testing.TB, m *planner.Resolved) *planner.Index {
	t.Helper()
	idx := planner.NewIndex()
	p, err := planner.Changes(m, idx, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	idx.Apply(p, tarstream.Result{})
	return idx
}

// hashFile returns the sha256 of the file at name.
func hashFile(name string) (*[32]byte, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return &sum, nil
}
