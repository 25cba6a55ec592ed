package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testtree"
)

// These tests use real notify on real directories. Each change touches
// paths no other step of the same test touches, so a late duplicate event
// can't answer for a later step.

func TestFileOperations(t *testing.T) {
	root := tempDir(t)
	for _, name := range []string{"modify.txt", "delete.txt", "chmod.sh", "old.txt"} {
		writeFile(t, filepath.Join(root, name), "x")
	}
	w := newTestWatcher(t, []string{root}, Options{})

	steps := []struct {
		name  string
		do    func()
		paths []string
	}{
		{"create", func() { writeFile(t, filepath.Join(root, "new.txt"), "x") }, []string{"new.txt"}},
		{"modify", func() {
			f, err := os.OpenFile(filepath.Join(root, "modify.txt"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString("more"); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}, []string{"modify.txt"}},
		{"delete", func() {
			if err := os.Remove(filepath.Join(root, "delete.txt")); err != nil {
				t.Fatal(err)
			}
		}, []string{"delete.txt"}},
		{"rename", func() {
			if err := os.Rename(filepath.Join(root, "old.txt"), filepath.Join(root, "renamed.txt")); err != nil {
				t.Fatal(err)
			}
		}, []string{"old.txt", "renamed.txt"}},
		{"mkdir", func() { mkdirAll(t, filepath.Join(root, "dir")) }, []string{"dir"}},
	}
	if runtime.GOOS == "linux" { // inotify's IN_ATTRIB; other backends differ
		steps = append(steps, struct {
			name  string
			do    func()
			paths []string
		}{"chmod", func() {
			if err := os.Chmod(filepath.Join(root, "chmod.sh"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, []string{"chmod.sh"}})
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			step.do()
			var want []string
			for _, p := range step.paths {
				want = append(want, filepath.Join(root, p))
			}
			for _, ev := range waitPaths(t, w, want...) {
				if ev.Root != root {
					t.Errorf("%+v: Root = %q, want %q", ev, ev.Root, root)
				}
			}
		})
	}
}

// TestDirectoryRename moves a directory with a file inside, then checks that
// both the new directory and the old name keep producing events; the old
// name is what notify gets wrong (notify #227).
func TestDirectoryRename(t *testing.T) {
	root := tempDir(t)
	mkdirAll(t, filepath.Join(root, "d1", "sub"))
	writeFile(t, filepath.Join(root, "d1", "sub", "f"), "x")
	w := newTestWatcher(t, []string{root}, Options{})

	if err := os.Rename(filepath.Join(root, "d1"), filepath.Join(root, "d2")); err != nil {
		t.Fatal(err)
	}
	// Nothing announces d2/sub/f but the walk of the moved-in d2. Where a
	// watch is per directory (inotify), the rename away makes the watcher
	// rebuild the watch and rescan; one recursive watch (Windows) needs no
	// rebuild, and the walk reports every name.
	if perDirectory {
		waitRescan(t, w, root)
	} else if waitAll(t, w, root, []string{filepath.Join(root, "d1"), filepath.Join(root, "d2"), filepath.Join(root, "d2", "sub"), filepath.Join(root, "d2", "sub", "f")}) {
		t.Log("a Rescan came instead of the walk's events")
	}

	writeFile(t, filepath.Join(root, "d2", "sub", "g"), "x")
	waitPath(t, w, filepath.Join(root, "d2", "sub", "g"))

	mkdirAll(t, filepath.Join(root, "d1"))
	waitPath(t, w, filepath.Join(root, "d1"))
	// Created after the walk of the new d1 could have seen it: only a
	// watch on d1 reports this.
	writeFile(t, filepath.Join(root, "d1", "late"), "x")
	waitPath(t, w, filepath.Join(root, "d1", "late"))
}

// TestDirectoryMovedIn moves a tree from outside into the root: inotify
// reports only the top directory.
func TestDirectoryMovedIn(t *testing.T) {
	outside := tempDir(t)
	root := tempDir(t)
	mkdirAll(t, filepath.Join(outside, "pkg", "a", "b"))
	writeFile(t, filepath.Join(outside, "pkg", "a", "b", "f.go"), "x")
	writeFile(t, filepath.Join(outside, "pkg", "g.go"), "x")
	w := newTestWatcher(t, []string{root}, Options{})

	if err := os.Rename(filepath.Join(outside, "pkg"), filepath.Join(root, "pkg")); err != nil {
		t.Fatal(err)
	}
	want := []string{"pkg", "pkg/a", "pkg/a/b", "pkg/a/b/f.go", "pkg/g.go"}
	for i, p := range want {
		want[i] = filepath.Join(root, filepath.FromSlash(p))
	}
	if waitAll(t, w, root, want) {
		t.Log("got a Rescan")
	}
	writeFile(t, filepath.Join(root, "pkg", "a", "b", "new.go"), "x")
	waitPath(t, w, filepath.Join(root, "pkg", "a", "b", "new.go"))
}

// TestNestedNewDirectories creates files in fresh nested directories as
// fast as possible, the race in notify #172, many times over.
func TestNestedNewDirectories(t *testing.T) {
	root := tempDir(t)
	w := newTestWatcher(t, []string{root}, Options{})
	var want []string
	for i := range 50 {
		dir := filepath.Join(root, fmt.Sprintf("n%d", i), "b", "c")
		mkdirAll(t, dir)
		writeFile(t, filepath.Join(dir, "f"), "x")
		want = append(want, filepath.Join(dir, "f"))
	}
	if waitAll(t, w, root, want) {
		t.Log("got a Rescan")
	}
}

// TestAtomicSave saves the way editors do: write a temporary file, rename
// it over the target.
func TestAtomicSave(t *testing.T) {
	root := tempDir(t)
	target := filepath.Join(root, "main.go")
	writeFile(t, target, "package main\n")
	skipped := make(chan string, 100)
	w := newTestWatcher(t, []string{root}, Options{Skip: func(_, rel string, _ bool) bool {
		if strings.HasSuffix(rel, "___jb_tmp___") {
			skipped <- rel
			return true
		}
		return false
	}})

	tmp := target + "___jb_tmp___"
	writeFile(t, tmp, "package main\n\nfunc main() {}\n")
	if err := os.Rename(tmp, target); err != nil {
		t.Fatal(err)
	}
	for _, ev := range waitPath(t, w, target) {
		if ev.Path == tmp {
			t.Errorf("got an event for the skipped temporary file %q", tmp)
		}
	}
	// The filter must have been asked about the temporary file, by its root-relative name:
	// without that, no event for it proves nothing.
	select {
	case rel := <-skipped:
		if rel != "main.go___jb_tmp___" {
			t.Errorf("Skip asked about %q, want main.go___jb_tmp___", rel)
		}
	case <-time.After(deadline):
		t.Errorf("Skip was never asked about the temporary file %q", tmp)
	}
}

func TestSymlinkedRoot(t *testing.T) {
	real := tempDir(t)
	link := filepath.Join(tempDir(t), "link")
	testtree.Symlink(t, real, link)
	mkdirAll(t, filepath.Join(real, "sub"))
	w := newTestWatcher(t, []string{link}, Options{})

	writeFile(t, filepath.Join(real, "sub", "f"), "x")
	evs := waitPath(t, w, filepath.Join(link, "sub", "f"))
	if got := evs[len(evs)-1].Root; got != link {
		t.Errorf("Root = %q, want the link %q", got, link)
	}
}

func TestRelativeRoot(t *testing.T) {
	parent := tempDir(t)
	mkdirAll(t, filepath.Join(parent, "app"))
	t.Chdir(parent)
	w := newTestWatcher(t, []string{"app"}, Options{})

	writeFile(t, filepath.Join(parent, "app", "f"), "x")
	evs := waitPath(t, w, filepath.Join(parent, "app", "f"))
	if got, want := evs[len(evs)-1].Root, filepath.Join(parent, "app"); got != want {
		t.Errorf("Root = %q, want %q", got, want)
	}
}

func TestSingleFileRoot(t *testing.T) {
	dir := tempDir(t)
	file := filepath.Join(dir, "config.yaml")
	other := filepath.Join(dir, "other.yaml")
	writeFile(t, file, "a: 1\n")
	writeFile(t, other, "b: 1\n")
	w := newTestWatcher(t, []string{file}, Options{Skip: func(string, string, bool) bool {
		t.Error("Skip called for a single-file root")
		return false
	}})

	writeFile(t, other, "b: 2\n")
	writeFile(t, file, "a: 2\n")
	check := func(evs []Event) {
		for _, ev := range evs {
			if ev.Root != file || ev.Path != file {
				t.Errorf("got %+v, want only events for %q", ev, file)
			}
		}
	}
	check(waitPath(t, w, file))

	// An atomic save must still reach the file.
	tmp := filepath.Join(dir, ".config.yaml.tmp")
	writeFile(t, tmp, "a: 3\n")
	writeFile(t, other, "b: 3\n")
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	check(waitPath(t, w, file))
}

func TestSkip(t *testing.T) {
	root := tempDir(t)
	outside := tempDir(t)
	mkdirAll(t, filepath.Join(root, "node_modules", "react"))
	mkdirAll(t, filepath.Join(outside, "pkg", "node_modules", "lib"))
	writeFile(t, filepath.Join(outside, "pkg", "node_modules", "lib", "a.js"), "x")
	writeFile(t, filepath.Join(outside, "pkg", "main.go"), "x")
	var mu sync.Mutex
	var asked []string
	skip := func(r, rel string, isDir bool) bool {
		if r != root {
			t.Errorf("Skip got root %q, want %q", r, root)
		}
		mu.Lock()
		asked = append(asked, rel)
		mu.Unlock()
		return slices.Contains(strings.Split(rel, "/"), "node_modules") || strings.HasSuffix(rel, ".log")
	}
	w := newTestWatcher(t, []string{root}, Options{Skip: skip})

	writeFile(t, filepath.Join(root, "node_modules", "react", "index.js"), "x")
	writeFile(t, filepath.Join(root, "debug.log"), "x")
	// Only the walk of the moved-in directory can see its contents.
	if err := os.Rename(filepath.Join(outside, "pkg"), filepath.Join(root, "pkg")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "sentinel"), "x")

	seen := waitPaths(t, w, filepath.Join(root, "sentinel"), filepath.Join(root, "pkg", "main.go"))
	for _, ev := range seen {
		rel, _ := filepath.Rel(root, ev.Path)
		if skip(root, filepath.ToSlash(rel), true) {
			t.Errorf("got an event for skipped %q", ev.Path)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, rel := range asked {
		if strings.HasPrefix(rel, "pkg/node_modules/") {
			t.Errorf("Skip asked about %q: the walk of a new directory descended into a skipped one", rel)
		}
	}
}

// TestOverflowBurst creates thousands of files without reading events, once
// with notify's channel made tiny: the consumer must then get every path or
// a Rescan. The test doesn't care which, but logs it.
func TestOverflowBurst(t *testing.T) {
	for _, buffer := range []int{8, 0} {
		t.Run(fmt.Sprint("buffer ", buffer), func(t *testing.T) {
			root := tempDir(t)
			w := newTestWatcher(t, []string{root}, Options{Buffer: buffer})
			var want []string
			for i := range 3000 {
				p := filepath.Join(root, fmt.Sprintf("f%04d", i))
				writeFile(t, p, "x")
				want = append(want, p)
			}
			t.Logf("rescan: %v", waitAll(t, w, root, want))
		})
	}
}

func TestNewErrors(t *testing.T) {
	missing := filepath.Join(tempDir(t), "missing")
	_, err := New([]string{tempDir(t), missing}, Options{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("watching %q", missing)) {
		t.Fatalf("New with a missing root: err = %v, want one naming the root", err)
	}
	waitNoGoroutines(t)
}

func waitNoGoroutines(t *testing.T) {
	t.Helper()
	end := time.Now().Add(deadline)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		left := ourGoroutines()
		if len(left) == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("goroutines left after Close:\n%s", strings.Join(left, "\n\n"))
		}
		<-tick.C
	}
}

func TestCloseStopsEverything(t *testing.T) {
	dir := tempDir(t)
	file := filepath.Join(dir, "single")
	writeFile(t, file, "x")
	watchers := map[string]func() (Watcher, error){
		"notify":  func() (Watcher, error) { return New([]string{dir, file}, Options{}) },
		"polling": func() (Watcher, error) { return NewPolling([]string{dir, file}, Options{}) },
	}
	for name, newW := range watchers {
		t.Run(name, func(t *testing.T) {
			w, err := newW()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { w.Close() })
			if len(ourGoroutines()) == 0 {
				t.Fatal("no watcher goroutines found: ourGoroutines is out of date")
			}
			writeFile(t, filepath.Join(dir, name), "x") // leave work in flight
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			for range w.Events() { // closed, perhaps after what was buffered
			}
			if _, ok := <-w.Errors(); ok {
				t.Error("Errors not closed")
			}
			waitNoGoroutines(t)
		})
	}
}

// TestPollingRealClock drives the exported polling constructor with a
// short interval; TestPolling covers the details with a fake clock.
func TestPollingRealClock(t *testing.T) {
	root := tempDir(t)
	w, err := NewPolling([]string{root}, Options{PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	writeFile(t, filepath.Join(root, "f"), "x")
	if !waitAll(t, w, root, []string{filepath.Join(root, "f")}) {
		t.Error("a poll that saw a change sent no Rescan")
	}
}
