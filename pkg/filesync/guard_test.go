package filesync

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testwait"
)

// eventsOf returns the events of type T reported so far.
func eventsOf[T Event](r *recorder) []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []T
	for _, ev := range r.all {
		if e, ok := ev.(T); ok {
			out = append(out, e)
		}
	}
	return out
}

// assertClean fails if tg reported errors or is marked for a retry.
func assertClean(t *testing.T, f *engineFixture, pod string) {
	t.Helper()
	if errs := f.rec.errors(); len(errs) != 0 {
		t.Errorf("errors = %v", errs)
	}
	f.e.mu.Lock()
	tg := f.e.targets[podTarget(pod).String()]
	f.e.mu.Unlock()
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if tg.dirty {
		t.Error("the target is marked failed: it would be retried")
	}
}

// A local root that vanishes while watched by polling yields changes for its
// children only: nothing may be deleted in the container, the hold is said
// once, the target is not failed (no retry loop), and once the root is back
// the next change converges.
func TestEngineHoldsDeletesOfVanishedRoot(t *testing.T) {
	f := newEngineFixture(t, Config{})
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	wait[InitialSync](t, f.rec)
	synced := readTree(t, f.remote("web-1"))

	must(t, os.RemoveAll(f.local))
	b := f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "a")}, 1)
	if b.Failed != 0 || b.Deleted != 0 {
		t.Errorf("batch = %+v", b)
	}
	b = f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "d", "x")}, 1)
	if b.Failed != 0 || b.Deleted != 0 {
		t.Errorf("batch = %+v", b)
	}
	held := eventsOf[Held](f.rec)
	if len(held) != 1 {
		t.Fatalf("held events = %+v, want one", held)
	}
	if h := held[0]; !strings.Contains(h.Reason, "is missing") || h.Deleted != 1 ||
		!slices.Equal(h.Examples, []string{"/app/a"}) || h.Mapping.Remote != "/app" {
		t.Errorf("held = %+v", h)
	}
	assertClean(t, f, "web-1")
	if got := readTree(t, f.remote("web-1")); len(got) != len(synced) {
		t.Errorf("remote = %v, want it untouched: %v", got, synced)
	}

	// The root comes back without d: the next change deletes d too.
	writeTree(t, f.local, map[string]string{"a": "a", "with space/ü": "u", "new": "n"})
	b = f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "new")}, 1)
	if b.Failed != 0 || b.Deleted != 1 || b.Changed != 1 {
		t.Errorf("batch = %+v", b)
	}
	assertSameTree(t, f.local, f.remote("web-1"))
	assertClean(t, f, "web-1")
}

// An initial mirror that would delete most of what the container has is
// held: said once, also by --dry-run; the held entries stay known, so
// later batches and rescans decide again without saying it again.
func TestEngineHoldsMassDeletes(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cfg    Config
		remote int // files under old/ in the container, beyond the local tree
		held   bool
	}{
		{name: "held", cfg: Config{Initial: InitialMirror}, remote: 60, held: true},
		{name: "held in a dry run", cfg: Config{Initial: InitialMirror, DryRun: true}, remote: 60, held: true},
		{name: "few", cfg: Config{Initial: InitialMirror}, remote: 49},
		{name: "allowed", cfg: Config{Initial: InitialMirror, AllowMassDelete: true}, remote: 60},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newEngineFixture(t, tt.cfg)
			remote := filepath.Join(f.ex.Sandbox(podTarget("web-1")), "app")
			for i := range tt.remote {
				writeTree(t, remote, map[string]string{fmt.Sprintf("old/f%03d", i): "o"})
			}
			f.e.AddTarget(podTarget("web-1"))
			f.run(t)
			ev := wait[InitialSync](t, f.rec)
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			_, err := os.Stat(filepath.Join(remote, "old"))
			if kept := err == nil; kept != (tt.held || tt.cfg.DryRun) {
				t.Errorf("old/ kept = %v (%v)", kept, err)
			}
			held := eventsOf[Held](f.rec)
			if !tt.held {
				if len(held) != 0 || ev.Deleted != 1 {
					t.Errorf("held = %+v, initial sync = %+v", held, ev)
				}
				return
			}
			if len(held) != 1 || held[0].Deleted != tt.remote+1 || !strings.Contains(held[0].Hint, "--allow-mass-delete") ||
				!slices.Equal(held[0].Examples, []string{"/app/old"}) {
				t.Fatalf("held = %+v", held)
			}
			if ev.Deleted != 0 {
				t.Errorf("initial sync = %+v", ev)
			}
			if dr := eventsOf[DryRun](f.rec); tt.cfg.DryRun && (len(dr) != 1 || len(dr[0].Delete) != 0) {
				t.Errorf("dry run = %+v", dr)
			}
			// A change and a rescan decide again: still held, not said again.
			writeTree(t, f.local, map[string]string{"b": "b"})
			f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "b")}, 1)
			f.batch(t, coalesce.Change{Root: f.local, Rescan: true}, 1)
			if held := eventsOf[Held](f.rec); len(held) != 1 {
				t.Errorf("held events = %+v, want one", held)
			}
			if _, err := os.Stat(filepath.Join(remote, "old", "f000")); err != nil {
				t.Errorf("old/f000: %v", err)
			}
			assertClean(t, f, "web-1")
		})
	}
}

// Once run, an engine with AllowMassDelete deletes what a batch held.
func TestEngineAllowMassDeleteInBatch(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprint("allow=", allow), func(t *testing.T) {
			f := newEngineFixture(t, Config{AllowMassDelete: allow})
			for i := range 60 {
				writeTree(t, f.local, map[string]string{fmt.Sprintf("gen/f%03d", i): "g"})
			}
			f.e.AddTarget(podTarget("web-1"))
			f.run(t)
			wait[InitialSync](t, f.rec)
			must(t, os.RemoveAll(filepath.Join(f.local, "gen")))
			b := f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "gen")}, 1)
			_, err := os.Stat(filepath.Join(f.remote("web-1"), "gen"))
			if held := len(eventsOf[Held](f.rec)) == 1; held == allow || (err == nil) == allow || (b.Deleted == 1) != allow {
				t.Errorf("allow=%v: held=%v, remote gen/: %v, batch %+v", allow, held, err, b)
			}
			assertClean(t, f, "web-1")
		})
	}
}

func TestEngineOnceHoldsMassDeletes(t *testing.T) {
	f := newEngineFixture(t, Config{Initial: InitialMirror})
	remote := filepath.Join(f.ex.Sandbox(podTarget("web-1")), "app")
	for i := range 60 {
		writeTree(t, remote, map[string]string{fmt.Sprintf("old/f%03d", i): "o"})
	}
	f.e.AddTarget(podTarget("web-1"))
	if ok, err := f.e.Once(context.Background()); ok || err != nil {
		t.Fatalf("Once = %v, %v; want false: the container still has what was held", ok, err)
	}
	if held := eventsOf[Held](f.rec); len(held) != 1 {
		t.Errorf("held = %+v", held)
	}
	if _, err := os.Stat(filepath.Join(remote, "old")); err != nil {
		t.Errorf("old/: %v", err)
	}
}

// An rm -rf the watcher cut into two batches is judged as one delete: the
// first batch's 30 entries go (no batch may hold fewer than the guard's
// floor), the rest is held, although 31 entries alone are no mass delete.
// The same two deletes further apart than deleteBurstGap are two decisions,
// and so is a second batch that also copies (an edit saved meanwhile): only
// delete-only batches, as a remover makes them, continue a burst.
func TestEngineHoldsMassDeleteCutIntoBatches(t *testing.T) {
	for _, tt := range []struct {
		name string
		gap  time.Duration
		edit bool
		held bool
	}{
		{name: "one burst", held: true},
		{name: "two deletes", gap: deleteBurstGap},
		{name: "with an edit", edit: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newEngineFixture(t, Config{})
			for i := range 60 {
				writeTree(t, f.local, map[string]string{fmt.Sprintf("gen/f%03d", i): "g"})
			}
			f.e.AddTarget(podTarget("web-1"))
			f.run(t)
			wait[InitialSync](t, f.rec)
			gen := filepath.Join(f.local, "gen")
			for i := range 30 {
				must(t, os.Remove(filepath.Join(gen, fmt.Sprintf("f%03d", i))))
			}
			// One change per batch (a rescan: the plan walks the tree), so that the clock is stepped
			// only once the coalescer armed its timer for all of it.
			b := f.batch(t, coalesce.Change{Root: f.local, Rescan: true}, 1)
			if b.Deleted != 30 || len(eventsOf[Held](f.rec)) != 0 {
				t.Fatalf("first half: batch %+v, held %+v", b, eventsOf[Held](f.rec))
			}
			f.fc.Step(tt.gap)
			must(t, os.RemoveAll(gen))
			if tt.edit {
				writeTree(t, f.local, map[string]string{"a": "edited"})
			}
			// Other timers may wait on the clock now: the batch's is one more.
			waiting := f.fc.Waiters()
			f.changes <- coalesce.Change{Root: f.local, Rescan: true}
			testwait.Waiters(t, f.fc, waiting+1)
			f.fc.Step(coalesce.DefaultCap) // the batch after a batch may wait longer than DefaultQuiet
			b = wait[Batch](t, f.rec)
			_, err := os.Stat(filepath.Join(f.remote("web-1"), "gen", "f059"))
			held := eventsOf[Held](f.rec)
			if tt.held {
				if len(held) != 1 || held[0].Deleted != 31 || !strings.Contains(held[0].Reason, "with the 30 deleted just before") || err != nil || b.Deleted != 0 {
					t.Fatalf("second half: held %+v, remote gen/f059: %v, batch %+v", held, err, b)
				}
			} else if len(held) != 0 || err == nil || b.Deleted != 1 || tt.edit != (b.Changed == 1) {
				t.Fatalf("second half: held %+v, remote gen/f059: %v, batch %+v", held, err, b)
			}
			assertClean(t, f, "web-1")
		})
	}
}
