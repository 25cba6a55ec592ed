package planner

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/syncstate"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
	"github.com/livesync-dev/kubectl-livesync/pkg/threeway"
)

// startFixture syncs local into remote as a first start would, and
// returns the mapping and the records an Ancestry would have saved.
func startFixture(t *testing.T, ex Executor, local, remote string) (*Resolved, syncstate.Mapping) {
	t.Helper()
	m := testMapping(t, local, remote, globMatcher{"*.pyc"})
	l, err := ListRemote(context.Background(), ex, testTarget, m, false)
	must(t, err)
	tree, _, err := LocalTree(m)
	must(t, err)
	p, idx, err := Initial(m, tree, l, InitialUpload)
	must(t, err)
	res, err := apply(context.Background(), ex, testTarget, m, p, tarstream.Options{})
	must(t, err)
	idx.Apply(p, res.Result)
	return m, idx.Records()
}

// ancOut is the ancestor's entry at gen/out.
func ancOut(anc *Index) Entry {
	e, _ := anc.Get("gen/out")
	return e
}

func listedGen(rel string, _ bool) bool { return strings.HasPrefix(rel, "gen/") }

// A restart against the same container: what either side did meanwhile is
// decided three-way; the container's changes to listed paths are never
// overwritten, a local delete goes up only where the container still holds
// the ancestor, and what is unchanged costs no copy.
func TestPlanStart(t *testing.T) {
	ex := busybox(t)
	local, remote := t.TempDir(), t.TempDir()
	writeTree(t, local, map[string]string{
		"same": "s", "edited": "v1", "gone": "g", "lib/x": "lib v1",
		"gen/out": "gen v1", "gen/both": "both v1", "gen/theirs": "theirs v1", "gen/gone": "gg",
		"olddir/a": "a", "olddir/b": "b", "keepdir/gen.txt": "k",
		"both-gone": "bg",
	})
	m, saved := startFixture(t, ex, local, remote)
	anc := IndexOf(saved)
	if anc.Len() != saved.Len() || anc.Len() == 0 {
		t.Fatalf("records round trip: %d of %d", anc.Len(), saved.Len())
	}

	// While no session ran: local changes...
	writeTree(t, local, map[string]string{"edited": "v2 longer", "created": "c", "gen/both": "both local"})
	for _, n := range []string{"gone", "gen/theirs", "olddir", "both-gone"} {
		must(t, os.RemoveAll(filepath.Join(local, n)))
	}
	// ...and the container's.
	writeTree(t, remote, map[string]string{
		"lib/x": "lib container", "gen/out": "gen container", "gen/both": "both container",
		"gen/theirs": "theirs container", "gen/new": "new in container", "other/new": "unlisted, container's",
		"olddir/a.pyc": "ignored",
	})
	must(t, os.Remove(filepath.Join(remote, "both-gone")))
	must(t, os.Remove(filepath.Join(remote, "gen/gone")))

	l, err := ListRemote(context.Background(), ex, testTarget, m, true)
	must(t, err)
	for rel, re := range l.Entries {
		if re.Sum != nil {
			t.Fatalf("a stat listing hashed %s", rel)
		}
	}
	if l.Alg != "sha256sum" {
		t.Fatalf("a stat listing names the tool %q, want sha256sum (moves and deltas rely on it)", l.Alg)
	}
	tree, _, err := LocalTree(m)
	must(t, err)
	p, idx, decided := ThreeWay(m, tree, l, anc, time.Now(), listedGen)
	want := map[string]threeway.Action{
		"edited": threeway.Send, "created": threeway.Send, "gone": threeway.Delete, "olddir": threeway.Delete,
		"olddir/a": threeway.Delete, "olddir/b": threeway.Delete, "lib/x": threeway.Send,
		"gen/out": threeway.Back, "gen/both": threeway.Both, "gen/theirs": threeway.Theirs, "gen/new": threeway.Back,
		"gen/gone": threeway.Back, "other": threeway.Leave, "other/new": threeway.Leave, "both-gone": threeway.Forget,
	}
	for _, rel := range slices.Sorted(maps.Keys(want)) {
		if decided[rel] != want[rel] {
			t.Errorf("%s: decided %s, want %s", rel, decided[rel], want[rel])
		}
	}
	for _, rel := range slices.Sorted(maps.Keys(decided)) {
		if _, ok := want[rel]; !ok {
			t.Errorf("%s: decided %s, want keep", rel, decided[rel])
		}
	}
	assertPlan(t, p, []string{"created", "edited", "lib/x"}, []string{"gone", "olddir"})

	// The index keeps the ancestor where sync-back decides, forgets what
	// comes home as new, and records the unchanged with their hashes.
	if e, ok := idx.Get("gen/out"); !ok || e.Sum == nil || *e.Sum != *ancOut(anc).Sum {
		t.Errorf("gen/out: index %+v, want the ancestor", e)
	}
	if _, ok := idx.Get("gen/both"); !ok {
		t.Error("gen/both: the ancestor is not kept")
	}
	for _, rel := range []string{"gen/theirs", "gen/new", "other/new", "both-gone"} {
		if _, ok := idx.Get(rel); ok {
			t.Errorf("%s: in the index", rel)
		}
	}
	if e, ok := idx.Get("same"); !ok || e.Sum == nil {
		t.Errorf("same: %+v %v", e, ok)
	}

	res, err := apply(context.Background(), ex, testTarget, m, p, tarstream.Options{})
	must(t, err)
	idx.Apply(p, res.Result)
	got := readTree(t, remote)
	for rel, want := range map[string]string{
		"edited": "v2 longer", "created": "c", "lib/x": "lib v1", "gen/out": "gen container",
		"gen/both": "both container", "gen/theirs": "theirs container", "gen/new": "new in container",
		"other/new": "unlisted, container's", "same": "s",
	} {
		if !strings.Contains(got[rel], want) {
			t.Errorf("container %s = %q, want %q", rel, got[rel], want)
		}
	}
	for _, rel := range []string{"gone", "olddir/a", "olddir/a.pyc", "both-gone"} {
		if _, ok := got[rel]; ok {
			t.Errorf("container still has %s", rel)
		}
	}
}

// A local delete of a directory under which the container changed a listed
// file deletes the rest, never that file.
func TestPlanStartDeleteKeepsContainerChange(t *testing.T) {
	ex := busybox(t)
	local, remote := t.TempDir(), t.TempDir()
	writeTree(t, local, map[string]string{"gen/a": "a", "gen/sub/b": "b", "gen/sub/c": "c"})
	m, saved := startFixture(t, ex, local, remote)
	must(t, os.RemoveAll(filepath.Join(local, "gen")))
	writeTree(t, remote, map[string]string{"gen/sub/b": "b from the container"})
	l, err := ListRemote(context.Background(), ex, testTarget, m, true)
	must(t, err)
	tree, _, err := LocalTree(m)
	must(t, err)
	p, _, decided := ThreeWay(m, tree, l, IndexOf(saved), time.Now(), listedGen)
	if decided["gen/sub/b"] != threeway.Theirs || decided["gen"] != threeway.Leave || decided["gen/sub"] != threeway.Leave {
		t.Errorf("decided %v", decided)
	}
	assertPlan(t, p, nil, []string{"gen/a", "gen/sub/c"})
}

// Stat data spares the hash of an unchanged file; a changed ctime, or a
// record too close to its save, makes it read again.
func TestLocalSameByStat(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"f": "content"})
	m := testMapping(t, dir, "/app", nil)
	mt := &Meter{}
	tree, _, err := LocalTreeMeter(m, mt, 0)
	must(t, err)
	if n := mt.Walked.Load(); n != 1 {
		t.Errorf("walked %d, want 1", n)
	}
	le := tree.Entries["f"]
	wrong := [32]byte{1} // not the file's hash: only a read would tell
	a := le
	a.Sum = &wrong
	if le.Ino == 0 || le.CTime == 0 {
		// A platform that does not say inode and ctime reads every file.
		if l := le; localSame(m, "f", a, &l, time.Now().Add(time.Hour), mt) {
			t.Error("without stat data, a file was trusted unread")
		}
		return
	}
	after := time.Unix(0, le.CTime).Add(2 * time.Second)
	if l := le; !localSame(m, "f", a, &l, after, mt) || l.Sum != &wrong {
		t.Error("an unchanged file was read again")
	}
	if n := mt.Hashed.Load(); n != 0 {
		t.Errorf("an unchanged file counted as read: %d", n)
	}
	if l := le; localSame(m, "f", a, &l, time.Unix(0, le.CTime), mt) {
		t.Error("a record saved within its file's ctime tick was trusted")
	}
	if n := mt.Hashed.Load(); n != 1 {
		t.Errorf("a file read again counted %d times, want 1", n)
	}
	must(t, os.Chmod(filepath.Join(dir, "f"), 0o600))
	must(t, os.Chmod(filepath.Join(dir, "f"), le.Mode))
	tree, _, err = LocalTree(m)
	must(t, err)
	if l := tree.Entries["f"]; localSame(m, "f", a, &l, time.Now().Add(time.Hour), mt) {
		t.Error("a file whose ctime changed was not read again")
	}
}

// The mass-delete guard holds a start's local deletes as it holds an
// initial sync's.
func TestPlanStartMassDeleteHeld(t *testing.T) {
	ex := busybox(t)
	local, remote := t.TempDir(), t.TempDir()
	files := map[string]string{}
	for i := range 80 {
		files["src/f"+string(rune('a'+i/26))+string(rune('a'+i%26))] = "x"
	}
	writeTree(t, local, files)
	m, saved := startFixture(t, ex, local, remote)
	for rel := range files {
		if !strings.HasSuffix(rel, "a") {
			must(t, os.Remove(filepath.Join(local, rel)))
		}
	}
	l, err := ListRemote(context.Background(), ex, testTarget, m, true)
	must(t, err)
	tree, _, err := LocalTree(m)
	must(t, err)
	p, idx, _ := ThreeWay(m, tree, l, IndexOf(saved), time.Now(), listedGen)
	GuardInitial(m, p, idx, l)
	if p.Held == nil || len(p.Deletes) != 0 {
		t.Fatalf("deletes not held: %d deletes, held %+v", len(p.Deletes), p.Held)
	}
}

// Saved records round-trip through Records and IndexOf, an unknown entry
// stays unknown, and a record with a path that is not clean is dropped.
func TestRecordsRoundTrip(t *testing.T) {
	x := NewIndex()
	sum := [32]byte{9}
	x.Put("a", Entry{Type: TypeFile, Mode: 0o644, Size: 3, MTime: time.Unix(5, 6), Sum: &sum, Ino: 7, CTime: 8})
	x.Put("d", Entry{Type: TypeDir, Mode: 0o755})
	x.Put("d/l", Entry{Type: TypeSymlink, Link: "../a"})
	x.Put("s", Entry{Type: TypeFile, Sum: &sum, stale: true})
	recs := append(x.Records().Entries(), Record{Path: "../escape", Type: uint8(TypeFile)}, Record{Path: "x", Type: 9})
	y := IndexOf(syncstate.MappingOf(recs))
	if y.Len() != 4 {
		t.Fatalf("round trip: %d entries", y.Len())
	}
	if e, _ := y.Get("a"); e.Sum == nil || *e.Sum != sum || !e.MTime.Equal(time.Unix(5, 6)) || e.Ino != 7 || e.CTime != 8 {
		t.Errorf("a: %+v", e)
	}
	if e, _ := y.Get("s"); !e.stale || e.Sum != nil {
		t.Errorf("s: %+v", e)
	}
	if e, _ := y.Get("d/l"); e.Link != "../a" {
		t.Errorf("d/l: %+v", e)
	}
}

// Without a usable ancestor, a listed file the container wrote since it
// started and that differs from the local one is left (sync-back reports the
// conflict); the image's older copy, and an unlisted file, are replaced.
func TestPlanInitialLeavesContainersOwnWrites(t *testing.T) {
	ex := busybox(t)
	local, remote := t.TempDir(), t.TempDir()
	writeTree(t, local, map[string]string{"gen/new": "local", "gen/image": "local", "src/new": "local", "gen/same": "s"})
	writeTree(t, remote, map[string]string{"gen/new": "written since the start", "gen/image": "the image's", "src/new": "written since", "gen/same": "s"})
	started := time.Now().Add(-time.Hour)
	old := started.Add(-time.Hour)
	must(t, os.Chtimes(filepath.Join(remote, "gen/image"), old, old))
	m := testMapping(t, local, remote, nil)
	l, err := ListRemote(context.Background(), ex, testTarget, m, false)
	must(t, err)
	tree, _, err := LocalTree(m)
	must(t, err)
	theirs := func(rel string, re remoteEntry) bool { return re.MTime > started.Unix() && listedGen(rel, false) }
	p, idx, err := InitialWith(m, tree, l, InitialUpload, theirs)
	must(t, err)
	assertPlan(t, p, []string{"gen/image", "src/new"}, nil)
	if _, ok := idx.Get("gen/new"); ok {
		t.Error("the container's own write is indexed: sync-back would take it for a container change over the ancestor")
	}
	if _, ok := idx.Get("gen/same"); !ok {
		t.Error("an equal file is not indexed")
	}
}

// A local file where the container made a directory holding a listed file
// it wrote: neither replaces the other (the file comes home through
// sync-back); without anything to keep there, the local file wins.
func TestPlanStartTypeChangeKeepsListed(t *testing.T) {
	ex := busybox(t)
	local, remote := t.TempDir(), t.TempDir()
	writeTree(t, local, map[string]string{"cfg": "a file", "other": "a file"})
	m, saved := startFixture(t, ex, local, remote)
	for _, n := range []string{"cfg", "other"} {
		must(t, os.Remove(filepath.Join(remote, n)))
	}
	writeTree(t, remote, map[string]string{"cfg/a.json": "{}", "other/b.txt": "b"})
	l, err := ListRemote(context.Background(), ex, testTarget, m, true)
	must(t, err)
	tree, _, err := LocalTree(m)
	must(t, err)
	listed := func(rel string, _ bool) bool { return strings.HasSuffix(rel, ".json") }
	p, _, decided := ThreeWay(m, tree, l, IndexOf(saved), time.Now(), listed)
	if decided["cfg"] != threeway.Leave || decided["cfg/a.json"] != threeway.Back || decided["other"] != threeway.Send {
		t.Errorf("decided %v", decided)
	}
	assertPlan(t, p, []string{"other"}, []string{"other"})
}
