//go:build unix

package watch

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rjeczalik/notify"
	clocktesting "k8s.io/utils/clock/testing"
)

// These tests drive the handling of a root whose directory is deleted or
// replaced with a fake notify; watch_linux_test.go does it with the real
// one. A watch is tied to an inode, so without a rewatch the root would
// report nothing after `rm -rf dist && mkdir dist`.

// lostRootFixture is a root under its own parent, watched with a fake
// notify and a fake clock.
type lostRootFixture struct {
	root string
	fn   *fakeNotify
	clk  *clocktesting.FakeClock
	w    Watcher
}

func newLostRootFixture(t *testing.T, opts Options) *lostRootFixture {
	t.Helper()
	f := &lostRootFixture{root: filepath.Join(evalDir(t, tempDir(t)), "dist"), fn: &fakeNotify{}, clk: clocktesting.NewFakeClock(time.Now())}
	mkdirAll(t, filepath.Join(f.root, "sub"))
	writeFile(t, filepath.Join(f.root, "sub", "old.js"), "x")
	f.w = newFakeWatcher(t, []string{f.root}, opts, f.fn.backend(f.clk))
	return f
}

// send delivers an event from notify's watch of the root.
func (f *lostRootFixture) send(t *testing.T, path string, ev notify.Event) {
	t.Helper()
	ch, ok := f.fn.channels()[f.root]
	if !ok {
		t.Fatalf("notify does not watch %q; it watches %v", f.root, f.fn.channels())
	}
	ch <- fakeEvent{path: path, ev: ev}
}

func TestRootRemovedAndRecreated(t *testing.T) {
	f := newLostRootFixture(t, Options{})
	if err := os.RemoveAll(f.root); err != nil {
		t.Fatal(err)
	}
	f.send(t, f.root, notify.Remove) // IN_DELETE_SELF

	waitPath(t, f.w, f.root) // the consumer learns that the root went
	if got := f.fn.channels(); len(got) != 0 {
		t.Errorf("notify still watches %v, the deleted directory", got)
	}
	mkdirAll(t, f.root)
	writeFile(t, filepath.Join(f.root, "main.js"), "x") // before the new watch: only the Rescan covers it
	stepUntilRescan(t, f.clk, f.w, f.root)
	if got := f.fn.watches(); got != 2 {
		t.Errorf("%d watches, want the first and one of the new directory", got)
	}
	f.send(t, filepath.Join(f.root, "later.js"), notify.Create)
	waitPath(t, f.w, filepath.Join(f.root, "later.js"))
}

// TestRootReplaced: a root deleted or renamed away and created anew before
// the watcher looks is watched again at once, without waiting for a poll
// interval, even when the new directory got the old one's inode.
func TestRootReplaced(t *testing.T) {
	for _, tt := range []struct {
		name   string
		remove func(root string) error
		event  notify.Event
	}{
		{"rm -rf", os.RemoveAll, notify.Remove},                                                // IN_DELETE_SELF
		{"mv", func(root string) error { return os.Rename(root, root+".old") }, notify.Rename}, // IN_MOVE_SELF
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newLostRootFixture(t, Options{})
			if err := tt.remove(f.root); err != nil {
				t.Fatal(err)
			}
			mkdirAll(t, f.root)
			f.send(t, f.root, tt.event)

			waitRescan(t, f.w, f.root)
			if got := f.fn.watches(); got != 2 {
				t.Errorf("%d watches, want the first and one of the new directory", got)
			}
		})
	}
}

// TestRootTouchedKeepsItsWatch: an event for the root that is still the
// same directory (chmod, touch) costs a stat, not a rewatch.
func TestRootTouchedKeepsItsWatch(t *testing.T) {
	f := newLostRootFixture(t, Options{})
	f.send(t, f.root, notify.Write) // IN_ATTRIB on Linux
	f.send(t, filepath.Join(f.root, "after"), notify.Create)
	for _, ev := range waitPaths(t, f.w, f.root, filepath.Join(f.root, "after")) {
		if ev.Rescan {
			t.Errorf("got %+v for a root that was only touched", ev)
		}
	}
	if got := f.fn.watches(); got != 1 {
		t.Errorf("%d watches, want 1", got)
	}
}

// TestSingleFileRootDirectoryRecreated: a file root's watch is on its
// directory; when that goes and comes back, the file is watched again.
func TestSingleFileRootDirectoryRecreated(t *testing.T) {
	dir := filepath.Join(evalDir(t, tempDir(t)), "conf")
	file := filepath.Join(dir, "app.yaml")
	mkdirAll(t, dir)
	writeFile(t, file, "a: 1\n")
	fn := &fakeNotify{}
	clk := clocktesting.NewFakeClock(time.Now())
	w := newFakeWatcher(t, []string{file}, Options{}, fn.backend(clk))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	fn.channels()[dir] <- fakeEvent{path: dir, ev: notify.Remove}

	waitPath(t, w, file)
	if got := fn.channels(); len(got) != 0 {
		t.Errorf("notify still watches %v, the deleted directory", got)
	}
	mkdirAll(t, dir)
	writeFile(t, file, "a: 2\n")
	stepUntilRescan(t, clk, w, file)
	fn.channels()[dir] <- fakeEvent{path: file, ev: notify.Write}
	waitPath(t, w, file)
}

// TestLostRootBackOutOfDescriptors: the watch of a root that came back
// may run out of descriptors like any other; it then falls back to polling.
func TestLostRootBackOutOfDescriptors(t *testing.T) {
	f := newLostRootFixture(t, Options{})
	if err := os.RemoveAll(f.root); err != nil {
		t.Fatal(err)
	}
	f.send(t, f.root, notify.Remove)
	waitPath(t, f.w, f.root)
	f.fn.mu.Lock()
	f.fn.watchErr = syscall.EMFILE
	f.fn.mu.Unlock()

	mkdirAll(t, f.root)
	var fellBack error
	stepFor(t, f.clk, f.w, func() string { return "the fallback error" }, func(Event) bool { return false }, func(err error) bool {
		fellBack = err
		return true
	})
	checkFallbackErrno(t, fellBack, f.root, syscall.EMFILE)
	writeFile(t, filepath.Join(f.root, "polled"), "x")
	stepUntil(t, f.clk, f.w, filepath.Join(f.root, "polled"))
}

// TestPollingRootRemovedAndRecreated: a polled root that vanishes gives one
// hint for the root, not a deletion per entry, and a Rescan once it is back.
func TestPollingRootRemovedAndRecreated(t *testing.T) {
	root := filepath.Join(tempDir(t), "dist")
	mkdirAll(t, filepath.Join(root, "sub"))
	writeFile(t, filepath.Join(root, "sub", "old.js"), "x")
	writeFile(t, filepath.Join(root, "top.js"), "x")
	clk := clocktesting.NewFakeClock(time.Now())
	be := (&fakeNotify{}).backend(clk)
	be.watch = nil // poll only, as NewPolling does
	w := newFakeWatcher(t, []string{root}, Options{}, be)

	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	for _, ev := range stepUntil(t, clk, w, root) {
		if ev.Path != root {
			t.Errorf("got %+v; want only a hint for the root that went", ev)
		}
	}
	mkdirAll(t, root)
	writeFile(t, filepath.Join(root, "main.js"), "x")
	stepUntilRescan(t, clk, w, root)
	writeFile(t, filepath.Join(root, "later.js"), "x")
	stepUntil(t, clk, w, filepath.Join(root, "later.js"))
}
