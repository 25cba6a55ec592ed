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
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
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
		{name: "held", cfg: Config{Initial: planner.InitialMirror}, remote: 60, held: true},
		{name: "held in a dry run", cfg: Config{Initial: planner.InitialMirror, DryRun: true}, remote: 60, held: true},
		{name: "few", cfg: Config{Initial: planner.InitialMirror}, remote: 49},
		{name: "allowed", cfg: Config{Initial: planner.InitialMirror, AllowMassDelete: true}, remote: 60},
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
			f := genSynced(t, Config{AllowMassDelete: allow})
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
	f := newEngineFixture(t, Config{Initial: planner.InitialMirror})
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
// floor), the rest is held, although 31 entries alone are no mass delete; an
// edit saved meanwhile goes, and does not end the burst. The same two deletes
// further apart than planner.DeleteBurstGap are two decisions; a rename of what is
// left is no delete of it (see movedAway).
func TestEngineHoldsMassDeleteCutIntoBatches(t *testing.T) {
	for _, tt := range []struct {
		name   string
		gap    time.Duration
		edit   bool
		rename bool
		held   bool
	}{
		{name: "one burst", held: true},
		{name: "with an edit", edit: true, held: true},
		{name: "two deletes", gap: planner.DeleteBurstGap},
		{name: "a rename", rename: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := genSynced(t, Config{})
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
			if tt.rename {
				must(t, os.Rename(gen, gen+"2"))
			} else {
				must(t, os.RemoveAll(gen))
			}
			if tt.edit {
				writeTree(t, f.local, map[string]string{"a": "edited"})
			}
			b = f.burstBatch(t)
			_, err := os.Stat(filepath.Join(f.remote("web-1"), "gen", "f059"))
			held := eventsOf[Held](f.rec)
			switch {
			case tt.held:
				if len(held) != 1 || held[0].Deleted != 31 || !strings.Contains(held[0].Reason, "with the 30 deleted just before") || err != nil || b.Deleted != 0 || tt.edit != (b.Changed == 1) {
					t.Fatalf("second half: held %+v, remote gen/f059: %v, batch %+v", held, err, b)
				}
			case len(held) != 0 || err == nil || b.Deleted != 1:
				t.Fatalf("second half: held %+v, remote gen/f059: %v, batch %+v", held, err, b)
			case tt.rename:
				assertSameTree(t, f.local, f.remote("web-1"))
			}
			assertClean(t, f, "web-1")
		})
	}
}

// genSynced returns a running engine with cfg whose local tree holds 60
// files under gen/ beside the fixture's few, synced into web-1.
func genSynced(t *testing.T, cfg Config) *engineFixture {
	t.Helper()
	f := newEngineFixture(t, cfg)
	for i := range 60 {
		writeTree(t, f.local, map[string]string{fmt.Sprintf("gen/f%03d", i): "g"})
	}
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	wait[InitialSync](t, f.rec)
	return f
}

// burstBatch sends a rescan (the plan walks the tree) as the next batch of a
// burst and waits for it: the clock is stepped only once the coalescer armed
// its timer, by the cap (a batch after a batch may wait longer than
// DefaultQuiet), less than planner.DeleteBurstGap.
func (f *engineFixture) burstBatch(t *testing.T) Batch {
	t.Helper()
	waiting := f.fc.Waiters()
	f.changes <- coalesce.Change{Root: f.local, Rescan: true}
	testwait.Waiters(t, f.fc, waiting+1)
	f.fc.Step(coalesce.DefaultCap)
	return wait[Batch](t, f.rec)
}

// An rm -rf of 200 files that the watcher cut into batches of 40, each with
// a write beside it (a dev server's log, a build's new output), is one
// burst: the writes elsewhere do not end it, so once it passes the line the
// rest is held, as it would be in one batch; the writes still go.
func TestEngineHoldsMassDeleteBesideWrites(t *testing.T) {
	f := newEngineFixture(t, Config{})
	for i := range 200 {
		writeTree(t, f.local, map[string]string{fmt.Sprintf("gen/f%03d", i): "g"})
	}
	writeTree(t, f.local, map[string]string{"log": "start\n"})
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	wait[InitialSync](t, f.rec)
	deleted := 0
	for round := range 5 {
		for i := range 40 {
			must(t, os.Remove(filepath.Join(f.local, "gen", fmt.Sprintf("f%03d", round*40+i))))
		}
		log, err := os.OpenFile(filepath.Join(f.local, "log"), os.O_APPEND|os.O_WRONLY, 0)
		must(t, err)
		_, err = fmt.Fprintf(log, "round %d\n", round)
		must(t, err)
		must(t, log.Close())
		writeTree(t, f.local, map[string]string{fmt.Sprintf("out/b%d.js", round): "built"})
		b := f.burstBatch(t)
		deleted += b.Deleted
		if b.Changed == 0 {
			t.Errorf("round %d: the writes beside the deletes did not go: %+v", round, b)
		}
	}
	held := eventsOf[Held](f.rec)
	if len(held) == 0 || !strings.Contains(held[0].Reason, "deleted just before") {
		t.Fatalf("held %+v; %d of 200 deleted in the container", held, deleted)
	}
	if deleted > 100 {
		t.Errorf("%d of 200 deleted before the burst was held: more than half", deleted)
	}
	if _, err := os.Stat(filepath.Join(f.remote("web-1"), "gen", "f199")); err != nil {
		t.Errorf("gen/f199: %v", err)
	}
	if got := readTree(t, f.remote("web-1"))["log"]; !strings.HasSuffix(got, "round 4\n") {
		t.Errorf("remote log = %q", got)
	}
	assertClean(t, f, "web-1")
}

// What a burst's own batches added is not counted when deleted: a tool that
// makes and removes files of its own beside a delete neither adds to the
// burst nor keeps it going.
func TestDeleteBurstLeavesOutWhatItAdded(t *testing.T) {
	f := genSynced(t, Config{})
	for i := range 30 {
		must(t, os.Remove(filepath.Join(f.local, "gen", fmt.Sprintf("f%03d", i))))
	}
	for i := range 40 {
		writeTree(t, f.local, map[string]string{fmt.Sprintf("tmp/t%03d", i): "t"})
	}
	if b := f.batch(t, coalesce.Change{Root: f.local, Rescan: true}, 1); b.Deleted != 30 || b.Changed != 41 {
		t.Fatalf("first half: batch %+v", b)
	}
	must(t, os.RemoveAll(filepath.Join(f.local, "tmp")))
	if b := f.burstBatch(t); b.Deleted != 1 || len(eventsOf[Held](f.rec)) != 0 {
		t.Fatalf("the tool's files gone: batch %+v, held %+v", b, eventsOf[Held](f.rec))
	}
	// The burst's last delete that counted was two batches ago: this
	// batch's change comes more than planner.DeleteBurstGap after it, and
	// less after the tool's deletes (which would have kept it going).
	f.fc.Step(planner.DeleteBurstGap - coalesce.DefaultCap + 500*time.Millisecond)
	must(t, os.RemoveAll(filepath.Join(f.local, "gen")))
	if b := f.burstBatch(t); b.Deleted != 1 || len(eventsOf[Held](f.rec)) != 0 {
		t.Fatalf("second half: batch %+v, held %+v", b, eventsOf[Held](f.rec))
	}
	assertSameTree(t, f.local, f.remote("web-1"))
	assertClean(t, f, "web-1")
}

// What a burst deleted and a later batch of it writes again is back: rm -rf
// dist && tsc beside a delete elsewhere is judged by what stays deleted.
func TestDeleteBurstGivesBackWhatIsWrittenAgain(t *testing.T) {
	f := newEngineFixture(t, Config{})
	for i := range 60 {
		writeTree(t, f.local, map[string]string{fmt.Sprintf("gen/f%03d", i): "g", fmt.Sprintf("dist/b%03d", i%40): "b"})
	}
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	wait[InitialSync](t, f.rec)
	must(t, os.RemoveAll(filepath.Join(f.local, "dist")))
	if b := f.batch(t, coalesce.Change{Root: f.local, Rescan: true}, 1); b.Deleted != 1 || len(eventsOf[Held](f.rec)) != 0 {
		t.Fatalf("dist: batch %+v, held %+v", b, eventsOf[Held](f.rec))
	}
	for i := range 40 {
		writeTree(t, f.local, map[string]string{fmt.Sprintf("dist/b%03d", i): "built"})
	}
	for i := range 30 {
		must(t, os.Remove(filepath.Join(f.local, "gen", fmt.Sprintf("f%03d", i))))
	}
	if b := f.burstBatch(t); b.Deleted != 30 || len(eventsOf[Held](f.rec)) != 0 {
		t.Fatalf("dist built again, half of gen deleted: batch %+v, held %+v", b, eventsOf[Held](f.rec))
	}
	assertSameTree(t, f.local, f.remote("web-1"))
	assertClean(t, f, "web-1")
}
