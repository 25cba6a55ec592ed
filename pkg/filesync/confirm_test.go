package filesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// lostAcks runs every call, and for the next n applies reports a lost
// connection after the container applied them: the outcome a batch sees when
// its ack is lost (an apiserver or kubelet restart, a network blip).
type lostAcks struct {
	Executor
	n       atomic.Int32
	applies atomic.Int32
	lists   atomic.Int32
}

func (l *lostAcks) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	err := l.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
	switch {
	case isApply(argv):
		l.applies.Add(1)
	case isList(argv):
		l.lists.Add(1)
	}
	if err == nil && isApply(argv) && l.n.Add(-1) >= 0 {
		return errors.New("error dialing backend: EOF")
	}
	return err
}

// lostAckFixture runs an engine with one synced target whose applies go
// through lostAcks, with one try per batch.
func lostAckFixture(t *testing.T) (*engineFixture, *lostAcks) {
	t.Helper()
	var lost *lostAcks
	f := newWrappedFixture(t, Config{}, func(ex Executor) Executor {
		lost = &lostAcks{Executor: ex}
		return lost
	}, WithRetry(remote.RetryPolicy{Tries: 1}))
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
		t.Fatal(ev.Err)
	}
	return f, lost
}

// restore writes name with content and mtime, as a revert (git checkout, an
// editor's undo of a save, a backup copied back with cp -p) leaves it.
func restore(t *testing.T, name, content string, mtime time.Time) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(name), 0o755))
	must(t, os.WriteFile(name, []byte(content), 0o644))
	must(t, os.Chtimes(name, mtime, mtime))
}

// TestEngineLostAckThenRevert: the container applies a batch whose ack is
// lost; while the target is marked failed the user's tree goes back to
// what the index held before that batch. The next pass must still bring the
// container back to the local tree: the index may record only what the
// container confirmed (see Index).
func TestEngineLostAckThenRevert(t *testing.T) {
	cases := map[string]struct {
		change func(t *testing.T, local string) string // makes the lost batch's change; returns its path
		revert func(t *testing.T, local string, mtime time.Time)
	}{
		"deleted file restored": {
			change: func(t *testing.T, local string) string {
				must(t, os.Remove(filepath.Join(local, "a")))
				return filepath.Join(local, "a")
			},
			revert: func(t *testing.T, local string, mtime time.Time) { restore(t, filepath.Join(local, "a"), "a", mtime) },
		},
		"edit reverted": {
			change: func(t *testing.T, local string) string {
				must(t, os.WriteFile(filepath.Join(local, "a"), []byte("edited"), 0o644))
				return filepath.Join(local, "a")
			},
			revert: func(t *testing.T, local string, mtime time.Time) { restore(t, filepath.Join(local, "a"), "a", mtime) },
		},
		"new file deleted again": {
			change: func(t *testing.T, local string) string {
				writeTree(t, local, map[string]string{"debug/dump.txt": "secret"})
				return filepath.Join(local, "debug")
			},
			revert: func(t *testing.T, local string, _ time.Time) { must(t, os.RemoveAll(filepath.Join(local, "debug"))) },
		},
		"deleted directory restored": {
			change: func(t *testing.T, local string) string {
				must(t, os.RemoveAll(filepath.Join(local, "d")))
				return filepath.Join(local, "d")
			},
			revert: func(t *testing.T, local string, mtime time.Time) {
				restore(t, filepath.Join(local, "d", "x"), "x", mtime)
			},
		},
		"file replaced by a directory, then back": {
			change: func(t *testing.T, local string) string {
				must(t, os.Remove(filepath.Join(local, "a")))
				writeTree(t, local, map[string]string{"a/inner": "i"})
				return filepath.Join(local, "a")
			},
			revert: func(t *testing.T, local string, mtime time.Time) {
				must(t, os.RemoveAll(filepath.Join(local, "a")))
				restore(t, filepath.Join(local, "a"), "a", mtime)
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, lost := lostAckFixture(t)
			before := readTree(t, f.local)
			fa, err := os.Lstat(filepath.Join(f.local, "a"))
			must(t, err)
			fx, err := os.Lstat(filepath.Join(f.local, "d", "x"))
			must(t, err)
			mtimes := map[string]time.Time{"a": fa.ModTime(), "d": fx.ModTime()}

			lost.n.Store(1)
			p := tc.change(t, f.local)
			if b := f.batch(t, coalesce.Change{Root: f.local, Path: p}, 1); b.Failed != 1 {
				t.Fatalf("batch = %+v, want it failed", b)
			}
			// The container applied it; the tool could not know.
			mt := mtimes["a"]
			if filepath.Base(p) == "d" {
				mt = mtimes["d"]
			}
			tc.revert(t, f.local, mt)
			diffTrees(t, "local after the revert", readTree(t, f.local), before)

			// Any later pass (here a new batch; the backoff timer waits on
			// the clock too) must converge on the local tree.
			writeTree(t, f.local, map[string]string{"later": "l"})
			if b := f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "later")}, 2); b.Failed != 0 {
				t.Fatalf("batch = %+v", b)
			}
			assertSameTree(t, f.local, f.remote("web-1"))
		})
	}
}

// TestEngineLostAckOfLargeBatchRelists: when a lost ack leaves more than
// relistMin entries unconfirmed, the container is listed before the next
// compare, and only what it lacks or holds differently is sent again.
func TestEngineLostAckOfLargeBatchRelists(t *testing.T) {
	f, lost := lostAckFixture(t)
	files := map[string]string{}
	for i := range relistMin + 44 {
		files[fmt.Sprintf("gen/f%03d", i)] = fmt.Sprint(i)
	}
	writeTree(t, f.local, files)
	lost.n.Store(1)
	if b := f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "gen")}, 1); b.Failed != 1 || b.Changed != 0 {
		t.Fatalf("batch = %+v, want it failed", b)
	}
	// During the outage: one generated file goes, one changes.
	must(t, os.Remove(filepath.Join(f.local, "gen", "f000")))
	must(t, os.WriteFile(filepath.Join(f.local, "gen", "f001"), []byte("changed"), 0o644))
	lists := lost.lists.Load()

	writeTree(t, f.local, map[string]string{"later": "l"})
	b := f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "later")}, 2)
	if b.Failed != 0 {
		t.Fatalf("batch = %+v", b)
	}
	if got := lost.lists.Load() - lists; got != 1 {
		t.Errorf("%d listings before the compare, want 1", got)
	}
	// Sent again: f001 (changed) and later; deleted: f000. Not the 299
	// files the container confirmed by its listing.
	if b.Changed != 2 || b.Deleted != 1 {
		t.Errorf("batch = %+v, want 2 copies and 1 delete", b)
	}
	assertSameTree(t, f.local, f.remote("web-1"))
}
