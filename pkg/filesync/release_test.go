package filesync

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
)

// heldFixture syncs a local tree with 60 files under gen/ beside the fixture's
// few, then deletes gen/ locally: a mass delete the engine holds.
func heldFixture(t *testing.T, pods ...string) (*engineFixture, Held) {
	t.Helper()
	f := newEngineFixture(t, Config{})
	for i := range 60 {
		writeTree(t, f.local, map[string]string{fmt.Sprintf("gen/f%03d", i): "g"})
	}
	for _, p := range pods {
		f.e.AddTarget(podTarget(p))
	}
	f.run(t)
	for range pods {
		if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
			t.Fatal(ev.Err)
		}
	}
	must(t, os.RemoveAll(filepath.Join(f.local, "gen")))
	b := f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "gen")}, 1)
	held := waitCount[Held](t, f.rec, len(pods))
	if b.Deleted != 0 || len(held) != len(pods) {
		t.Fatalf("batch = %+v, held = %+v", b, held)
	}
	for _, p := range pods {
		if _, err := os.Stat(filepath.Join(f.remote(p), "gen", "f000")); err != nil {
			t.Fatalf("%s: gen/f000: %v", p, err)
		}
	}
	return f, held[0]
}

// A held mass delete is not run because the mapping grew: the verdict "more
// than half of what the container has" changes with later batches, but a
// held path is decided again only by a change under it or by an answer.
func TestEngineHeldDeletesDoNotRunWhenMappingGrows(t *testing.T) {
	f, _ := heldFixture(t, "web-1")
	growMapping(t, f)
	writeTree(t, f.local, map[string]string{"b": "b"})
	f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "b")}, 1)
	if _, err := os.Stat(filepath.Join(f.remote("web-1"), "gen", "f000")); err != nil {
		t.Errorf("gen/f000 was deleted without an answer: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.remote("web-1"), "more", "f199")); err != nil {
		t.Errorf("more/f199: %v", err)
	}
	assertClean(t, f, "web-1")
}

// growMapping adds 200 files under more/ and syncs them, then walks the
// tree: 60 held deletes are no longer "more than half" of the mapping.
func growMapping(t *testing.T, f *engineFixture) {
	t.Helper()
	add := map[string]string{}
	for i := range 200 {
		add[fmt.Sprintf("more/f%03d", i)] = "m"
	}
	writeTree(t, f.local, add)
	f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "more")}, 1)
	f.batch(t, coalesce.Change{Root: f.local, Rescan: true}, 1)
}

// Release applies what was held in every target holding it, and only that,
// checked again against the local tree: a held file restored locally
// meanwhile is not deleted (and is sent, if it changed), and a file deleted
// elsewhere meanwhile is not part of the answer.
func TestEngineReleaseAppliesExactlyTheHeldDeletes(t *testing.T) {
	f, held := heldFixture(t, "web-1", "web-2")
	if held.ID == "" || held.Under != filepath.Join(f.local, "gen") {
		t.Fatalf("held = %+v: want an ID and Under %q", held, filepath.Join(f.local, "gen"))
	}
	for _, h := range eventsOf[Held](f.rec) {
		if h.ID != held.ID {
			t.Fatalf("targets hold the same set under IDs %q and %q", held.ID, h.ID)
		}
	}
	writeTree(t, f.local, map[string]string{"gen/f007": "restored"})
	// Deleted after the hold, and not touched by any batch: not the answer's.
	must(t, os.Remove(filepath.Join(f.local, "a")))

	if n := f.e.Release(held.ID); n != 2 {
		t.Fatalf("Release = %d targets, want 2", n)
	}
	b := wait[Batch](t, f.rec)
	if b.Targets != 2 || b.Failed != 0 || b.Deleted == 0 {
		t.Errorf("batch = %+v", b)
	}
	for _, pod := range []string{"web-1", "web-2"} {
		got := readTree(t, f.remote(pod))
		want := map[string]string{"a": "file -rw-r--r-- a", "d": "dir -rwxr-xr-x", "d/x": "file -rw-r--r-- x",
			"with space": "dir -rwxr-xr-x", "with space/ü": "file -rw-r--r-- u",
			"gen": "dir -rwxr-xr-x", "gen/f007": "file -rw-r--r-- restored"}
		diffTrees(t, pod, got, want)
		assertClean(t, f, pod)
	}
	if n := f.e.Release(held.ID); n != 0 {
		t.Errorf("a second Release = %d targets, want 0: it was applied", n)
	}
	if held := eventsOf[Held](f.rec); len(held) != 2 {
		t.Errorf("held events = %+v, want the two of the hold", held)
	}
}

// A local change at or under a held path decides it again, as any batch
// would: here the set shrinks under the threshold, so what is still gone is
// deleted.
func TestEngineLocalChangeDecidesHeldAgain(t *testing.T) {
	f, _ := heldFixture(t, "web-1")
	for i := range 20 {
		writeTree(t, f.local, map[string]string{fmt.Sprintf("gen/f%03d", i): "back"})
	}
	b := f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "gen", "f000")}, 1)
	if b.Deleted != 40 || b.Failed != 0 {
		t.Errorf("batch = %+v, want the 40 files still gone deleted", b)
	}
	assertSameTree(t, f.local, f.remote("web-1"))
	assertClean(t, f, "web-1")
}

// The answer lifts the mass-delete verdict only: a local root that is
// missing when it comes still holds every delete.
func TestEngineReleaseKeepsRootGuard(t *testing.T) {
	f, held := heldFixture(t, "web-1")
	moved := f.local + ".moved"
	must(t, os.Rename(f.local, moved))
	t.Cleanup(func() { _ = os.Rename(moved, f.local) })
	if n := f.e.Release(held.ID); n != 1 {
		t.Fatalf("Release = %d", n)
	}
	b := wait[Batch](t, f.rec)
	if b.Deleted != 0 || b.Failed != 0 {
		t.Errorf("batch = %+v", b)
	}
	if h := waitCount[Held](t, f.rec, 2)[1]; !strings.Contains(h.Reason, "is missing") || h.ID != "" {
		t.Errorf("held = %+v, want the missing root said, with no ID", h)
	}
	if _, err := os.Stat(filepath.Join(f.remote("web-1"), "gen", "f000")); err != nil {
		t.Errorf("gen/f000: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.remote("web-1"), "a")); err != nil {
		t.Errorf("a: %v", err)
	}
}

// More events under the held paths (an rm -rf cut into two batches) that
// leave the same set held ask the same question: said once.
func TestEngineSameHeldSetSaidOnce(t *testing.T) {
	f, _ := heldFixture(t, "web-1")
	f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "gen", "f059")}, 1)
	if held := eventsOf[Held](f.rec); len(held) != 1 {
		t.Errorf("held events = %+v, want one", held)
	}
	if _, err := os.Stat(filepath.Join(f.remote("web-1"), "gen", "f000")); err != nil {
		t.Errorf("gen/f000: %v", err)
	}
	// Restored and synced, then deleted again: a new hold, said again.
	for i := range 60 {
		writeTree(t, f.local, map[string]string{fmt.Sprintf("gen/f%03d", i): "g2"})
	}
	f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "gen")}, 1)
	must(t, os.RemoveAll(filepath.Join(f.local, "gen")))
	f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "gen")}, 1)
	if held := eventsOf[Held](f.rec); len(held) != 2 {
		t.Errorf("held events = %+v, want two", held)
	}
	assertClean(t, f, "web-1")
}

// The same set decided again by a later event under it, and held again, is
// still held: neither run once the mapping grows (a later plan's guard would
// let 60 of 260 through) nor let sync-back's passes visit meanwhile.
func TestEngineSameHeldSetStaysHeld(t *testing.T) {
	f, _ := heldFixture(t, "web-1")
	f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "gen", "f059")}, 1)
	err := f.e.Visit(t.Context(), podTarget("web-1"), func(*Visit) error { return nil })
	if !errors.Is(err, ErrNotSynced) {
		t.Errorf("Visit while the set is held again = %v, want ErrNotSynced", err)
	}
	growMapping(t, f)
	if _, err := os.Stat(filepath.Join(f.remote("web-1"), "gen", "f000")); err != nil {
		t.Errorf("gen/f000 was deleted without an answer: %v", err)
	}
	if held := eventsOf[Held](f.rec); len(held) != 1 {
		t.Errorf("held events = %+v, want one", held)
	}
	assertClean(t, f, "web-1")
}

// Held deletes made again locally are decided again, however the watcher
// brought the news: a rescan (a directory made again, its files written
// before the watch on it was placed) or the directory's own event names
// none of them, yet the walk sees them back. Before, the set stayed held for
// good, and sync-back's passes with it (seen in TestModel seed 99, round 9).
func TestEngineHeldMadeAgainIsDecidedAgain(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(f *engineFixture) coalesce.Change
	}{
		{"a rescan", func(f *engineFixture) coalesce.Change { return coalesce.Change{Root: f.local, Rescan: true} }},
		{"the directory's event", func(f *engineFixture) coalesce.Change {
			return coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "gen")}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := genSynced(t, Config{})
			for i := range 60 {
				must(t, os.Remove(filepath.Join(f.local, "gen", fmt.Sprintf("f%03d", i))))
			}
			f.batch(t, coalesce.Change{Root: f.local, Rescan: true}, 1)
			if held := eventsOf[Held](f.rec); len(held) != 1 || held[0].Deleted != 60 {
				t.Fatalf("held = %+v, want the 60 files", held)
			}
			for i := range 60 {
				writeTree(t, f.local, map[string]string{fmt.Sprintf("gen/f%03d", i): "g"})
			}
			f.fc.Step(planner.DeleteBurstGap)
			f.batch(t, tt.change(f), 1)
			if err := f.e.Visit(t.Context(), podTarget("web-1"), func(*Visit) error { return nil }); err != nil {
				t.Errorf("Visit after the held files were made again = %v, want none: nothing is held", err)
			}
			if held := eventsOf[Held](f.rec); len(held) != 1 {
				t.Errorf("held events = %+v, want the one", held)
			}
			assertSameTree(t, f.local, f.remote("web-1"))
			assertClean(t, f, "web-1")
		})
	}
}
