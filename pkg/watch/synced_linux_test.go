package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rjeczalik/notify"
	"golang.org/x/sys/unix"
	clocktesting "k8s.io/utils/clock/testing"
)

// inotifyWatches counts the inotify watches this process holds: the
// "inotify wd:" lines in the fdinfo of each of its inotify descriptors.
func inotifyWatches(t *testing.T) int {
	t.Helper()
	n := countInotifyWatches()
	if n < 0 {
		t.Fatal("can't read /proc/self/fd")
	}
	return n
}

// countInotifyWatches is inotifyWatches, or -1 without /proc/self/fd.
func countInotifyWatches() int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	n := 0
	for _, fd := range fds {
		if link, err := os.Readlink("/proc/self/fd/" + fd.Name()); err != nil || link != "anon_inode:inotify" {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + fd.Name())
		if err != nil {
			continue // closed since the ReadDir
		}
		for line := range strings.SplitSeq(string(info), "\n") {
			if strings.HasPrefix(line, "inotify wd:") {
				n++
			}
		}
	}
	return n
}

// ignoreSet is a Skip whose answers a test changes, as an ignore file edit
// does: a path is skipped when its first element is in the set.
type ignoreSet struct {
	mu    sync.Mutex
	names map[string]bool
}

func newIgnoreSet(names ...string) *ignoreSet {
	s := &ignoreSet{names: map[string]bool{}}
	for _, n := range names {
		s.names[n] = true
	}
	return s
}

func (s *ignoreSet) set(name string, ignored bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names[name] = ignored
}

func (s *ignoreSet) skip(_, rel string, _ bool) bool {
	first, _, _ := strings.Cut(rel, "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.names[first]
}

// TestWatchesOnlySyncedDirectories: 101 synced directories beside an
// ignored node_modules of 5,000 held 5,102 inotify watches with notify's
// recursive watch; each synced directory needs one, and ignored ones none.
// The count follows new directories, ignore edits (Refresh) and a
// directory deleted and made again.
func TestWatchesOnlySyncedDirectories(t *testing.T) {
	root := t.TempDir()
	const synced = 101 // root and d0…d99
	for i := range synced - 1 {
		mkdirAll(t, filepath.Join(root, fmt.Sprint("d", i)))
	}
	for i := range 5000 {
		mkdirAll(t, filepath.Join(root, "node_modules", fmt.Sprint("p", i)))
	}
	ign := newIgnoreSet("node_modules")
	base := inotifyWatches(t)
	w := newTestWatcher(t, []string{root}, Options{Skip: ign.skip})
	want := func(step string, n int) {
		t.Helper()
		if got := inotifyWatches(t) - base; got != n {
			t.Errorf("%s: %d inotify watches, want %d", step, got, n)
		}
	}
	want("at New", synced)

	mkdirAll(t, filepath.Join(root, "node_modules", "late")) // unwatched: no event, no watch
	mkdirAll(t, filepath.Join(root, "d100"))
	waitPath(t, w, filepath.Join(root, "d100"))
	want("after mkdir d100", synced+1)
	writeFile(t, filepath.Join(root, "d100", "f"), "x")
	waitPath(t, w, filepath.Join(root, "d100", "f"))

	ign.set("d5", true)
	w.Refresh(root)
	waitRescan(t, w, root)
	want("after ignoring d5", synced)

	ign.set("d5", false)
	w.Refresh(root)
	waitRescan(t, w, root)
	want("after un-ignoring d5", synced+1)
	writeFile(t, filepath.Join(root, "d5", "f"), "x")
	waitPath(t, w, filepath.Join(root, "d5", "f"))

	// notify keeps a node for a deleted directory that makes watching it
	// again a no-op: the new d7 is watched by a rebuild, with a Rescan.
	if err := os.RemoveAll(filepath.Join(root, "d7")); err != nil {
		t.Fatal(err)
	}
	mkdirAll(t, filepath.Join(root, "d7"))
	waitRescan(t, w, root)
	want("after d7 was made again", synced+1)
	writeFile(t, filepath.Join(root, "d7", "f"), "x")
	waitPath(t, w, filepath.Join(root, "d7", "f"))
}

// TestWatchFailsBelowRoot: a directory below the root that finds no watch
// or descriptor left, at New or when it appears, makes the root fall back
// to polling, now that each directory has a watch of its own.
func TestWatchFailsBelowRoot(t *testing.T) {
	for _, errno := range outOfResourceErrors {
		for _, late := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v, new directory %v", errno, late), func(t *testing.T) {
				root := evalDir(t, t.TempDir())
				bad := filepath.Join(root, "a", "b")
				if !late {
					mkdirAll(t, bad)
				}
				fn := &fakeNotify{errFor: func(path string) error {
					if path == bad {
						return errno
					}
					return nil
				}}
				clk := clocktesting.NewFakeClock(time.Now())
				w := newFakeWatcher(t, []string{root}, Options{}, fn.backend(clk))
				if late {
					mkdirAll(t, bad)
					fn.channels()[root] <- fakeEvent{
						path: filepath.Join(root, "a"),
						ev:   notify.Create,
						sys:  &unix.InotifyEvent{Mask: unix.IN_CREATE | unix.IN_ISDIR},
					}
				}

				checkFallbackErrno(t, receiveError(t, w), root, errno)
				if late {
					waitRescan(t, w, root) // queued once polling took its first snapshot
				}
				if got := fn.channels(); len(got) != 0 {
					t.Errorf("notify still watches %v after the fallback", got)
				}
				writeFile(t, filepath.Join(bad, "f"), "x")
				stepUntil(t, clk, w, filepath.Join(bad, "f"))
			})
		}
	}
}

// TestIgnoredDirectoriesGetNoWatch: the directories notify is asked to
// watch are the synced ones, each on its own; a Refresh after the
// answers of Skip changed watches what they leave now.
func TestIgnoredDirectoriesGetNoWatch(t *testing.T) {
	root := evalDir(t, t.TempDir())
	for _, d := range []string{"src/lib", "node_modules/x/y", "dist"} {
		mkdirAll(t, filepath.Join(root, d))
	}
	fn := &fakeNotify{}
	ign := newIgnoreSet("node_modules")
	w := newFakeWatcher(t, []string{root}, Options{Skip: ign.skip}, fn.backend(clocktesting.NewFakeClock(time.Now())))
	check := func(step string, want ...string) {
		t.Helper()
		var got []string
		for _, d := range fn.watchedDirs() {
			rel, _ := filepath.Rel(root, d)
			got = append(got, rel)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: watched %q, want %q", step, got, want)
		}
	}
	check("at New", ".", "dist", "src", "src/lib")

	ign.set("node_modules", false)
	ign.set("dist", true)
	w.Refresh(root)
	waitRescan(t, w, root)
	check("after the edit", ".", "node_modules", "node_modules/x", "node_modules/x/y", "src", "src/lib")
}

// TestOutOfInotifyWatchesIgnoredTree: with a watch limit lower than the
// ignored tree, the synced part is still watched with inotify, without a
// fallback. It runs in a user namespace like
// TestOutOfInotifyWatchesForReal.
func TestOutOfInotifyWatchesIgnoredTree(t *testing.T) {
	const limit = 16
	if !inLowWatchNamespace(t, "TestOutOfInotifyWatchesIgnoredTree", limit) {
		return
	}
	root := t.TempDir()
	for i := range 4 {
		mkdirAll(t, filepath.Join(root, fmt.Sprint(i)))
	}
	for i := range 4 * limit {
		mkdirAll(t, filepath.Join(root, "node_modules", fmt.Sprint(i)))
	}
	w := newTestWatcher(t, []string{root}, Options{Skip: newIgnoreSet("node_modules").skip, PollInterval: time.Hour})
	writeFile(t, filepath.Join(root, "3", "f"), "x")
	waitPath(t, w, filepath.Join(root, "3", "f")) // fails on a fallback error; an hour's poll would time out
}

// inLowWatchNamespace runs the test named name again in a new user
// namespace and reports false there; in that namespace, it lowers the
// inotify watch limit to limit and reports true. It skips the test when
// either can't be done.
func inLowWatchNamespace(t *testing.T, name string, limit int) bool {
	t.Helper()
	if os.Getenv(usernsEnv) == "" {
		runInUserNamespace(t, name)
		return false
	}
	if err := os.WriteFile("/proc/sys/user/max_inotify_watches", []byte(fmt.Sprint(limit)), 0); err != nil {
		t.Skipf("can't lower the inotify watch limit: %v", err)
	}
	return true
}

// TestRecursiveWatchDropsIgnoredEvents drives the path of Windows and of
// macOS with cgo, where notify watches the tree with one recursive watch:
// the events of an ignored tree stop in the Watcher, and a Refresh costs
// no rebuild, only the Rescan.
func TestRecursiveWatchDropsIgnoredEvents(t *testing.T) {
	root := evalDir(t, t.TempDir())
	mkdirAll(t, filepath.Join(root, "node_modules", "x"))
	fn := &fakeNotify{}
	be := fn.backend(clocktesting.NewFakeClock(time.Now()))
	be.perDirectory = false
	w := newFakeWatcher(t, []string{root}, Options{Skip: newIgnoreSet("node_modules").skip}, be)
	if got, want := fn.watchedDirs(), []string{filepath.Join(root, "...")}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("watched %q, want %q", got, want)
	}
	ch := fn.channels()[filepath.Join(root, "...")]
	ch <- fakeEvent{path: filepath.Join(root, "node_modules", "x", "a.js"), ev: notify.Write}
	ch <- fakeEvent{path: filepath.Join(root, "main.js"), ev: notify.Write}
	for _, ev := range waitPath(t, w, filepath.Join(root, "main.js")) { // one channel, one queue: in order
		if strings.Contains(ev.Path, "node_modules") {
			t.Errorf("got %+v for an ignored path", ev)
		}
	}

	w.Refresh(root)
	waitRescan(t, w, root)
	if got := fn.watches(); got != 1 {
		t.Errorf("%d watch setups after a Refresh, want 1: a recursive watch needs no rebuild", got)
	}
}

// BenchmarkWatchReadyIgnored measures New on a tree of 100,000 files with
// 90% of them under ignored node_modules directories, and reports the
// inotify watches it holds against the synced directories.
func BenchmarkWatchReadyIgnored(b *testing.B) {
	root := b.TempDir()
	synced := 1
	for i := range 10 {
		for j := range 10 {
			dir := filepath.Join(root, fmt.Sprint("s", i), fmt.Sprint("s", j))
			mkdirAll(b, dir)
			for f := range 100 {
				writeFile(b, filepath.Join(dir, fmt.Sprint("f", f, ".js")), "x\n")
			}
			synced++
		}
		synced++
	}
	for i := range 90 {
		for j := range 10 {
			dir := filepath.Join(root, "node_modules", fmt.Sprint("p", i), fmt.Sprint("m", j))
			mkdirAll(b, dir)
			for f := range 100 {
				writeFile(b, filepath.Join(dir, fmt.Sprint("f", f, ".js")), "x\n")
			}
		}
	}
	skip := newIgnoreSet("node_modules").skip
	var watches int
	for b.Loop() {
		b.StopTimer()
		base := countInotifyWatches()
		b.StartTimer()
		w, err := New([]string{root}, Options{Skip: skip})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		watches = countInotifyWatches() - base
		w.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(watches), "watches")
	b.ReportMetric(float64(synced), "synced-dirs")
}
