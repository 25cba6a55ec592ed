package syncback

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/ignore"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/localexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// running is a fixture whose engine runs (batches, not only the initial
// sync), with the runner as its upload guard.
type running struct {
	*fixture
	changes chan coalesce.Change
	events  chan filesync.Event
	started []Event // sync-back's events of the initial sync
}

func newRunning(t *testing.T, ex *executor, cfg Config) *running {
	t.Helper()
	fx := &fixture{local: t.TempDir(), remote: filepath.Join(t.TempDir(), "app"), ex: ex}
	write(t, fx.local, "package-lock.json", "v1", 0o644)
	write(t, fx.local, "src/main.go", "package main", 0o644)
	write(t, fx.local, ignore.FileName, "__pycache__/\n*.log\n", 0o644)
	return runOn(t, fx, cfg)
}

// runOn starts a running session of fx's sync (its engine also takes opts)
// and waits for its initial sync.
func runOn(t *testing.T, fx *fixture, cfg Config, opts ...filesync.Option) *running {
	t.Helper()
	fx.rec = &recorder{}
	f := &running{fixture: fx, changes: make(chan coalesce.Change), events: make(chan filesync.Event, 100)}
	ex := fx.ex
	if cfg.Globs == nil {
		cfg.Globs = []string{"package-lock.json", "gen/**"}
	}
	var err error
	f.runner, err = New(cfg, f.rec, clocktesting.NewFakeClock(time.Unix(1e9, 0)))
	must(t, err)
	match, err := ignore.New(f.local, ignore.Options{})
	must(t, err)
	f.engine = filesync.New(ex, filesync.Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(f.local), Remote: planner.RemotePath(f.remote)}}, Matchers: []planner.Matcher{match}},
		append([]filesync.Option{filesync.WithUploadGuard(f.runner), filesync.WithReporter(filesync.ReporterFunc(func(ev filesync.Event) {
			switch ev.(type) {
			case filesync.InitialSync, filesync.Batch, filesync.Recovered:
				f.events <- ev
			}
		}))}, opts...)...)
	f.runner.Serve(f.engine)
	inc, err := remote.Incarnation(context.Background(), ex, src)
	must(t, err)
	f.runner.Add(src, time.Unix(1, 0), inc)
	f.engine.AddTarget(src)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.engine.Run(ctx, f.changes) }()
	t.Cleanup(func() { cancel(); <-done })
	if is, ok := f.next(t).(filesync.InitialSync); !ok || is.Err != nil {
		t.Fatalf("initial sync: %#v", is)
	}
	f.started = f.rec.take()
	return f
}

func (f *running) next(t *testing.T) filesync.Event {
	t.Helper()
	select {
	case ev := <-f.events:
		return ev
	case <-time.After(60 * time.Second):
		t.Fatal("no event from the engine") // a deadlock, not a slow machine
		return nil
	}
}

// save sends local changes at rels as one batch and returns its outcome.
func (f *running) save(t *testing.T, rels ...string) filesync.Batch {
	t.Helper()
	for _, rel := range rels {
		f.changes <- coalesce.Change{Root: f.local, Path: f.path(rel)}
	}
	b, ok := f.next(t).(filesync.Batch)
	if !ok {
		t.Fatalf("want a batch, got %#v", b)
	}
	return b
}

// TestUploadPrecondition holds the upload side of the three-way rules with
// the real engine and apply.sh under busybox (with and without sha256sum)
// and GNU: a container change that no scan has seen yet is never
// overwritten by an upload; the batch's other paths still land; both sides
// stay until the next local save, which wins.
func TestUploadPrecondition(t *testing.T) {
	vs := localexec.Variants(t)
	vs["busybox without sha256sum"] = localexec.Busybox(t, "sha256sum")
	for name, r := range vs {
		t.Run(name, func(t *testing.T) {
			noSum := name == "busybox without sha256sum"
			remoteSum := func(s string) string {
				if noSum {
					return ""
				}
				return sum(s)
			}
			f := newRunning(t, &executor{Runner: *r}, Config{})
			if evs := f.pass(t); len(evs) != 0 {
				t.Fatalf("first pass: %v", evs)
			}

			// The container rewrites the lockfile and the local side saves
			// it too, before any scan: the upload must not replace it.
			write(t, f.remote, "package-lock.json", "from the container", 0o644)
			write(t, f.local, "package-lock.json", "saved locally", 0o644)
			write(t, f.local, "src/main.go", "package main // edited", 0o644)
			b := f.save(t, "package-lock.json", "src/main.go")
			if b.Failed != 0 || b.Changed != 1 {
				t.Fatalf("batch: %+v", b)
			}
			evs := f.rec.take()
			if len(evs) != 1 {
				t.Fatalf("conflict events: %v", evs)
			}
			if c, ok := evs[0].(Conflicted); !ok || c.Target != src || c.Path != f.path("package-lock.json") ||
				c.LocalSum != sum("saved locally") || c.RemoteSum != remoteSum("from the container") {
				t.Fatalf("conflict event: %#v", evs[0])
			}
			if got := read(t, f.remote, "package-lock.json"); got != "from the container" {
				t.Fatalf("the upload replaced the container's unseen change: %q", got)
			}
			if got := read(t, f.remote, "src/main.go"); got != "package main // edited" {
				t.Fatalf("the rest of the batch did not land: %q", got)
			}
			if got := read(t, f.local, "package-lock.json"); got != "saved locally" {
				t.Fatalf("local file: %q", got)
			}
			// Nothing comes back either, and the conflict is said once.
			if evs := f.pass(t); len(evs) != 0 {
				t.Fatalf("a pass after the conflict: %v", evs)
			}
			if got := read(t, f.local, "package-lock.json"); got != "saved locally" {
				t.Fatalf("local file after a pass: %q", got)
			}
			// The path planned again without a local save (as a walk after
			// a failure plans it): still left alone.
			if b := f.save(t, "package-lock.json"); b.Failed != 0 || b.Changed != 0 {
				t.Fatalf("batch without a save: %+v", b)
			}
			if got := read(t, f.remote, "package-lock.json"); got != "from the container" {
				t.Fatalf("replaced without a local save: %q", got)
			}
			if evs := f.rec.take(); len(evs) != 0 {
				t.Fatalf("events without a save: %v", evs)
			}
			// The next local save wins.
			write(t, f.local, "package-lock.json", "saved again", 0o644)
			if b := f.save(t, "package-lock.json"); b.Failed != 0 || b.Changed != 1 {
				t.Fatalf("the next save: %+v", b)
			}
			if got := read(t, f.remote, "package-lock.json"); got != "saved again" {
				t.Fatalf("the next local save did not win: %q", got)
			}
			if evs := f.pass(t); len(evs) != 0 {
				t.Fatalf("a pass after the next save: %v", evs)
			}

			// A new file on both sides (the ancestor: nothing there).
			write(t, f.remote, "gen/new.go", "theirs", 0o644)
			write(t, f.local, "gen/new.go", "mine", 0o644)
			f.save(t, "gen/new.go")
			if got := read(t, f.remote, "gen/new.go"); got != "theirs" {
				t.Fatalf("a new container file replaced: %q", got)
			}
			evs = f.rec.take()
			if c, ok := evs[0].(Conflicted); len(evs) != 1 || !ok || c.LocalSum != sum("mine") || c.RemoteSum != remoteSum("theirs") {
				t.Fatalf("conflict events for a new file: %#v", evs)
			}

			// A local delete over a container change: the change stays.
			write(t, f.remote, "package-lock.json", "changed in the container again", 0o644)
			must(t, os.Remove(f.path("package-lock.json")))
			f.save(t, "package-lock.json")
			if got := read(t, f.remote, "package-lock.json"); got != "changed in the container again" {
				t.Fatalf("a local delete removed the container's change: %q", got)
			}
			evs = f.rec.take()
			if c, ok := evs[0].(Conflicted); len(evs) != 1 || !ok || c.LocalSum != "" || c.RemoteSum != remoteSum("changed in the container again") {
				t.Fatalf("conflict events for a delete: %#v", evs)
			}

			// A listed directory deleted locally while the container made a
			// file in it that no scan has seen: nothing of it is deleted.
			write(t, f.local, "gen/sub/a.go", "a", 0o644)
			f.save(t, "gen/sub/a.go")
			write(t, f.remote, "gen/sub/b.go", "made in the container", 0o644)
			must(t, os.RemoveAll(f.path("gen/sub")))
			f.save(t, "gen/sub")
			if got := read(t, f.remote, "gen/sub/b.go"); got != "made in the container" {
				t.Fatalf("the container's new file: %q", got)
			}
			if got := read(t, f.remote, "gen/sub/a.go"); got != "a" {
				t.Fatalf("gen/sub/a.go in the container: %q", got)
			}
			// The pass that looks at what the delete would take reports it
			// (and brings the new file home).
			if evs := f.rec.take(); len(evs) != 0 {
				t.Fatalf("events of the batch: %#v", evs)
			}
			evs = f.pass(t)
			if c, ok := evs[0].(Conflicted); len(evs) != 2 || !ok || c.Path != f.path("gen/sub") {
				t.Fatalf("conflict events for a directory delete: %#v", evs)
			}

			// An unlisted path is never checked: the local side wins.
			write(t, f.remote, "src/main.go", "changed in the container", 0o644)
			write(t, f.local, "src/main.go", "package main // again", 0o644)
			f.save(t, "src/main.go")
			if got := read(t, f.remote, "src/main.go"); got != "package main // again" {
				t.Fatalf("an unlisted path: %q", got)
			}
		})
	}
}

// TestExpectOnlyOnTheSource: another replica is upload-only, so it gets the
// source's content whatever it holds; checking it would turn two replicas
// writing different content into a conflict.
func TestExpectOnlyOnTheSource(t *testing.T) {
	r, err := New(Config{Globs: []string{"lock"}}, nil, nil)
	must(t, err)
	other := filesync.Target{Namespace: "ns", Pod: "web-2", Container: "app", ContainerID: "c2"}
	r.Add(src, time.Unix(1, 0), "mnt:[1]")
	r.Add(other, time.Unix(2, 0), "mnt:[2]")
	local := filepath.Join(t.TempDir(), "lock")
	for _, tc := range []struct {
		u    filesync.Upload
		want string
	}{
		{filesync.Upload{Target: src, Rel: "lock", Local: local, Known: true}, "a./lock"},
		{filesync.Upload{Target: other, Rel: "lock", Local: local, Known: true}, ""},
		{filesync.Upload{Target: src, Rel: "other", Local: local, Known: true}, ""},
		{filesync.Upload{Target: src, Rel: "lock", Local: local, Has: true}, ""}, // unknown: an unconfirmed upload
		{filesync.Upload{Target: src, Rel: "lock", Local: local, Has: true, Known: true,
			Ancestor: planner.Entry{Type: planner.TypeFile, Size: 3, MTime: time.Unix(7, 0)}}, "h:3:7./lock"},
	} {
		if got, skip := r.Expect(tc.u); got != tc.want || skip {
			t.Errorf("Expect(%+v) = %q, %v; want %q", tc.u, got, skip, tc.want)
		}
	}
}

// TestDirDeleteWithIgnoredEntries: a listed directory deleted locally
// leaves the source container even when the container holds ignored
// entries in it (a __pycache__/, a *.log) that the index never holds, as it
// does without sync-back; one that holds a listed file the local side never
// saw stays, a conflict, as before.
func TestDirDeleteWithIgnoredEntries(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		t.Run(name, func(t *testing.T) {
			ex := &executor{Runner: *r}
			f := newRunning(t, ex, Config{})
			write(t, f.local, "gen/sub/a.go", "a", 0o644)
			f.save(t, "gen/sub/a.go")
			f.pass(t)
			write(t, f.remote, "gen/sub/__pycache__/a.cpython-312.pyc", "bytecode", 0o644)
			write(t, f.remote, "gen/sub/run.log", "log", 0o644)
			if evs := f.pass(t); len(evs) != 0 {
				t.Fatalf("ignored files came back: %v", evs)
			}
			must(t, os.RemoveAll(f.path("gen/sub")))
			f.save(t, "gen/sub")
			for range 2 { // the pass that looks, then a batch of another path
				if evs := f.rec.take(); len(evs) != 0 {
					t.Fatalf("events for the delete: %#v", evs)
				}
				f.pass(t)
				f.save(t, "src/main.go")
			}
			if _, err := os.Lstat(filepath.Join(f.remote, "gen", "sub")); !os.IsNotExist(err) {
				t.Fatalf("the directory deleted locally is still in the container: %v", err)
			}
			if evs := f.rec.take(); len(evs) != 0 {
				t.Fatalf("events after the delete: %#v", evs)
			}

			// A listed file made in the container that no scan has seen:
			// the directory stays, a conflict, and the file comes home.
			write(t, f.local, "gen/sub2/a.go", "a", 0o644)
			f.save(t, "gen/sub2/a.go")
			f.pass(t)
			write(t, f.remote, "gen/sub2/x.log", "log", 0o644)
			write(t, f.remote, "gen/sub2/b.go", "made in the container", 0o644)
			must(t, os.RemoveAll(f.path("gen/sub2")))
			f.save(t, "gen/sub2")
			if got := read(t, f.remote, "gen/sub2/b.go"); got != "made in the container" {
				t.Fatalf("the container's new file: %q", got)
			}
			if got := read(t, f.remote, "gen/sub2/a.go"); got != "a" {
				t.Fatalf("gen/sub2/a.go in the container: %q", got)
			}
			evs := f.pass(t)
			var conflicted, back bool
			for _, ev := range evs {
				switch ev := ev.(type) {
				case Conflicted:
					conflicted = conflicted || ev.Path == f.path("gen/sub2")
				case SyncedBack:
					back = slices.Contains(ev.Paths, f.path("gen/sub2/b.go"))
				}
			}
			if !conflicted || !back || read(t, f.local, "gen/sub2/b.go") != "made in the container" {
				t.Fatalf("a directory deleted over a new container file: %#v", evs)
			}
		})
	}
}

// TestContainerDeleteIsNoConflict: a listed file the container deleted
// before any scan saw it is no conflict for the upload that finds it gone.
// A local delete of it agrees (and the path is forgotten, so a new local
// file there goes up); a local edit of it wins over the delete and goes up
// with the next batch, without a save of its own. Before, both were
// reported as conflicts with empty sums, the edit stayed out of the
// container, and a new file at the path was never sent.
func TestContainerDeleteIsNoConflict(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		t.Run(name, func(t *testing.T) {
			f := newRunning(t, &executor{Runner: *r}, Config{})
			write(t, f.local, "gen/a.go", "a", 0o644)
			write(t, f.local, "gen/b.go", "b", 0o644)
			f.save(t, "gen/a.go", "gen/b.go")
			f.pass(t)

			must(t, os.Remove(filepath.Join(f.remote, "gen", "a.go")))
			must(t, os.Remove(filepath.Join(f.remote, "gen", "b.go")))
			must(t, os.Remove(f.path("gen/a.go")))
			write(t, f.local, "gen/b.go", "b edited", 0o644)
			f.save(t, "gen/a.go", "gen/b.go")
			if evs := f.rec.take(); len(evs) != 0 {
				t.Fatalf("events of the batch: %#v", evs)
			}
			// The pass forgets both; the edit is planned again and goes with
			// the next batch.
			if evs := f.pass(t); len(evs) != 0 {
				t.Fatalf("events of the pass: %#v", evs)
			}
			f.save(t, "src/main.go")
			if got := read(t, f.remote, "gen/b.go"); got != "b edited" {
				t.Fatalf("the local edit over the container's delete: %q", got)
			}
			write(t, f.local, "gen/a.go", "a again", 0o644)
			f.save(t, "gen/a.go")
			if got := read(t, f.remote, "gen/a.go"); got != "a again" {
				t.Fatalf("a new local file where both deleted: %q", got)
			}
			if evs := f.rec.take(); len(evs) != 0 {
				t.Fatalf("events: %#v", evs)
			}
			if _, err := os.Lstat(f.path("gen/a.go")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSaveAfterConflictIsChecked: the save after a conflict wins over
// what the conflict showed in the container, and only over that: a
// container change made after the conflict was reported is a conflict
// again, never overwritten unseen (before, that save went unchecked; and
// on an image without sha256sum, where the conflict says the container's
// size and mtime, until that went unchecked too). The
// container's second write has another size: without hashes, a rewrite of
// the same size in the same second can't be told.
func TestSaveAfterConflictIsChecked(t *testing.T) {
	vs := localexec.Variants(t)
	vs["busybox without sha256sum"] = localexec.Busybox(t, "sha256sum")
	for name, r := range vs {
		t.Run(name, func(t *testing.T) {
			remoteSum := func(s string) string {
				if name == "busybox without sha256sum" {
					return ""
				}
				return sum(s)
			}
			f := newRunning(t, &executor{Runner: *r}, Config{})
			f.pass(t)
			f.conflictOnLock(t)
			// The container writes again after the conflict; the user saves.
			write(t, f.remote, "package-lock.json", "theirs 2, written again", 0o644)
			write(t, f.local, "package-lock.json", "mine 2", 0o644)
			f.save(t, "package-lock.json")
			if got := read(t, f.remote, "package-lock.json"); got != "theirs 2, written again" {
				t.Fatalf("the save after a conflict replaced a later container change: %q", got)
			}
			evs := f.rec.take()
			if c, ok := evs[0].(Conflicted); len(evs) != 1 || !ok || c.LocalSum != sum("mine 2") || c.RemoteSum != remoteSum("theirs 2, written again") {
				t.Fatalf("second conflict: %#v", evs)
			}
			// The next save, with the container as the conflict showed it, wins.
			write(t, f.local, "package-lock.json", "merged", 0o644)
			f.save(t, "package-lock.json")
			if got := read(t, f.remote, "package-lock.json"); got != "merged" {
				t.Fatalf("the save after the second conflict: %q", got)
			}
			if evs := f.rec.take(); len(evs) != 0 {
				t.Fatalf("events after the merge: %#v", evs)
			}
		})
	}
}

// TestToolTempFilesStayInTheContainer: what apply.sh leaves beside a file
// when it is killed mid-way (a compressed patch's unpacked literal bytes, a
// patch being built, a copy on its way to its name) is in a listed
// directory of the container, and a pass brings home only the app's file
// beside them. Before, ".livesync-lit.*" and ".livesync-cp.*" came home.
func TestToolTempFilesStayInTheContainer(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		t.Run(name, func(t *testing.T) {
			f := newRunning(t, &executor{Runner: *r}, Config{Deletes: true})
			write(t, f.local, "gen/big.bin", "old", 0o644)
			f.save(t, "gen/big.bin")
			f.pass(t)
			temps := []string{"gen/.livesync-lit.big.bin", "gen/.livesync-patch.big.bin", "gen/.livesync-cp.4242"}
			for _, rel := range temps {
				write(t, f.remote, rel, "half-written", 0o600)
			}
			write(t, f.remote, "gen/new.txt", "made by the app", 0o644)
			evs := f.pass(t)
			for _, rel := range temps {
				if _, err := os.Lstat(f.path(rel)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s came home (%v)", rel, err)
				}
			}
			if sb := syncedBack(t, evs); !slices.Equal(sb.Paths, []string{f.path("gen/new.txt")}) {
				t.Fatalf("synced back %q, want only gen/new.txt", sb.Paths)
			}
		})
	}
}

// TestSaveKeepingStatAfterSyncBack: a file that came home, then saved
// locally in a way that keeps its size and mtime (an atomic save with
// touch -r, cp -p), is sent by the running session: what sync-back
// recorded names the inode and change time of the file it wrote, so the
// planner sees the save. Both ways a file becomes the ancestor are checked:
// downloaded, and found equal on both sides.
func TestSaveKeepingStatAfterSyncBack(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		t.Run(name, func(t *testing.T) {
			f := newRunning(t, &executor{Runner: *r}, Config{})
			f.pass(t)
			write(t, f.remote, "package-lock.json", "v2 from the container", 0o644)
			write(t, f.remote, "gen/same.txt", "the same on both sides", 0o644)
			write(t, f.local, "gen/same.txt", "the same on both sides", 0o644)
			f.pass(t)
			for _, rel := range []string{"package-lock.json", "gen/same.txt"} {
				p := f.path(rel)
				fi, err := os.Stat(p)
				must(t, err)
				saved := strings.Repeat("L", int(fi.Size()))
				write(t, f.local, rel+".tmp", saved, 0o644)
				must(t, os.Chtimes(p+".tmp", fi.ModTime(), fi.ModTime()))
				must(t, os.Rename(p+".tmp", p))
				f.save(t, rel)
				if got := read(t, f.remote, rel); got != saved {
					t.Errorf("%s: the container holds %q after a local save that kept size and mtime, want %q", rel, got, saved)
				}
			}
		})
	}
}

// TestSaveKeepingStatAfterConflict: after a conflict, a local save that
// keeps the file's bytes, size and mtime (another file with the same content
// renamed over it, cp -p) is a save: it wins. The conflict's mark holds the
// inode and ctime too. Before, it held mode, size and mtime only, the save
// was taken for none, and the file was never sent (TestModel seed
// 11282773897188738247, round 314: a local rename of gen/sub/d.txt over
// lock.json with the bytes the conflict held; the container kept nothing).
func TestSaveKeepingStatAfterConflict(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		t.Run(name, func(t *testing.T) {
			f := newRunning(t, &executor{Runner: *r}, Config{})
			f.pass(t)
			f.conflictOnLock(t)
			p := f.path("package-lock.json")
			fi, err := os.Lstat(p)
			must(t, err)
			write(t, f.local, "gen/copy.txt", "mine 1", 0o644)
			must(t, os.Chtimes(f.path("gen/copy.txt"), fi.ModTime(), fi.ModTime()))
			must(t, os.Rename(f.path("gen/copy.txt"), p))
			f.save(t, "package-lock.json")
			if got := read(t, f.remote, "package-lock.json"); got != "mine 1" {
				t.Fatalf("the save after the conflict that kept size and mtime was not sent: the container holds %q; events %#v", got, f.rec.take())
			}
		})
	}
}

// TestSaveWinsOverTheLatestReportedConflict: a conflict a pass reports
// again with new container content moves the mark to that content, so the
// next save wins over what was last reported (it met the first report's
// content, and took a second save to win).
func TestSaveWinsOverTheLatestReportedConflict(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		t.Run(name, func(t *testing.T) {
			f := newRunning(t, &executor{Runner: *r}, Config{})
			f.pass(t)
			f.conflictOnLock(t)
			write(t, f.remote, "package-lock.json", "theirs 2, later", 0o644)
			f.passConflict(t, "", "theirs 2, later")
			write(t, f.local, "package-lock.json", "merged", 0o644)
			f.save(t, "package-lock.json")
			if got := read(t, f.remote, "package-lock.json"); got != "merged" {
				t.Fatalf("the save after the reported conflict did not win: the container holds %q; events %#v", got, f.rec.take())
			}
		})
	}
}

// TestSaveAfterConflictSeenByAPassFirst: after a conflict, the user saves
// (a write, or a delete) and a pass runs before the save's batch. The save
// wins over what the conflict showed, so the pass has nothing to report:
// before, it reported the saved side against the container's as a conflict
// that would hold, and the batch then replaced the container's side anyway
// (TestModel seed 14463975535576635018 round 21: a local delete reported as
// a conflict with the container's file, which the next batch deleted).
func TestSaveAfterConflictSeenByAPassFirst(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		for _, del := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/delete=%v", name, del), func(t *testing.T) {
				f := newRunning(t, &executor{Runner: *r}, Config{Deletes: true})
				f.pass(t)
				f.conflictOnLock(t)
				if del {
					must(t, os.Remove(f.path("package-lock.json")))
				} else {
					write(t, f.local, "package-lock.json", "merged", 0o644)
				}
				if evs := f.pass(t); len(evs) != 0 {
					t.Fatalf("the pass before the save's batch reported %#v; the save wins, nothing to report", evs)
				}
				f.save(t, "package-lock.json")
				_, err := os.Lstat(filepath.Join(f.remote, "package-lock.json"))
				switch {
				case del && !errors.Is(err, os.ErrNotExist):
					t.Fatalf("the local delete after the conflict did not win: %v; events %#v", err, f.rec.take())
				case !del:
					if got := read(t, f.remote, "package-lock.json"); got != "merged" {
						t.Fatalf("the save after the conflict did not win: the container holds %q; events %#v", got, f.rec.take())
					}
				}
				if evs := f.rec.take(); len(evs) != 0 {
					t.Fatalf("events after the save: %#v", evs)
				}
			})
		}
	}
}

// TestContainerChangeAfterSaveIsAConflictAgain: after a conflict the user
// saves, and the container writes the file again before the save's batch;
// a pass reports that as a conflict. The pending save was made before the
// container's write, so it must not replace it: the batch leaves the path,
// and only a save after the report wins. Before, the conflict's local mark
// stayed at the first report, and the batch replaced the container's later
// write (TestModel seed 8259734817451128789 round 60).
func TestContainerChangeAfterSaveIsAConflictAgain(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		t.Run(name, func(t *testing.T) {
			f := newRunning(t, &executor{Runner: *r}, Config{})
			f.pass(t)
			f.conflictOnLock(t)
			write(t, f.local, "package-lock.json", "mine 2", 0o644)
			write(t, f.remote, "package-lock.json", "theirs 2, after the save", 0o644)
			f.passConflict(t, "mine 2", "theirs 2, after the save")
			f.save(t, "package-lock.json")
			if got := read(t, f.remote, "package-lock.json"); got != "theirs 2, after the save" {
				t.Fatalf("the save made before the container's write replaced it: the container holds %q", got)
			}
			f.rec.take()
			write(t, f.local, "package-lock.json", "merged", 0o644)
			f.save(t, "package-lock.json")
			if got := read(t, f.remote, "package-lock.json"); got != "merged" {
				t.Fatalf("the save after the report did not win: the container holds %q; events %#v", got, f.rec.take())
			}
		})
	}
}

// TestConflictDeleteIsNotHeldWithABurst: a local delete of a file the
// container changed is a conflict, left out of every batch until a local
// save follows. Planned again in a burst of deletes that passed the
// mass-delete line, it was held with the burst, and a hold stops sync-back's
// passes: nothing came home (TestModel seed 1229838384427958497 round 168:
// gen/a.txt's delete, a conflict since round 165, held after a slow remover's
// 50 deletes). It is not the batch's: neither counted nor held.
func TestConflictDeleteIsNotHeldWithABurst(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		t.Run(name, func(t *testing.T) {
			f := newRunning(t, &executor{Runner: *r}, Config{})
			var lib []string
			for i := range 96 { // 101 entries in all
				rel := fmt.Sprintf("lib/f%03d", i)
				write(t, f.local, rel, "l", 0o644)
				lib = append(lib, rel)
			}
			f.save(t, lib...)
			f.pass(t)
			// The conflict: the container changes the lockfile, the local
			// side deletes it, and a pass sees both.
			write(t, f.remote, "package-lock.json", "theirs", 0o644)
			must(t, os.Remove(f.path("package-lock.json")))
			f.passConflict(t, "", "theirs")
			// A burst: 50 deletes go, the next 5 pass the line (more than
			// 50, and more than half of the 101 entries) and are held; made
			// again locally, they are decided again and nothing is held.
			for _, rel := range lib[:55] {
				must(t, os.Remove(f.path(rel)))
			}
			if b := f.save(t, lib[:50]...); b.Deleted != 50 {
				t.Fatalf("the burst's first batch: %+v", b)
			}
			f.save(t, lib[50:55]...)
			if err := f.runner.Pass(context.Background()); !errors.Is(err, filesync.ErrNotSynced) {
				t.Fatalf("a pass while 5 deletes are held: %v, want ErrNotSynced", err)
			}
			for _, rel := range lib[50:55] {
				write(t, f.local, rel, "l", 0o644)
			}
			f.save(t, lib[50:55]...)
			f.pass(t)
			// The lockfile is planned again within the burst.
			f.save(t, "package-lock.json")
			if err := f.runner.Pass(context.Background()); err != nil {
				t.Fatalf("a pass after the conflict's delete was planned within the burst: %v (held with it)", err)
			}
			if got := read(t, f.remote, "package-lock.json"); got != "theirs" {
				t.Fatalf("the container's lockfile: %q", got)
			}
		})
	}
}

// TestContainerDeletesKeptLocallyAreNotWeighed: what the container deleted
// and the local side keeps (no --sync-back-deletes) is not what the
// container holds, and the upload guard weighs a local delete against what
// it holds. Before, the index's entries for them counted: a local delete of
// 80 of the 153 entries the container held went with no hold, 80 it had
// deleted itself making the total 232 (TestModel seed 15620430712571607237
// round 33).
func TestContainerDeletesKeptLocallyAreNotWeighed(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		t.Run(name, func(t *testing.T) {
			f := newRunning(t, &executor{Runner: *r}, Config{})
			var old, lib []string
			for i := range 80 {
				old = append(old, fmt.Sprintf("gen/old/f%03d", i))
				write(t, f.local, old[i], "o", 0o644)
			}
			for i := range 60 {
				lib = append(lib, fmt.Sprintf("lib/f%03d", i))
				write(t, f.local, lib[i], "l", 0o644)
			}
			f.save(t, append(old, lib...)...)
			f.pass(t)
			must(t, os.RemoveAll(filepath.Join(f.remote, "gen", "old")))
			if evs := f.pass(t); len(evs) != 0 {
				t.Fatalf("the pass after the container's delete: %#v", evs)
			}
			if _, err := os.Lstat(f.path(old[0])); err != nil {
				t.Fatalf("the container's delete came home without deletes: %v", err)
			}
			// 61 of the 67 entries the container holds: held.
			must(t, os.RemoveAll(f.path("lib")))
			if b := f.save(t, "lib"); b.Deleted != 0 {
				t.Fatalf("a local delete of 61 of the 67 entries the container holds: %+v, want held", b)
			}
			if got := read(t, f.remote, lib[0]); got != "l" {
				t.Fatalf("the container's %s: %q", lib[0], got)
			}
		})
	}
}

// TestRevertAfterConflictIsASave: after a conflict the user saves the file
// back to the bytes both sides last agreed on (a revert, a copy of the old
// version), and a pass runs before the save's batch. By content the local
// side equals the ancestor, yet it is the save after the conflict: it wins
// over what the conflict showed, and a container change made since is a
// conflict again, which stands: no pass downloads over it. Before, the
// pass took the local side for unchanged and downloaded the container's
// file over the user's save, the first time, or, with the container
// changed again, the pass after the one that reported it (TestModel seed
// 5161543048578407081 round 135).
func TestRevertAfterConflictIsASave(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		for _, later := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/container-changed-again=%v", name, later), func(t *testing.T) {
				f := newRunning(t, &executor{Runner: *r}, Config{})
				f.pass(t)
				f.conflictOnLock(t) // mine 1 | theirs 1, over v1
				if later {
					write(t, f.remote, "package-lock.json", "theirs 2", 0o644)
				}
				write(t, f.local, "package-lock.json", "v1", 0o644)
				if later {
					f.passConflict(t, "v1", "theirs 2")
					// The next pass finds the conflict standing, its local
					// side the ancestor's bytes: it stays.
					if evs := f.pass(t); len(evs) != 0 {
						t.Fatalf("the pass after the new conflict: %#v", evs)
					}
				} else if evs := f.pass(t); len(evs) != 0 {
					t.Fatalf("the pass before the revert's batch: %#v", evs)
				}
				if got := read(t, f.local, "package-lock.json"); got != "v1" {
					t.Fatalf("the pass replaced the local save after the conflict: local %q", got)
				}
				f.save(t, "package-lock.json")
				want := "v1"
				if later {
					want = "theirs 2"
				}
				if got := read(t, f.remote, "package-lock.json"); got != want {
					t.Fatalf("the container holds %q, want %q", got, want)
				}
				if got := read(t, f.local, "package-lock.json"); got != "v1" {
					t.Fatalf("local %q after the batch", got)
				}
			})
		}
	}
}

// TestConflictMarkIsTheFileThePassSaw: a conflict's local mark is the file
// the pass decided on, not the one there when it records the conflict: a
// save that lands in between is a save after the conflict. Before, the mark
// was read afresh, took the save in, and the next pass found the local side
// unsaved and, holding the ancestor's bytes, downloaded over it (TestModel
// seed 5161543048578407081 round 135). A pass that finds the conflict again
// with the same container side keeps the mark.
func TestConflictMarkIsTheFileThePassSaw(t *testing.T) {
	r, err := New(Config{Globs: []string{"gen/**"}}, &recorder{}, clocktesting.NewFakeClock(time.Unix(1e9, 0)))
	must(t, err)
	r.Add(src, time.Unix(1, 0), "mnt:[1]")
	dir := t.TempDir()
	name := filepath.Join(dir, "a.txt")
	write(t, dir, "a.txt", "mine 1", 0o644)
	seenByPass := localSide(name)
	write(t, dir, "a.tmp", "v1", 0o644) // the save, between the pass's read and its mark
	must(t, os.Rename(filepath.Join(dir, "a.tmp"), name))
	theirs := sha256.Sum256([]byte("theirs 1"))
	st := r.stateOf(src)
	saved := func() bool { _, s := r.inConflict(src, 0, "gen/a.txt", name); return s }
	r.conflictSeen(st, src, 0, "gen/a.txt", name, markSide(name, seenByPass), seenByPass.Sum, seen{sum: &theirs})
	if !saved() {
		t.Fatal("the save made while the pass recorded the conflict is not a save after it")
	}
	// Found again with the same container side: the mark stays.
	r.markConflict(src, 0, "gen/a.txt", markOf(name), seen{sum: &theirs})
	if !saved() {
		t.Fatal("a pass that found the conflict again took the save into its mark")
	}
}

// TestDeleteAfterConflictWins: after a conflict the user deletes the local
// file, and a pass runs before the delete's batch; the delete is the save
// that wins over what the conflict showed: the container's file goes, never
// comes home. Both where the two sides had made the file each on its own
// (no ancestor: a plan had nothing to delete) and over an ancestor. Before,
// the first was left for good (TestModel seed 9939091864643390162 round 46).
func TestDeleteAfterConflictWins(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		for _, fresh := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/no-ancestor=%v", name, fresh), func(t *testing.T) {
				f := newRunning(t, &executor{Runner: *r}, Config{})
				f.pass(t)
				rel := "package-lock.json"
				if fresh {
					rel = "gen/x.txt"
					write(t, f.remote, rel, "theirs 1", 0o644)
					write(t, f.local, rel, "mine 1", 0o644)
					if evs := f.pass(t); len(evs) != 1 {
						t.Fatalf("the conflict: %#v", evs)
					}
				} else {
					f.conflictOnLock(t)
				}
				must(t, os.Remove(f.path(rel)))
				if evs := f.pass(t); len(evs) != 0 {
					t.Fatalf("the pass before the delete's batch: %#v", evs)
				}
				if _, err := os.Lstat(f.path(rel)); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("the container's file came home over the local delete: %v", err)
				}
				f.save(t, rel)
				if _, err := os.Lstat(filepath.Join(f.remote, rel)); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("the local delete after the conflict did not win: %v", err)
				}
			})
		}
	}
}

// A conflict whose container side is then deleted is over: the local edit
// wins over the delete, as it does when an upload finds the file gone (see
// Changed), and goes up at the next pass, checked against nothing being
// there. Before, the conflict's mark still said the container held its old
// content, so the edit waited for two more saves with a conflict line that no
// longer held (TestModel seed 5929211823724421172, round 9).
func TestConflictThenContainerDeleteLocalWins(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		t.Run(name, func(t *testing.T) {
			for _, deletes := range []bool{false, true} {
				f := newRunning(t, &executor{Runner: *r}, Config{Deletes: deletes})
				f.pass(t)
				write(t, f.remote, "package-lock.json", "theirs", 0o644)
				write(t, f.local, "package-lock.json", "mine", 0o644)
				f.save(t, "package-lock.json")
				if evs := f.rec.take(); len(evs) != 1 {
					t.Fatalf("deletes %v: the conflict: %#v", deletes, evs)
				}
				must(t, os.Remove(filepath.Join(f.remote, "package-lock.json")))
				if evs := f.pass(t); len(evs) != 0 {
					t.Fatalf("deletes %v: the pass after the container's delete: %#v", deletes, evs)
				}
				// Planned again by the pass, it goes with the next batch.
				f.save(t, "src/main.go")
				if got := read(t, f.remote, "package-lock.json"); got != "mine" {
					t.Errorf("deletes %v: the container holds %q, want the local edit", deletes, got)
				}
				if got := read(t, f.local, "package-lock.json"); got != "mine" {
					t.Errorf("deletes %v: the local file holds %q", deletes, got)
				}
				if evs := f.pass(t); len(evs) != 0 {
					t.Errorf("deletes %v: the pass after: %#v", deletes, evs)
				}
			}
		})
	}
}

// A conflict whose container side then goes back to the ancestor's bytes
// (the app rewrote it, a move put the old file back) is a conflict again,
// with the new pair: the container's change came after the local one. Both
// sides stay; the next local save wins over it. Before, nothing named the
// pair: the local side stayed unsent and the container's file stayed, with
// the last conflict line naming a container side long gone (TestModel seed
// 16631844840823768410 round 362).
func TestConflictThenContainerRevertIsAConflictAgain(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		for _, del := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/local-delete=%v", name, del), func(t *testing.T) {
				f := newRunning(t, &executor{Runner: *r}, Config{})
				f.pass(t)
				rel := "package-lock.json"
				write(t, f.remote, rel, "theirs 1", 0o644)
				mine := "mine 1"
				if del {
					must(t, os.Remove(f.path(rel)))
					mine = ""
				} else {
					write(t, f.local, rel, mine, 0o644)
				}
				f.save(t, rel)
				if evs := f.rec.take(); len(evs) != 1 {
					t.Fatalf("the conflict: %#v", evs)
				}
				write(t, f.remote, rel, "v1", 0o644) // the ancestor's bytes
				f.passConflict(t, mine, "v1")
				if evs := f.pass(t); len(evs) != 0 {
					t.Fatalf("the pass after the new conflict: %#v", evs)
				}
				f.save(t, "src/main.go")
				if got := read(t, f.remote, rel); got != "v1" {
					t.Errorf("the container holds %q after an unrelated batch, want its own v1", got)
				}
				if _, err := os.Lstat(f.path(rel)); del != errors.Is(err, os.ErrNotExist) {
					t.Errorf("the local side changed: %v", err)
				}
				// The next local save wins.
				write(t, f.local, rel, "mine 2", 0o644)
				f.save(t, rel)
				if got := read(t, f.remote, rel); got != "mine 2" {
					t.Errorf("the container holds %q after the local save, want mine 2", got)
				}
				if evs := f.pass(t); len(evs) != 0 {
					t.Errorf("the pass after: %#v", evs)
				}
			})
		}
	}
}

// A conflict's file that an incremental scan does not list (its directory
// did not change) is not gone: the ancestor stays, and a conflict of a
// local delete against a container edit stays a conflict. Taking it for
// gone forgot the ancestor, and the next pass brought the container's file
// home over the local delete (TestModel seed 18216579613586263105, round 69).
func TestConflictNotListedIsNotGone(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		t.Run(name, func(t *testing.T) {
			f := newRunning(t, &executor{Runner: *r}, Config{})
			write(t, f.remote, "gen/old.go", "old", 0o644)
			f.pass(t)
			f.rec.take()
			write(t, f.remote, "package-lock.json", "theirs", 0o644)
			must(t, os.Remove(f.path("package-lock.json")))
			f.save(t, "package-lock.json")
			if evs := f.rec.take(); len(evs) != 1 {
				t.Fatalf("the conflict: %#v", evs)
			}
			// Both long unchanged in the container: an incremental scan
			// lists neither.
			hour := time.Now().Add(-time.Hour)
			must(t, os.Chtimes(filepath.Join(f.remote, "package-lock.json"), hour, hour))
			must(t, os.Chtimes(f.remote, hour, hour))
			f.pass(t)
			write(t, f.remote, "gen/new.go", "new", 0o644)
			clk := f.runner.clk.(*clocktesting.FakeClock)
			for i := range 3 {
				if i == 2 {
					clk.Step(DefaultFullEvery) // a full scan lists it
				}
				for _, ev := range f.pass(t) {
					if sb, ok := ev.(SyncedBack); ok && slices.Contains(sb.Paths, f.path("package-lock.json")) {
						t.Fatalf("the container's side of the conflict came home over the local delete: %#v", sb)
					}
				}
			}
			if _, err := os.Lstat(f.path("package-lock.json")); err == nil {
				t.Fatal("package-lock.json is back locally")
			}
		})
	}
}

// TestRetryAfterLostAckIsChecked: a batch the container applied but never
// acknowledged (a stream cut, a lost ack) is checked again when it goes
// again, so a container write made in between is a conflict, never
// overwritten; without one, the retry finds what the batch sent and goes, no
// false conflict. That holds for the retries within the batch, and for the
// next batch once they are used up, when the path is unknown: it is checked
// against what the container may hold (what it held before, or what the
// batch sent). Before, that next batch went with no check (TestModel seed
// 18216579613586263105 at 150 steps, round 21: the container's atomic save
// of lock.json, right after a stream cut, was lost).
func TestRetryAfterLostAckIsChecked(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		for _, tries := range []int{1, remote.DefaultRetry.Tries} {
			t.Run(fmt.Sprintf("%s/%d lost", name, tries), func(t *testing.T) {
				ex := &executor{Runner: *r}
				f := newRunning(t, ex, Config{})
				f.pass(t)
				// Each lost try but the last is followed by a container write
				// when the tries are used up: the next batch is checked.
				cut := tries > 1 // every try cut before it ran, the budget used up
				ex.setLost(tries, cut, func(left int) {
					if left == 0 {
						write(t, f.remote, "package-lock.json", "theirs, after the lost ack", 0o644)
					}
				})
				write(t, f.local, "package-lock.json", "mine", 0o644)
				f.saveLosingAcks(t, "package-lock.json", tries)
				if got := read(t, f.remote, "package-lock.json"); got != "theirs, after the lost ack" {
					t.Fatalf("the container's write after the lost ack was overwritten: %q", got)
				}
				evs := f.rec.take()
				if c, ok := evs[0].(Conflicted); len(evs) != 1 || !ok || c.RemoteSum != sum("theirs, after the lost ack") {
					t.Fatalf("want the conflict, got %#v", evs)
				}
				// Without a container write, the retry finds what the batch
				// sent and goes: no false conflict.
				write(t, f.local, "gen/b.go", "b", 0o644)
				f.save(t, "gen/b.go")
				f.pass(t)
				ex.setLost(tries, cut, nil)
				write(t, f.local, "gen/b.go", "b, saved again", 0o644)
				f.saveLosingAcks(t, "gen/b.go", tries)
				if got := read(t, f.remote, "gen/b.go"); got != "b, saved again" {
					t.Fatalf("gen/b.go: %q", got)
				}
				if evs := f.rec.take(); len(evs) != 0 {
					t.Fatalf("events of the second retry: %#v", evs)
				}
			})
		}
	}
}

// A local save between two tries of a batch, the first applied but never
// acknowledged (a stream cut after the frame landed), is no conflict: the
// retry finds what the first try sent, which is the local side's own, and
// the save goes over it. Before, the retry was checked against the ancestor
// only, and reported the first try's bytes as a container change: the save
// stayed home (TestModel seeds 3756678103747597156 round 369,
// 7010222998496574562 round 428). Also after a conflict, whose save wins
// over what the conflict showed.
func TestLocalSaveBetweenTriesIsNoConflict(t *testing.T) {
	for name, r := range localexec.Variants(t) {
		for _, conflict := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/after-conflict=%v", name, conflict), func(t *testing.T) {
				ex := &executor{Runner: *r}
				f := newRunning(t, ex, Config{})
				f.pass(t)
				if conflict {
					f.conflictOnLock(t)
				}
				ex.setLost(1, false, func(int) {
					write(t, f.local, "package-lock.json", "mine, saved between the tries", 0o644)
				})
				write(t, f.local, "package-lock.json", "mine, first", 0o644)
				// The batch, and the one that sends what changed while it was
				// read (requeued), if it is another.
				for b := f.save(t, "package-lock.json"); read(t, f.remote, "package-lock.json") != "mine, saved between the tries"; {
					if evs := f.rec.take(); b.Failed != 0 || len(evs) != 0 {
						t.Fatalf("the container holds %q after the batch %+v, with events %#v", read(t, f.remote, "package-lock.json"), b, evs)
					}
					if b, _ = f.next(t).(filesync.Batch); read(t, f.remote, "package-lock.json") != "mine, saved between the tries" && len(b.Names) == 0 {
						t.Fatalf("the container holds %q and nothing more was sent", read(t, f.remote, "package-lock.json"))
					}
				}
				if evs := f.rec.take(); len(evs) != 0 {
					t.Fatalf("events: %#v", evs)
				}
				if evs := f.pass(t); len(evs) != 0 {
					t.Fatalf("the pass after: %#v", evs)
				}
			})
		}
	}
}

// conflictOnLock makes package-lock.json a conflict: the container writes
// "theirs 1" there, then a local save of "mine 1" goes checked and is
// reported, once.
func (f *running) conflictOnLock(t *testing.T) {
	t.Helper()
	write(t, f.remote, "package-lock.json", "theirs 1", 0o644)
	write(t, f.local, "package-lock.json", "mine 1", 0o644)
	f.save(t, "package-lock.json")
	if evs := f.rec.take(); len(evs) != 1 {
		t.Fatalf("the conflict: %#v", evs)
	}
}

// passConflict runs a pass and checks that it reports one conflict, at
// package-lock.json, with the container holding remote (and the local side
// local, unless that is "").
func (f *running) passConflict(t *testing.T, local, remote string) {
	t.Helper()
	evs := f.pass(t)
	if len(evs) != 1 {
		t.Fatalf("the pass's conflict: %#v", evs)
	}
	if c, ok := evs[0].(Conflicted); !ok || c.Path != f.path("package-lock.json") || c.RemoteSum != sum(remote) || local != "" && c.LocalSum != sum(local) {
		t.Fatalf("the pass's conflict: %#v", evs)
	}
}

// saveLosingAcks saves rel as a batch whose tries lose their acks: with
// every try lost, the batch fails and the next pass of the worker sends it
// again.
func (f *running) saveLosingAcks(t *testing.T, rel string, tries int) {
	t.Helper()
	b := f.save(t, rel)
	if tries < remote.DefaultRetry.Tries {
		return
	}
	if b.Failed != 1 {
		t.Fatalf("%s: the batch whose acks were all lost: %+v", rel, b)
	}
	if ev, ok := f.next(t).(filesync.Recovered); !ok {
		t.Fatalf("%s: the next pass: %#v", rel, ev)
	}
}
