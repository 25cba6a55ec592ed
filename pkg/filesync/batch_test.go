package filesync

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	clocktesting "k8s.io/utils/clock/testing"
)

// newBatchTarget returns an engine with one mapping of local into remote, and
// a target whose index and container hold what local holds now.
func newBatchTarget(t *testing.T, local, remote string) (*Engine, *target) {
	t.Helper()
	e := New(&localExecutor{}, Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(local), Remote: planner.RemotePath(remote)}}})
	tg := &target{Target: testTarget, ctx: context.Background(), due: make([]pending, 1), walkDeferred: make([]bool, 1)}
	idx := planner.NewIndex()
	syncOnce(t, &localExecutor{}, e.maps[0], idx)
	tg.idx = []*planner.Index{idx}
	return e, tg
}

// srcTarget is newBatchTarget over n files named by format, synced.
func srcTarget(t *testing.T, n int, format string) (local, remote string, e *Engine, tg *target) {
	t.Helper()
	local, remote = t.TempDir(), filepath.Join(t.TempDir(), "app")
	src := map[string]string{}
	for i := range n {
		src[fmt.Sprintf(format, i)] = "s"
	}
	writeTree(t, local, src)
	e, tg = newBatchTarget(t, local, remote)
	return local, remote, e, tg
}

// TestSyncBatchEarlyCopiesOnly: early rels (a peek at a batch still open)
// send their copies only; what deletes, or a copy that needs a delete first,
// waits for the batch itself.
func TestSyncBatchEarlyCopiesOnly(t *testing.T) {
	local, remote := t.TempDir(), filepath.Join(t.TempDir(), "app")
	writeTree(t, local, map[string]string{"keep": "k", "gone": "g", "dir/x": "x"})
	e, tg := newBatchTarget(t, local, remote)

	must(t, os.Remove(filepath.Join(local, "gone")))
	must(t, os.RemoveAll(filepath.Join(local, "dir")))
	writeTree(t, local, map[string]string{"new": "n", "dir": "now a file"})
	var early pending
	for _, rel := range []string{"gone", "dir", "new"} {
		early.addEarly(rel)
	}
	if r := e.syncBatch(tg, []pending{early}, false); r.err != nil || r.changed != 1 || r.deleted != 0 {
		t.Fatalf("early pass = %+v, want one copy and no delete", r)
	}
	diffTrees(t, "remote after the early pass", readTree(t, remote),
		treeOf(t, map[string]string{"keep": "k", "gone": "g", "dir/x": "x", "new": "n"}))

	// The batch brings the same paths: now everything goes.
	var batch pending
	for _, rel := range []string{"gone", "dir", "new"} {
		batch.add(rel)
	}
	if r := e.syncBatch(tg, []pending{batch}, false); r.err != nil {
		t.Fatal(r.err)
	}
	assertSameTree(t, local, remote)
}

// TestSyncBatchRescanHintsFirst: with a rescan, the hinted copies go at once,
// and the walk (which finds what no hint named, deletes included) waits for
// the next pass, once.
func TestSyncBatchRescanHintsFirst(t *testing.T) {
	local, remote := t.TempDir(), filepath.Join(t.TempDir(), "app")
	writeTree(t, local, map[string]string{"a": "a", "gone": "g"})
	e, tg := newBatchTarget(t, local, remote)

	must(t, os.Remove(filepath.Join(local, "gone")))
	writeTree(t, local, map[string]string{"hinted": "h", "unhinted": "u"})
	due := pending{rescan: true}
	due.add("hinted")
	if r := e.syncBatch(tg, []pending{due}, false); r.err != nil || r.changed != 1 || r.deleted != 0 {
		t.Fatalf("first pass = %+v, want the hinted copy only", r)
	}
	diffTrees(t, "remote after the first pass", readTree(t, remote), treeOf(t, map[string]string{"a": "a", "gone": "g", "hinted": "h"}))
	if !tg.due[0].rescan {
		t.Fatal("the walk was not put off to the next pass")
	}

	// The next pass walks, even with new hints.
	next := tg.due[0]
	tg.due[0] = pending{}
	next.add("a")
	if r := e.syncBatch(tg, []pending{next}, false); r.err != nil || r.changed != 1 || r.deleted != 1 {
		t.Fatalf("second pass = %+v, want the walk's copy and delete", r)
	}
	assertSameTree(t, local, remote)
	if tg.due[0].rescan {
		t.Fatal("the walk was put off twice")
	}

	// After a failure (dirty) the walk runs at once.
	must(t, os.Remove(filepath.Join(local, "unhinted")))
	due = pending{rescan: true}
	due.add("a")
	if r := e.syncBatch(tg, []pending{due}, true); r.err != nil || r.deleted != 1 || tg.due[0].rescan {
		t.Fatalf("dirty pass = %+v (walk put off: %v), want the walk at once", r, tg.due[0].rescan)
	}
	assertSameTree(t, local, remote)
}

// treeOf returns entries as readTree sees them once written.
func treeOf(t *testing.T, entries map[string]string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, entries)
	return readTree(t, dir)
}

// A remover's deletes cut into two batches are one burst when the second
// batch's first change came less than DeleteBurstGap after the first batch's
// deletes ran, however late a loaded machine plans it: 40 + 40 of 100 is
// held. One whose first change came later is judged on its own. Before, the
// gap ran to the plan, and a burst planned late went through unheld
// (TestModel seeds 10244155657300434128 round 34, 15620430712571607237
// round 33).
func TestSyncBatchBurstByWhenChangesCame(t *testing.T) {
	for _, tc := range []struct {
		after time.Duration // the second batch's first change, after the first batch
		held  bool
	}{{500 * time.Millisecond, true}, {planner.DeleteBurstGap + 500*time.Millisecond, false}} {
		t.Run(tc.after.String(), func(t *testing.T) {
			local, remote, e, tg := srcTarget(t, 100, "src/f%03d")
			fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
			e.clk = fc
			remove := func(from int) pending {
				b := pending{first: fc.Now()}
				for i := from; i < from+40; i++ {
					rel := fmt.Sprintf("src/f%03d", i)
					must(t, os.Remove(filepath.Join(local, rel)))
					b.add(rel)
				}
				return b
			}
			if r := e.syncBatch(tg, []pending{remove(0)}, false); r.err != nil || r.deleted != 40 || tg.holding() {
				t.Fatalf("the first 40 = %+v, holding %v", r, tg.holding())
			}
			fc.Step(tc.after)
			second := remove(40)
			fc.Step(3 * planner.DeleteBurstGap) // planned long after its changes came
			r := e.syncBatch(tg, []pending{second}, false)
			if r.err != nil || tg.holding() != tc.held || (r.deleted == 0) != tc.held {
				t.Fatalf("the next 40 = %+v, holding %v; want held %v", r, tg.holding(), tc.held)
			}
			if _, err := os.Lstat(filepath.Join(remote, "src", "f079")); tc.held && err != nil {
				t.Errorf("src/f079 went with the burst: %v", err)
			}
		})
	}
}

// TestSyncBatchGuardIgnoresHowTheBatchWasCut: a batch that deletes 60 files
// under src/ and writes 60 under lib/ is a mass delete however it was cut: a
// peek that sent lib/ first must not grow the total the guard compares with.
func TestSyncBatchGuardIgnoresHowTheBatchWasCut(t *testing.T) {
	for _, peek := range []bool{false, true} {
		t.Run(fmt.Sprintf("peek=%v", peek), func(t *testing.T) {
			local, remote, e, tg := srcTarget(t, 60, "src/f%02d")

			must(t, os.RemoveAll(filepath.Join(local, "src")))
			var rels []string
			lib := map[string]string{}
			for i := range 60 {
				lib[fmt.Sprintf("lib/f%02d", i)] = "l"
				rels = append(rels, fmt.Sprintf("lib/f%02d", i), fmt.Sprintf("src/f%02d", i))
			}
			writeTree(t, local, lib)
			rels = append(rels, "lib", "src")
			if peek {
				var early pending
				for rel := range lib {
					early.addEarly(rel)
				}
				early.addEarly("lib")
				if r := e.syncBatch(tg, []pending{early}, false); r.err != nil || r.changed != 61 {
					t.Fatalf("early pass = %+v", r)
				}
			}
			var batch pending
			for _, rel := range rels {
				batch.add(rel)
			}
			if r := e.syncBatch(tg, []pending{batch}, false); r.err != nil || r.deleted != 0 {
				t.Fatalf("batch = %+v, want its deletes held", r)
			}
			if !tg.holding() {
				t.Error("the mass delete was not held")
			}
			if _, err := os.Lstat(filepath.Join(remote, "src", "f00")); err != nil {
				t.Errorf("src/ lost in the container: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(remote, "lib", "f59")); err != nil {
				t.Errorf("lib/ not copied: %v", err)
			}
		})
	}
}
