package watch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rjeczalik/notify"
	clocktesting "k8s.io/utils/clock/testing"
)

const testInterval = time.Second

func newFakeWatcher(t *testing.T, roots []string, opts Options, be backend) Watcher {
	t.Helper()
	if opts.PollInterval == 0 {
		opts.PollInterval = testInterval
	}
	w, err := newWatcher(roots, opts, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// stepUntil advances the fake clock one poll interval at a time until an
// event for each of paths arrived. A Rescan of a root covers every path
// under it: a poll that sees a change asks for one.
func stepUntil(t *testing.T, clk *clocktesting.FakeClock, w Watcher, paths ...string) []Event {
	t.Helper()
	missing := map[string]bool{}
	for _, p := range paths {
		missing[p] = true
	}
	return stepFor(t, clk, w, func() string { return fmt.Sprint(slices.Sorted(mapsKeys(missing))) }, func(ev Event) bool {
		delete(missing, ev.Path)
		if ev.Rescan {
			for p := range missing {
				if rel, err := filepath.Rel(ev.Root, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
					delete(missing, p)
				}
			}
		}
		return len(missing) == 0
	}, nil)
}

// stepUntilRescan advances the fake clock until a Rescan of root arrived.
func stepUntilRescan(t *testing.T, clk *clocktesting.FakeClock, w Watcher, root string) []Event {
	t.Helper()
	return stepFor(t, clk, w, func() string { return "a Rescan of " + root }, func(ev Event) bool {
		return ev.Rescan && ev.Root == root
	}, nil)
}

// stepFor advances the fake clock one poll interval at a time until
// onEvent or onErr accepts what arrived, and returns the events seen. A nil
// onErr fails the test on any error. A tick that finds the poller busy is
// dropped by the fake ticker, hence the loop.
func stepFor(t *testing.T, clk *clocktesting.FakeClock, w Watcher, what func() string, onEvent func(Event) bool, onErr func(error) bool) []Event {
	t.Helper()
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
	var seen []Event
	for {
		clk.Step(testInterval)
		retry := time.NewTimer(20 * time.Millisecond)
	read:
		for {
			select {
			case ev := <-w.Events():
				seen = append(seen, ev)
				if onEvent(ev) {
					retry.Stop()
					return seen
				}
			case err := <-w.Errors():
				if onErr == nil {
					t.Errorf("watcher error: %v", err)
				} else if onErr(err) {
					retry.Stop()
					return seen
				}
			case <-retry.C:
				break read
			case <-timeout.C:
				t.Fatalf("nothing for %s within %s; saw %v", what(), deadline, seen)
			}
		}
	}
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func receiveError(t *testing.T, w Watcher) error {
	t.Helper()
	select {
	case err := <-w.Errors():
		return err
	case <-time.After(deadline):
		t.Fatal("no error reported")
		return nil
	}
}

// outOfResourceErrors are the errors a watch or probe may fail with that
// make a root fall back to polling.
var outOfResourceErrors = []syscall.Errno{syscall.ENOSPC, syscall.EMFILE, syscall.ENFILE}

// checkFallbackErrno checks the one line that says a root fell back to
// polling because of errno, and what to do about it.
func checkFallbackErrno(t *testing.T, err error, root string, errno syscall.Errno) {
	t.Helper()
	why := map[syscall.Errno]string{
		syscall.ENOSPC: `out of inotify watches: raise it with "sudo sysctl fs.inotify.max_user_watches=524288"`,
		syscall.EMFILE: `out of file descriptors (on macOS each watched file needs one): raise the limit, e.g. "ulimit -n 65536", and restart`,
		syscall.ENFILE: "the system's open file table is full: close other programs, or raise the system limit (kern.maxfiles on macOS, fs.file-max on Linux)",
	}[errno]
	want := fmt.Sprintf(`watching %q: %s; falling back to polling every 1s`, root, why)
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
	if !errors.Is(err, ErrOutOfWatches) || !errors.Is(err, errno) {
		t.Errorf("errors.Is(%v, ErrOutOfWatches / %v) = false", err, errno)
	}
}

func TestOutOfWatchesFallsBackToPolling(t *testing.T) {
	type testCase struct {
		name     string
		errno    syscall.Errno
		watchErr error
		probe    func(string) error
	}
	var cases []testCase
	for _, errno := range outOfResourceErrors {
		cases = append(cases,
			testCase{fmt.Sprintf("watch fails with %v", errno), errno, errno, nil},
			testCase{fmt.Sprintf("probe fails with %v after a silent partial watch", errno), errno, nil, func(string) error { return errno }})
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			root := tempDir(t)
			mkdirAll(t, filepath.Join(root, "node_modules"))
			clk := clocktesting.NewFakeClock(time.Now())
			fn := &fakeNotify{watchErr: tt.watchErr, probe: tt.probe}
			w := newFakeWatcher(t, []string{root}, Options{Skip: func(_, rel string, _ bool) bool {
				if strings.HasPrefix(rel, "node_modules/") {
					t.Errorf("polling descended into skipped node_modules: %q", rel)
				}
				return rel == "node_modules"
			}}, fn.backend(clk))

			checkFallbackErrno(t, receiveError(t, w), root, tt.errno)
			if got := fn.channels(); len(got) != 0 {
				t.Errorf("notify still watches %v after the fallback", got)
			}
			writeFile(t, filepath.Join(root, "node_modules", "x.js"), "x")
			writeFile(t, filepath.Join(root, "f"), "x")
			stepUntil(t, clk, w, filepath.Join(root, "f"))
		})
	}
}

// TestOtherWatchErrorsFailNew: only running out of watches or descriptors
// is worth a fallback.
func TestOtherWatchErrorsFailNew(t *testing.T) {
	root := tempDir(t)
	fn := &fakeNotify{watchErr: syscall.EACCES}
	_, err := newWatcher([]string{root}, Options{}, fn.backend(clocktesting.NewFakeClock(time.Now())))
	if !errors.Is(err, syscall.EACCES) || !strings.Contains(err.Error(), fmt.Sprintf("watching %q", root)) {
		t.Fatalf("err = %v, want EACCES naming the root", err)
	}
}

// TestOverflowChannelFull drives the full-channel check with a fake notify:
// with room left after a receive there is no Rescan, with a full channel
// (every receive from a 1-slot channel) there is.
func TestOverflowChannelFull(t *testing.T) {
	for _, tt := range []struct {
		buffer     int
		wantRescan bool
	}{
		{buffer: 4, wantRescan: false},
		{buffer: 1, wantRescan: true},
	} {
		t.Run(fmt.Sprint("buffer ", tt.buffer), func(t *testing.T) {
			root := tempDir(t)
			fn := &fakeNotify{}
			w := newFakeWatcher(t, []string{root}, Options{Buffer: tt.buffer}, fn.backend(clocktesting.NewFakeClock(time.Now())))
			ch := fn.channels()[root]
			ch <- fakeEvent{path: filepath.Join(root, "f"), ev: notify.Write}

			evs := waitFor(t, w, "any event", func(Event) bool { return true })
			if got := evs[0]; got.Rescan != tt.wantRescan || got.Root != root {
				t.Errorf("got %+v, want Rescan=%v for root %q", got, tt.wantRescan, root)
			}
		})
	}
}

func TestOverflowBurstRescansEveryRoot(t *testing.T) {
	root1, root2 := tempDir(t), tempDir(t)
	fn := &fakeNotify{}
	be := fn.backend(clocktesting.NewFakeClock(time.Now())) // time stands still: one window
	be.burstLimit = 100
	w := newFakeWatcher(t, []string{root1, root2}, Options{}, be)
	ch := fn.channels()[root1]
	for i := range be.burstLimit {
		ch <- fakeEvent{path: filepath.Join(root1, fmt.Sprint(i)), ev: notify.Create}
	}
	rescans := map[string]bool{}
	waitFor(t, w, "Rescans of both roots", func(ev Event) bool {
		if ev.Rescan {
			rescans[ev.Root] = true
		}
		return len(rescans) == 2
	})
}

// TestBurstBelowLimitNoRescan: a 10,000-file burst (one event a file, all at
// one instant) below the Linux default limit arrives as hints, every path and
// no Rescan; the events that reach the limit then trip it.
func TestBurstBelowLimitNoRescan(t *testing.T) {
	root := tempDir(t)
	fn := &fakeNotify{}
	be := fn.backend(clocktesting.NewFakeClock(time.Now())) // time stands still: one window
	be.burstLimit = 16384
	w := newFakeWatcher(t, []string{root}, Options{Buffer: 1 << 15}, be) // notify's channel never fills
	ch := fn.channels()[root]
	const files = 10000
	want := map[string]bool{}
	for i := range files {
		p := filepath.Join(root, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.txt", i))
		want[p] = true
		ch <- fakeEvent{path: p, ev: notify.Create}
	}
	waitFor(t, w, "every path of the burst", func(ev Event) bool {
		if ev.Rescan {
			t.Fatalf("Rescan after %d of %d paths, below the limit of %d events", files-len(want), files, be.burstLimit)
		}
		delete(want, ev.Path)
		return len(want) == 0
	})
	for i := files; i < be.burstLimit; i++ {
		ch <- fakeEvent{path: filepath.Join(root, fmt.Sprintf("g%05d.txt", i)), ev: notify.Create}
	}
	waitFor(t, w, "a Rescan once the window holds the limit", func(ev Event) bool { return ev.Rescan })
}

func TestBurstWindows(t *testing.T) {
	start := time.Unix(1_000_000, 0) // on a bucket boundary
	b := burst{limit: 3, window: time.Second}
	for i, tt := range []struct {
		at   time.Duration
		want bool
	}{
		{0, false}, {100 * time.Millisecond, false}, {200 * time.Millisecond, true}, // third in the window
		{300 * time.Millisecond, false},                                    // only once per window
		{1250 * time.Millisecond, true},                                    // 200 ms, 300 ms and 1.25 s within 1.1 s: the window slides
		{1300 * time.Millisecond, false},                                   // fired 50 ms ago
		{3500 * time.Millisecond, false}, {4400 * time.Millisecond, false}, // two in 0.9 s
		{4450 * time.Millisecond, true},                                                                      // the third within 1 s
		{6000 * time.Millisecond, false}, {7000 * time.Millisecond, false}, {8100 * time.Millisecond, false}, // a second apart
	} {
		if got := b.add(start.Add(tt.at)); got != tt.want {
			t.Errorf("event %d at %s: add = %v, want %v", i, tt.at, got, tt.want)
		}
	}
}

func TestQueue(t *testing.T) {
	q := newQueue()
	q.push(item{root: 0, path: "/r/a"})
	q.push(item{root: 0, path: "/r/b", checked: true})
	q.push(item{root: 0, path: "/r/a", eventFlags: eventFlags{isDir: true, dirKnown: true, created: true}})
	q.push(item{root: 0, path: "/r/b"}) // unchecked wins: Skip must still run
	q.push(item{root: 1, path: "/s/a"})

	want := []item{
		{root: 0, path: "/r/a", eventFlags: eventFlags{isDir: true, dirKnown: true, created: true}},
		{root: 0, path: "/r/b"},
		{root: 1, path: "/s/a"},
	}
	for _, w := range want {
		if got, ok := q.pop(); !ok || got != w {
			t.Errorf("pop = %+v, %v; want %+v", got, ok, w)
		}
	}
	if got, ok := q.pop(); ok {
		t.Errorf("pop from empty queue = %+v", got)
	}

	// A Rescan drops its root's queued walks but keeps its hints, what
	// repairs notify's tree and other roots' items, and swallows later walks
	// until it is popped.
	q.push(item{root: 0, path: "/r/a"})
	q.push(item{root: 0, path: "/r/moved", eventFlags: eventFlags{movedAway: true}})
	q.push(item{kind: kindRewalk, root: 0, path: "/r/new"})
	q.push(item{root: 1, path: "/s/a"})
	q.push(item{root: 0, path: "/r/gone", eventFlags: eventFlags{removed: true}})
	q.push(item{kind: kindRescan, root: 0})
	q.push(item{root: 0, path: "/r/later"})
	q.push(item{kind: kindRewalk, root: 0, path: "/r/newer"})
	q.push(item{root: 0, path: "/r/newdir", eventFlags: eventFlags{created: true}}) // needs its watch
	q.push(item{kind: kindRewatch, root: 0})
	q.push(item{kind: kindRescan, root: 0})
	want = []item{
		{root: 0, path: "/r/a"},
		{root: 0, path: "/r/moved", eventFlags: eventFlags{movedAway: true}},
		{root: 1, path: "/s/a"},
		{root: 0, path: "/r/gone", eventFlags: eventFlags{removed: true}},
		{kind: kindRescan, root: 0},
		{root: 0, path: "/r/later"},
		{root: 0, path: "/r/newdir", eventFlags: eventFlags{created: true}},
		{kind: kindRewatch, root: 0},
	}
	for _, w := range want {
		if got, ok := q.pop(); !ok || got != w {
			t.Errorf("pop = %+v, %v; want %+v", got, ok, w)
		}
	}
	q.push(item{root: 0, path: "/r/after"}) // the Rescan is out: queue again
	if got, ok := q.pop(); !ok || got.path != "/r/after" {
		t.Errorf("pop = %+v, %v; want /r/after", got, ok)
	}

	// Behind a Rescan, hints stay only while the queue is short.
	q.maxBehind = 2
	q.push(item{kind: kindRescan, root: 0})
	q.push(item{root: 0, path: "/r/one"})
	q.push(item{root: 0, path: "/r/two"}) // the queue holds two: dropped
	want = []item{{kind: kindRescan, root: 0}, {root: 0, path: "/r/one"}}
	for _, w := range want {
		if got, ok := q.pop(); !ok || got != w {
			t.Errorf("pop = %+v, %v; want %+v", got, ok, w)
		}
	}
	if got, ok := q.pop(); ok {
		t.Errorf("pop = %+v; want an empty queue, the hint beyond maxBehind dropped", got)
	}

	q.pushErr(errors.New("one"))
	q.pushErr(errors.New("two"))
	for _, w := range []string{"one", "two"} {
		err, ok := q.peekErr()
		if !ok || err.Error() != w {
			t.Errorf("peekErr = %v, %v; want %s", err, ok, w)
		}
		q.dropErr()
	}
	if _, ok := q.peekErr(); ok {
		t.Error("peekErr on no errors = true")
	}
}

func TestPolling(t *testing.T) {
	root := tempDir(t)
	file := filepath.Join(tempDir(t), "single.txt")
	writeFile(t, file, "x")
	for _, name := range []string{"modify.txt", "delete.txt", "chmod.sh", "old.txt", "replace.txt"} {
		writeFile(t, filepath.Join(root, name), "x")
	}
	mkdirAll(t, filepath.Join(root, "node_modules", "react"))
	var mu sync.Mutex
	var asked []string
	clk := clocktesting.NewFakeClock(time.Now())
	be := (&fakeNotify{}).backend(clk)
	be.watch = nil // poll only, as NewPolling does
	w := newFakeWatcher(t, []string{root, file}, Options{Skip: func(_, rel string, _ bool) bool {
		mu.Lock()
		asked = append(asked, rel)
		mu.Unlock()
		return rel == "node_modules"
	}}, be)
	at := func(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }

	steps := []struct {
		name  string
		do    func() error
		paths []string
	}{
		{"create", func() error { return os.WriteFile(at("new.txt"), nil, 0o644) }, []string{at("new.txt")}},
		{"modify", func() error { return os.WriteFile(at("modify.txt"), []byte("longer"), 0o644) }, []string{at("modify.txt")}},
		{"delete", func() error { return os.Remove(at("delete.txt")) }, []string{at("delete.txt")}},
		{"chmod", func() error { return os.Chmod(at("chmod.sh"), chmodMode) }, []string{at("chmod.sh")}},
		{"rename", func() error { return os.Rename(at("old.txt"), at("renamed.txt")) }, []string{at("old.txt"), at("renamed.txt")}},
		{"replace same size", func() error { // only the inode differs, as after an atomic save
			if err := os.WriteFile(at("replace.tmp"), []byte("y"), 0o644); err != nil {
				return err
			}
			fi, err := os.Stat(at("replace.txt"))
			if err != nil {
				return err
			}
			if err := os.Chtimes(at("replace.tmp"), fi.ModTime(), fi.ModTime()); err != nil {
				return err
			}
			return os.Rename(at("replace.tmp"), at("replace.txt"))
		}, []string{at("replace.txt")}},
		{"new tree", func() error {
			mkdirAll(t, at("a/b"))
			return os.WriteFile(at("a/b/f"), nil, 0o644)
		}, []string{at("a"), at("a/b"), at("a/b/f")}},
		{"single file root", func() error { return os.WriteFile(file, []byte("changed"), 0o644) }, []string{file}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if err := step.do(); err != nil {
				t.Fatal(err)
			}
			stepUntil(t, clk, w, step.paths...)
		})
	}
	writeFile(t, at("node_modules/react/index.js"), "x")
	writeFile(t, at("sentinel"), "x")
	stepUntil(t, clk, w, at("sentinel")) // a poll ran after the write
	mu.Lock()
	defer mu.Unlock()
	for _, rel := range asked {
		if strings.HasPrefix(rel, "node_modules/") {
			t.Errorf("Skip asked about %q: polling descended into skipped node_modules", rel)
		}
	}
}
