package planner

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/localexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
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

func testMapping(t *testing.T, local, remote string, match Matcher) *Resolved {
	t.Helper()
	m, err := Resolve(Mapping{Local: LocalPath(local), Remote: RemotePath(remote)}, match)
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
// localexec), with failure injection.
type localExecutor struct {
	localexec.Runner
	// Fail, if set, is consulted before each call; a non-nil error is
	// returned instead of running it (failure injection).
	Fail func(t remote.Target, argv []string) error
}

func (l *localExecutor) Exec(ctx context.Context, t remote.Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if l.Fail != nil {
		if err := l.Fail(t, argv); err != nil {
			return err
		}
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

// isList tells the listing script by its $0.
func isList(argv []string) bool { return len(argv) > 3 && argv[3] == "livesync-list" }

// Executor and Target are the container side's, as the engine names them.
type (
	Executor = remote.Executor
	Target   = remote.Target
)

var testTarget = Target{Namespace: "ns", Pod: "web-1", Container: "app", ContainerID: "c1"}

// weirdNames are names that break naive shells, tars and listings.
var weirdNames = map[string]string{
	"with space":        "1",
	"new\nline":         "2",
	`quo"te's`:          "3",
	"ünïcødé-日本":        "4",
	"-starts-with-dash": "5",
	`back\slash`:        "6",
	"dir with space/" + strings.Repeat("long-name-", 12) + "/" + strings.Repeat("deeper-", 20): "7",
}

// applied is what apply sent.
type applied struct{ Result tarstream.Result }

// apply runs p in t as the engine does (see ScriptArgs), without its
// moves, patches and retries: a plan's effect in a container, for the
// tests that follow it with another plan.
func apply(ctx context.Context, ex Executor, t Target, m *Resolved, p *Plan, o tarstream.Options) (applied, error) {
	var res applied
	for _, a := range ScriptArgs(m, p).Split(remote.MaxArgBytes) {
		if !a.Tar {
			if _, err := remote.Apply(ctx, ex, t, "deleting files", a, nil); err != nil {
				return res, err
			}
			continue
		}
		r, wait := tarstream.Stream(TarFiles(p.Copies), o)
		_, err := remote.Apply(ctx, ex, t, "copying files", a, r)
		_ = r.Close()
		ares, aerr := wait()
		res.Result = ares
		if aerr != nil && !errors.Is(aerr, io.ErrClosedPipe) {
			return res, aerr
		}
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

func assertSameTree(t *testing.T, local, rdir string) {
	t.Helper()
	diffTrees(t, "remote", readTree(t, rdir), readTree(t, local))
}
