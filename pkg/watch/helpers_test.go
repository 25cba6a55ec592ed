package watch

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rjeczalik/notify"
	"k8s.io/utils/clock"
)

// deadline bounds every wait for an event. It is generous because the
// machine may be busy; no test depends on how long anything takes.
const deadline = 10 * time.Second

func newTestWatcher(t *testing.T, roots []string, opts Options) Watcher {
	t.Helper()
	w, err := New(roots, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// waitFor reads events until match is true and returns every event read.
// An error from the watcher fails the test.
func waitFor(t *testing.T, w Watcher, what string, match func(Event) bool) []Event {
	t.Helper()
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
	var seen []Event
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("Events closed while waiting for %s", what)
			}
			seen = append(seen, ev)
			if match(ev) {
				return seen
			}
		case err := <-w.Errors():
			t.Errorf("watcher error while waiting for %s: %v", what, err)
		case <-timeout.C:
			t.Fatalf("no event for %s within %s; saw %v", what, deadline, seen)
		}
	}
}

// waitPath waits for an event for path itself; Rescans don't count.
func waitPath(t *testing.T, w Watcher, path string) []Event {
	t.Helper()
	return waitPaths(t, w, path)
}

// waitPaths waits for an event for each of paths, in any order; Rescans
// don't count.
func waitPaths(t *testing.T, w Watcher, paths ...string) []Event {
	t.Helper()
	missing := map[string]bool{}
	for _, p := range paths {
		missing[p] = true
	}
	return waitFor(t, w, strings.Join(paths, ", "), func(ev Event) bool {
		if !ev.Rescan {
			delete(missing, ev.Path)
		}
		return len(missing) == 0
	})
}

// waitRescan waits for a Rescan of root.
func waitRescan(t *testing.T, w Watcher, root string) []Event {
	t.Helper()
	return waitFor(t, w, "Rescan of "+root, func(ev Event) bool { return ev.Rescan && ev.Root == root })
}

// waitAll waits until every path got an event or their root got a Rescan,
// the Watcher's promise; it reports whether a Rescan came.
func waitAll(t *testing.T, w Watcher, root string, paths []string) (rescan bool) {
	t.Helper()
	missing := map[string]bool{}
	for _, p := range paths {
		missing[p] = true
	}
	waitFor(t, w, "all of "+strings.Join(firstN(paths, 3), ", ")+"…", func(ev Event) bool {
		if ev.Rescan && ev.Root == root {
			rescan = true
			return true
		}
		delete(missing, ev.Path)
		return len(missing) == 0
	})
	return rescan
}

func firstN(s []string, n int) []string { return s[:min(n, len(s))] }

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdirAll(t testing.TB, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

// ourGoroutines lists the running goroutines a Watcher started: those
// created by a function of this package other than a test. notify's own
// goroutines are global and live as long as the process.
func ourGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	const pkg = "created by github.com/livesync-dev/kubectl-livesync/pkg/watch."
	var ours []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, pkg) && !strings.Contains(g, pkg+"Test") {
			ours = append(ours, g)
		}
	}
	return ours
}

// fakeNotify stands in for notify in the backend.
type fakeNotify struct {
	mu       sync.Mutex
	watchErr error                   // returned by every watch
	errFor   func(path string) error // nil: no watch fails but by watchErr
	paths    map[chan<- eventInfo][]string
	probe    func(dir string) error      // nil: no probe failure
	watched  map[chan<- eventInfo]string // the first path watched with each channel
	nwatch   int                         // see watches
	stops    int
}

// watches returns how many times the watches of a root were set up:
// watches of a channel that had none (a root's first directory).
func (f *fakeNotify) watches() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nwatch
}

func (f *fakeNotify) backend(clk clock.WithTickerAndDelayedExecution) backend {
	return backend{
		watch: func(path string, c chan<- eventInfo) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if _, ok := f.watched[c]; !ok {
				f.nwatch++
			}
			if f.watchErr != nil {
				return f.watchErr
			}
			if f.errFor != nil {
				if err := f.errFor(path); err != nil {
					return err
				}
			}
			if f.watched == nil {
				f.watched = map[chan<- eventInfo]string{}
			}
			if _, ok := f.watched[c]; !ok { // the root's directory is watched first
				f.watched[c] = path
			}
			if f.paths == nil {
				f.paths = map[chan<- eventInfo][]string{}
			}
			f.paths[c] = append(f.paths[c], path)
			return nil
		},
		stop: func(c chan<- eventInfo) {
			f.mu.Lock()
			defer f.mu.Unlock()
			delete(f.watched, c)
			delete(f.paths, c)
			f.stops++
		},
		probe: func(dir string) error {
			if f.probe == nil {
				return nil
			}
			return f.probe(dir)
		},
		perDirectory: true,
		clock:        clk,
		burstLimit:   1 << 30,
		burstWindow:  time.Second,
		settle:       time.Second,
	}
}

// channels returns the channels currently watched, by the first path
// watched with each: the root's directory.
func (f *fakeNotify) channels() map[string]chan<- eventInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]chan<- eventInfo{}
	for c, p := range f.watched {
		m[p] = c
	}
	return m
}

// watchedDirs returns every directory watched now, sorted.
func (f *fakeNotify) watchedDirs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var dirs []string
	for _, ps := range f.paths {
		dirs = append(dirs, ps...)
	}
	slices.Sort(dirs)
	return dirs
}

// fakeEvent is a notify.EventInfo made by hand.
type fakeEvent struct {
	path string
	ev   notify.Event
	sys  any
}

func (e fakeEvent) Event() notify.Event { return e.ev }
func (e fakeEvent) Path() string        { return e.path }
func (e fakeEvent) Sys() any            { return e.sys }

func evalDir(t *testing.T, dir string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// pendingRewalks lists the directories waiting for their second walk.
func (w *watcher) pendingRewalks() []string {
	w.laterMu.Lock()
	defer w.laterMu.Unlock()
	var dirs []string
	for k := range w.later {
		if k.kind == kindRewalk {
			dirs = append(dirs, k.path)
		}
	}
	return dirs
}

// chmodMode is a mode change the platform records: Windows keeps only the
// read-only attribute, so 0o755 on a 0o644 file changes nothing there.
var chmodMode = func() os.FileMode {
	if runtime.GOOS == "windows" {
		return 0o444
	}
	return 0o755
}()
