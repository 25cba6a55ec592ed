package filesync

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
)

// countingExec counts the applies that reach the container.
type countingExec struct {
	Executor
	applies atomic.Int32
}

func (c *countingExec) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if isApply(argv) {
		c.applies.Add(1)
	}
	return c.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
}

// cannotReadWarnings returns the warnings about unreadable files so far.
func cannotReadWarnings(r *recorder) []Error {
	var out []Error
	for _, e := range r.errors() {
		if strings.Contains(e.Err.Error(), "cannot read") {
			out = append(out, e)
		}
	}
	return out
}

// TestEngineUnreadableFile: a file that can be stat'ed but not opened (a
// root-owned 0600 file in the tree, here a 000 one as uid 65534) is one
// warning and left out until its stat changes. It used to count as "changed
// while read": requeued with a wake-up at once, an apply per pass, hundreds a
// second against the apiserver, and not one event.
func TestEngineUnreadableFile(t *testing.T) {
	if !asNobody(t) {
		return
	}
	var ce *countingExec
	f := newWrappedFixture(t, Config{}, func(ex Executor) Executor {
		ce = &countingExec{Executor: ex}
		return ce
	})
	secret := filepath.Join(f.local, "secret")
	writeTree(t, f.local, map[string]string{"secret": "s"})
	must(t, os.Chmod(secret, 0))
	t.Cleanup(func() { os.Chmod(secret, 0o644) })

	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
		t.Fatal(ev.Err)
	}
	if _, err := os.Lstat(filepath.Join(f.remote("web-1"), "secret")); err == nil {
		t.Error("the unreadable file reached the container")
	}
	warns := cannotReadWarnings(f.rec)
	if len(warns) != 1 {
		t.Fatalf("warnings = %v, want one about secret", f.rec.errors())
	}
	assertOneLine(t, warns[0].Err, secret, "permission denied", "not synced until it changes")

	// Two batches: each is one apply. A pass that requeued the unreadable
	// file would have run more meanwhile, and again with each batch.
	for i, name := range []string{"one", "two"} {
		before := ce.applies.Load()
		writeTree(t, f.local, map[string]string{name: name})
		if b := f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, name)}, 1); b.Failed != 0 || b.Changed != 1 {
			t.Fatalf("batch %d = %+v", i, b)
		}
		if n := ce.applies.Load() - before; n != 1 {
			t.Errorf("batch %d: %d applies, want 1", i, n)
		}
	}
	// A rescan plans the whole tree again: the file is still left out, and
	// not reported again.
	before := ce.applies.Load()
	writeTree(t, f.local, map[string]string{"three": "3"})
	if b := f.batch(t, coalesce.Change{Root: f.local, Rescan: true}, 1); b.Failed != 0 || b.Changed != 1 {
		t.Fatalf("rescan = %+v", b)
	}
	if n := ce.applies.Load() - before; n != 1 {
		t.Errorf("rescan: %d applies, want 1", n)
	}
	if n := len(cannotReadWarnings(f.rec)); n != 1 {
		t.Errorf("%d warnings after the rescan, want still 1", n)
	}

	// Its stat changes (chmod): it is tried again, and now it goes.
	must(t, os.Chmod(secret, 0o644))
	if b := f.batch(t, coalesce.Change{Root: f.local, Path: secret}, 1); b.Failed != 0 || b.Changed != 1 {
		t.Fatalf("batch after chmod = %+v", b)
	}
	assertSameTree(t, f.local, f.remote("web-1"))
}
