package filesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

var testTarget = Target{Namespace: "ns", Pod: "web-1", Container: "app", ContainerID: "c1"}

// countingExecutor counts calls to the executor it wraps.
type countingExecutor struct {
	Executor
	mu    sync.Mutex
	calls [][]string
}

func (c *countingExecutor) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c.mu.Lock()
	c.calls = append(c.calls, argv)
	c.mu.Unlock()
	return c.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
}

// syncOnce rescans m against idx and applies the plan.
func syncOnce(t *testing.T, ex Executor, m *planner.Resolved, idx *planner.Index) *planner.Plan {
	t.Helper()
	p, err := planner.Changes(m, idx, nil, true)
	must(t, err)
	res, err := apply(context.Background(), ex, testTarget, m, &sending{Plan: p}, tarstream.Options{})
	must(t, err)
	idx.Apply(p, res.Result)
	res.forgetReplaced(idx)
	return p
}

func assertSameTree(t *testing.T, local, rdir string) {
	t.Helper()
	diffTrees(t, "remote", readTree(t, rdir), readTree(t, local))
}

func TestApply(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) { applyRoundTrip(t, ex) })
	}
}

// applyRoundTrip syncs a tree of awkward names, modes, links and a file of several stream
// chunks through ex, then deletes, type changes both ways, edits, and a batch of deletes
// only, checking the remote tree after each. Both transports run it (see TestStreamApply).
func applyRoundTrip(t *testing.T, ex Executor) {
	t.Helper()
	local, rdir := t.TempDir(), filepath.Join(t.TempDir(), "app", "src")
	writeTree(t, local, weirdNames)
	writeTree(t, local, map[string]string{
		"bin/run": "#!/bin/sh", "empty/": "", "link@bin/run": "", "out@../../../etc/passwd": "",
		"d/x": "x", "d/y/z": "z", "f": "file", "bad-\xff\xfe-name": "non-UTF-8",
		"big": strings.Repeat("0123456789abcdef", 300_000), // several stream chunks
	})
	must(t, os.Chmod(filepath.Join(local, "bin/run"), 0o755))
	m := testMapping(t, local, rdir, nil)
	idx := planner.NewIndex()
	syncOnce(t, ex, m, idx)
	assertSameTree(t, local, rdir)

	// Deletes of awkward names, type changes both ways, edits.
	for n := range weirdNames {
		must(t, os.RemoveAll(filepath.Join(local, strings.SplitN(n, "/", 2)[0])))
	}
	must(t, os.RemoveAll(filepath.Join(local, "d")))
	must(t, os.WriteFile(filepath.Join(local, "d"), []byte("dir became file"), 0o600))
	must(t, os.Remove(filepath.Join(local, "f")))
	must(t, os.Remove(filepath.Join(local, "bad-\xff\xfe-name")))
	writeTree(t, local, map[string]string{"f/inner": "file became dir", "bin/run": "#!/bin/sh\necho hi"})
	if p := syncOnce(t, ex, m, idx); len(p.Deletes) == 0 {
		t.Fatal("nothing deleted")
	}
	assertSameTree(t, local, rdir)
	// Deletes only: no tar.
	must(t, os.Remove(filepath.Join(local, "big")))
	syncOnce(t, ex, m, idx)
	assertSameTree(t, local, rdir)
}

func TestApplyManyDeletes(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			local, rdir := t.TempDir(), t.TempDir()
			for i := range 3000 {
				writeTree(t, local, map[string]string{fmt.Sprintf("file-with-a-rather-long-name-%04d", i): "x"})
			}
			writeTree(t, local, map[string]string{"keep": "k"})
			m := testMapping(t, local, rdir, nil)
			m.AllowMassDelete = true // many deletes at once are the point here
			idx := planner.NewIndex()
			syncOnce(t, ex, m, idx)
			entries, _ := os.ReadDir(local)
			for _, e := range entries {
				if e.Name() != "keep" {
					must(t, os.Remove(filepath.Join(local, e.Name())))
				}
			}
			writeTree(t, local, map[string]string{"new": "n"})
			ce := &countingExecutor{Executor: ex}
			syncOnce(t, ce, m, idx)
			assertSameTree(t, local, rdir)
			// 3000 × 36 bytes needs four 32 KiB delete chunks: three extra
			// delete-only execs, then one exec with the rest and the tar.
			if len(ce.calls) != 4 {
				t.Errorf("%d execs, want 4", len(ce.calls))
			}
			for i, argv := range ce.calls {
				size := 0
				for _, a := range argv[10:] {
					size += len(a) + 1
				}
				if size > remote.MaxArgBytes {
					t.Errorf("exec %d carries %d bytes of paths", i, size)
				}
				if wantMode := map[bool]string{true: "x", false: "d"}[i == len(ce.calls)-1]; argv[5] != wantMode {
					t.Errorf("exec %d mode %q, want %q", i, argv[5], wantMode)
				}
			}
		})
	}
}

func TestApplyMissingTools(t *testing.T) {
	local := t.TempDir()
	writeTree(t, local, map[string]string{"a": "a"})
	m := testMapping(t, local, t.TempDir(), nil)
	p, err := planner.Changes(m, planner.NewIndex(), nil, true)
	must(t, err)

	_, err = apply(context.Background(), busybox(t, "tar"), testTarget, m, &sending{Plan: p}, tarstream.Options{})
	if !errors.Is(err, remote.ErrTarMissing) || !strings.HasPrefix(err.Error(), `tar not found in container "app" of pod "web-1": the image needs sh and tar`) {
		t.Errorf("without tar: %v", err)
	}
	_, err = apply(context.Background(), busybox(t, "sh"), testTarget, m, &sending{Plan: p}, tarstream.Options{})
	if !errors.Is(err, remote.ErrTarMissing) || !strings.HasPrefix(err.Error(), `sh not found in container "app"`) {
		t.Errorf("without sh: %v", err)
	}
	if remote.IsTransient(err) {
		t.Error("a missing tool is not transient")
	}
	// Deletes alone never need tar.
	_, err = apply(context.Background(), busybox(t, "tar"), testTarget, m, &sending{Plan: &planner.Plan{Deletes: []string{"a"}}}, tarstream.Options{})
	must(t, err)
}

// BenchmarkApplyOneFile measures a one-file batch end to end on this machine
// (plan, tar, one busybox `sh -c` + tar exec): the part of the save→visible
// latency that is not debounce or network.
func BenchmarkApplyOneFile(b *testing.B) {
	ex := busybox(b)
	local := b.TempDir()
	m, err := planner.Resolve(planner.Mapping{Local: planner.LocalPath(local), Remote: planner.RemotePath(b.TempDir())}, nil)
	must2(b, err)
	idx := planner.NewIndex()
	f := filepath.Join(local, "main.go")
	for i := 0; b.Loop(); i++ {
		must2(b, os.WriteFile(f, fmt.Appendf(nil, "package main // %d\n", i), 0o644))
		p, err := planner.Changes(m, idx, []string{"main.go"}, false)
		must2(b, err)
		res, err := apply(context.Background(), ex, testTarget, m, &sending{Plan: p}, tarstream.Options{})
		must2(b, err)
		idx.Apply(p, res.Result)
	}
}
