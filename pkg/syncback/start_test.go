package syncback

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/localexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testwait"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncstate"
)

// memAncestry keeps what an engine confirmed for the next one, as
// pkg/session does on disk, for the same container only.
type memAncestry struct {
	mu    sync.Mutex
	saved []syncstate.Mapping
	// restore, when set, is called by a start from saved, as pkg/session
	// restores the conflicts saved with the ancestor.
	restore func(filesync.Target)
}

func (a *memAncestry) Start(t filesync.Target) filesync.Start {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.saved == nil {
		return filesync.Start{From: filesync.StartNone}
	}
	if a.restore != nil {
		a.restore(t)
	}
	return filesync.Start{From: filesync.StartSaved, Saved: a.saved, SavedAt: time.Now()}
}

func (a *memAncestry) Confirmed(_ filesync.Target, ms []syncstate.Mapping) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.saved = ms
}

// savedFixture is a fixture over ex whose local tree holds files, after
// the initial sync of a session that keeps what it confirms in anc.
func savedFixture(t *testing.T, ex *executor, cfg Config, files map[string]string) (*fixture, *memAncestry) {
	t.Helper()
	anc := &memAncestry{}
	f := &fixture{local: t.TempDir(), remote: filepath.Join(t.TempDir(), "app"), ex: ex}
	for rel, content := range files {
		write(t, f.local, rel, content, 0o644)
	}
	f.start(t, cfg, filesync.WithAncestry(anc))
	f.initialSync(t)
	return f, anc
}

// A session that starts from the ancestor the last one saved, against the
// same container: the container's writes to listed files made while no
// session ran come home (over a local delete too), a local edit goes up, a
// listed file both sides changed is a conflict with both kept, and no
// container change is replaced.
func TestStartFromSavedAncestor(t *testing.T) {
	f, anc := savedFixture(t, &executor{}, Config{}, map[string]string{"package-lock.json": "v1", "src/main.go": "package main",
		"gen/both.txt": "both v1", "gen/theirs.txt": "theirs v1", "gen/gone.txt": "gone"})
	if len(anc.saved) != 1 {
		t.Fatal("nothing confirmed")
	}

	// While no session runs.
	write(t, f.remote, "package-lock.json", "container v2", 0o644)
	write(t, f.remote, "gen/both.txt", "both, the container's", 0o644)
	write(t, f.remote, "gen/theirs.txt", "theirs, the container's", 0o644)
	write(t, f.local, "gen/both.txt", "both, the local one", 0o644)
	write(t, f.local, "src/main.go", "package main // edited", 0o644)
	must(t, os.Remove(filepath.Join(f.local, "gen/theirs.txt")))
	must(t, os.Remove(filepath.Join(f.local, "gen/gone.txt")))

	f.start(t, Config{}, filesync.WithAncestry(anc))
	f.initialSync(t)
	evs := f.pass(t)
	read := func(root, rel string) string {
		b, _ := os.ReadFile(filepath.Join(root, rel))
		return string(b)
	}
	for rel, want := range map[string]string{
		"package-lock.json": "container v2", "gen/theirs.txt": "theirs, the container's", "gen/both.txt": "both, the local one",
	} {
		if got := read(f.local, rel); got != want {
			t.Errorf("local %s = %q, want %q", rel, got, want)
		}
	}
	for rel, want := range map[string]string{
		"src/main.go": "package main // edited", "gen/both.txt": "both, the container's", "package-lock.json": "container v2",
	} {
		if got := read(f.remote, rel); got != want {
			t.Errorf("container %s = %q, want %q", rel, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(f.remote, "gen/gone.txt")); !os.IsNotExist(err) {
		t.Errorf("a local delete made while stopped did not reach the container: %v", err)
	}
	var conflicts []string
	for _, ev := range evs {
		if c, ok := ev.(Conflicted); ok {
			conflicts = append(conflicts, c.Path)
		}
	}
	if len(conflicts) != 1 || conflicts[0] != filepath.Join(f.local, "gen/both.txt") {
		t.Errorf("conflicts %v, want gen/both.txt; events %v", conflicts, evs)
	}
}

// A container change that its stat does not show (same size, mtime set
// back) is still never replaced or deleted by a start: the upload's
// precondition checks the container's hash against the saved ancestor.
func TestStartGuardsUnseenContainerChange(t *testing.T) {
	f, anc := savedFixture(t, &executor{}, Config{}, map[string]string{"package-lock.json": "v1", "gen/a.txt": "aaaa"})
	for rel, content := range map[string]string{"package-lock.json": "v9", "gen/a.txt": "bbbb"} {
		name := filepath.Join(f.remote, rel)
		fi, err := os.Stat(name)
		must(t, err)
		must(t, os.WriteFile(name, []byte(content), 0o644))
		must(t, os.Chtimes(name, fi.ModTime(), fi.ModTime()))
	}
	write(t, f.local, "package-lock.json", "v2", 0o644) // an edit
	must(t, os.Remove(filepath.Join(f.local, "gen/a.txt")))

	f.start(t, Config{}, filesync.WithAncestry(anc))
	f.initialSync(t)
	for rel, want := range map[string]string{"package-lock.json": "v9", "gen/a.txt": "bbbb"} {
		if b, err := os.ReadFile(filepath.Join(f.remote, rel)); err != nil || string(b) != want {
			t.Errorf("container %s = %q %v, want the container's %q", rel, b, err, want)
		}
	}
	var conflicts int
	for _, ev := range f.rec.take() {
		if _, ok := ev.(Conflicted); ok {
			conflicts++
		}
	}
	if conflicts != 2 {
		t.Errorf("%d conflicts reported, want 2", conflicts)
	}
}

// Where only the container file's mtime moved (a delta, an in-container
// copy), a start decides a listed file by its content: a local edit made
// while stopped goes up, a local delete is the container's too, and
// nothing is a conflict or comes home.
func TestStartMovedMtimeIsNoChange(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		t.Run(name, func(t *testing.T) {
			f, anc := savedFixture(t, &executor{Runner: *r}, Config{Deletes: true}, map[string]string{"gen/edited.txt": "aaaa", "gen/deleted.txt": "bbbb"})
			f.pass(t)
			hourAgo := time.Now().Add(-time.Hour)
			for _, rel := range []string{"gen/edited.txt", "gen/deleted.txt"} {
				must(t, os.Chtimes(filepath.Join(f.remote, rel), hourAgo, hourAgo))
			}
			write(t, f.local, "gen/edited.txt", "edited locally", 0o644)
			must(t, os.Remove(filepath.Join(f.local, "gen/deleted.txt")))

			f.start(t, Config{Deletes: true}, filesync.WithAncestry(anc))
			f.initialSync(t)
			evs := f.pass(t)
			if b, err := os.ReadFile(filepath.Join(f.remote, "gen/edited.txt")); err != nil || string(b) != "edited locally" {
				t.Errorf("container gen/edited.txt = %q %v, want the local edit", b, err)
			}
			if _, err := os.Stat(filepath.Join(f.remote, "gen/deleted.txt")); !os.IsNotExist(err) {
				t.Errorf("the local delete did not reach the container: %v", err)
			}
			if _, err := os.Stat(filepath.Join(f.local, "gen/deleted.txt")); !os.IsNotExist(err) {
				t.Errorf("a local delete was undone: %v", err)
			}
			for _, ev := range evs {
				if _, ok := ev.(Conflicted); ok {
					t.Errorf("conflict: %+v", ev)
				}
			}
		})
	}
}

// A conflict that stood when the session stopped stands at the next start
// from the saved state (Standing, Restore; pkg/session saves them with the
// ancestor): the container putting the ancestor's bytes back while stopped
// is a change made after it, a conflict again, not the local delete's to
// replace; a container side that did not move keeps both sides; a local
// save made while stopped is the answer to it. Before, a
// stop forgot the conflict and the start sent the local delete over the
// container's file (TestModel seed 3631759567890288979 round 513).
func TestStartKeepsAStandingConflict(t *testing.T) {
	for _, tt := range []struct {
		name                  string
		edit                  bool // the conflict's local side is an edit, not a delete
		batch                 bool // the start's pass plans a batch
		stopped               func(t *testing.T, f *fixture)
		wantLocal, wantRemote string // "" for absent
		wantConflict          bool
	}{
		{name: "the container puts the ancestor back", stopped: func(t *testing.T, f *fixture) {
			write(t, f.remote, "gen/g.txt", "ancestor", 0o644)
		}, wantRemote: "ancestor", wantConflict: true},
		{name: "nothing moves", stopped: func(t *testing.T, f *fixture) {}, wantRemote: "theirs", wantConflict: true},
		{name: "a local edit, nothing moves", edit: true, stopped: func(t *testing.T, f *fixture) {}, wantLocal: "edited", wantRemote: "theirs", wantConflict: true},
		{name: "a local edit, the container puts the ancestor back", edit: true, stopped: func(t *testing.T, f *fixture) {
			write(t, f.remote, "gen/g.txt", "ancestor", 0o644)
		}, wantLocal: "edited", wantRemote: "ancestor", wantConflict: true},
		// The save is the answer to the conflict: not reported again, and
		// sent, checked against what the conflict showed, though no watcher
		// saw it (TestModel seed 15620430712571607237 round 14: a touch -r
		// save of a conflict's file while stopped stayed home, unreported).
		{name: "a local save", batch: true, stopped: func(t *testing.T, f *fixture) {
			write(t, f.local, "gen/g.txt", "mine", 0o644)
		}, wantLocal: "mine", wantRemote: "mine"},
		{name: "a local save keeping size and mtime", edit: true, batch: true, stopped: func(t *testing.T, f *fixture) {
			name := filepath.Join(f.local, "gen/g.txt")
			fi, err := os.Stat(name)
			must(t, err)
			write(t, f.local, "gen/g.tmp", "EDITED", 0o644)
			must(t, os.Chtimes(filepath.Join(f.local, "gen/g.tmp"), fi.ModTime(), fi.ModTime()))
			must(t, os.Rename(filepath.Join(f.local, "gen/g.tmp"), name))
		}, wantLocal: "EDITED", wantRemote: "EDITED"},
		{name: "a local save and the container moves", stopped: func(t *testing.T, f *fixture) {
			write(t, f.local, "gen/g.txt", "mine", 0o644)
			write(t, f.remote, "gen/g.txt", "ancestor", 0o644)
		}, wantLocal: "mine", wantRemote: "ancestor", wantConflict: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, anc := savedFixture(t, &executor{}, Config{}, map[string]string{"package-lock.json": "v1", "gen/g.txt": "ancestor"})
			f.pass(t)
			// The conflict: the container edits, the local side deletes.
			write(t, f.remote, "gen/g.txt", "theirs", 0o644)
			if tt.edit {
				write(t, f.local, "gen/g.txt", "edited", 0o644)
			} else {
				must(t, os.Remove(filepath.Join(f.local, "gen/g.txt")))
			}
			if evs := f.pass(t); len(evs) != 1 {
				t.Fatalf("the conflict's pass: %v", evs)
			}
			cs := f.runner.Standing(src)
			if len(cs) != 1 || cs[0].Path != "gen/g.txt" || cs[0].Exists != tt.edit || len(cs[0].Remote.Sum) != 32 {
				t.Fatalf("standing conflicts %+v, want gen/g.txt's", cs)
			}

			tt.stopped(t, f)
			anc.restore = func(tg filesync.Target) { f.runner.Restore(tg, cs) }
			r := runOn(t, f, Config{}, filesync.WithAncestry(anc))
			evs := append(r.started, r.pass(t)...)
			if tt.batch {
				// Planned by the pass, on the worker: no watcher batch reports it.
				testwait.Until(t, func() bool {
					b, _ := os.ReadFile(filepath.Join(f.remote, "gen/g.txt"))
					return string(b) == tt.wantRemote
				}, "the container holding the save made while stopped")
			}
			for root, want := range map[string]string{f.local: tt.wantLocal, f.remote: tt.wantRemote} {
				b, err := os.ReadFile(filepath.Join(root, "gen/g.txt"))
				if got := string(b); got != want || (want == "") != os.IsNotExist(err) {
					t.Errorf("%s/gen/g.txt = %q (%v), want %q", root, got, err, want)
				}
			}
			var conflicts int
			for _, ev := range evs {
				if c, ok := ev.(Conflicted); ok && c.Path == filepath.Join(f.local, "gen/g.txt") {
					conflicts++
				}
			}
			if (conflicts > 0) != tt.wantConflict {
				t.Errorf("a conflict at gen/g.txt: %v, want %v; events %v", conflicts > 0, tt.wantConflict, evs)
			}
		})
	}
}

// A restored conflict that both sides ended while stopped (the local file
// deleted, the container's too) is over: it is not saved again, and a file
// the container makes there later, even with the bytes the conflict
// showed, comes home like any new one. Before, it stood on (no batch
// checked the local delete: the start found both sides gone), and the
// next start took the container's new file for the one the delete
// answered and deleted it (TestModel seed 267067436523443874 round 185).
func TestStartEndsAConflictGoneOnBothSides(t *testing.T) {
	f, anc := savedFixture(t, &executor{}, Config{}, map[string]string{"package-lock.json": "v1", "gen/g.txt": "ancestor"})
	f.pass(t)
	write(t, f.remote, "gen/g.txt", "theirs", 0o644)
	write(t, f.local, "gen/g.txt", "edited", 0o644)
	if evs := f.pass(t); len(evs) != 1 {
		t.Fatalf("the conflict's pass: %v", evs)
	}
	cs := f.runner.Standing(src)
	// While stopped, both sides delete it.
	must(t, os.Remove(filepath.Join(f.local, "gen/g.txt")))
	must(t, os.Remove(filepath.Join(f.remote, "gen/g.txt")))
	anc.restore = func(tg filesync.Target) { f.runner.Restore(tg, cs) }
	r := runOn(t, f, Config{}, filesync.WithAncestry(anc))
	r.pass(t)
	if got := r.runner.Standing(src); len(got) != 0 {
		t.Fatalf("standing after both sides deleted it: %+v", got)
	}
	// The container makes it again, with the bytes the conflict showed.
	write(t, f.remote, "gen/g.txt", "theirs", 0o644)
	r.pass(t)
	for root, want := range map[string]string{f.local: "theirs", f.remote: "theirs"} {
		if b, err := os.ReadFile(filepath.Join(root, "gen/g.txt")); err != nil || string(b) != want {
			t.Errorf("%s/gen/g.txt = %q (%v), want %q", root, b, err, want)
		}
	}
}
