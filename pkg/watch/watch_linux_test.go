package watch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rjeczalik/notify"
	"golang.org/x/sys/unix"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestNewDirectoryOutOfWatches: when the probe for a new directory finds
// no watch or descriptor left, the root falls back to polling and gets a
// Rescan.
func TestNewDirectoryOutOfWatches(t *testing.T) {
	for _, errno := range outOfResourceErrors {
		t.Run(errno.Error(), func(t *testing.T) {
			root := evalDir(t, t.TempDir())
			newDir := filepath.Join(root, "new")
			mkdirAll(t, newDir)
			fn := &fakeNotify{probe: func(dir string) error {
				if dir == newDir {
					return errno
				}
				return nil
			}}
			clk := clocktesting.NewFakeClock(time.Now())
			w := newFakeWatcher(t, []string{root}, Options{}, fn.backend(clk))
			fn.channels()[root] <- fakeEvent{
				path: newDir,
				ev:   notify.Create,
				sys:  &unix.InotifyEvent{Mask: unix.IN_CREATE | unix.IN_ISDIR},
			}

			checkFallbackErrno(t, receiveError(t, w), root, errno)
			waitRescan(t, w, root)
			if got := fn.channels(); len(got) != 0 {
				t.Errorf("notify still watches %v after the fallback", got)
			}
			writeFile(t, filepath.Join(root, "after"), "x")
			stepUntil(t, clk, w, filepath.Join(root, "after"))
		})
	}
}

// TestNewDirectoryWalkedAgain: a file created in a new directory after the
// first walk but before notify watched the directory is found by the
// second walk, and a subdirectory doesn't get a second walk of its own.
func TestNewDirectoryWalkedAgain(t *testing.T) {
	root := evalDir(t, t.TempDir())
	dir := filepath.Join(root, "new")
	mkdirAll(t, filepath.Join(dir, "sub"))
	writeFile(t, filepath.Join(dir, "early"), "x")
	fn := &fakeNotify{}
	clk := clocktesting.NewFakeClock(time.Now())
	w := newFakeWatcher(t, []string{root}, Options{}, fn.backend(clk))
	ch := fn.channels()[root]
	created := func(p string) eventInfo {
		return fakeEvent{path: p, ev: notify.Create, sys: &unix.InotifyEvent{Mask: unix.IN_CREATE | unix.IN_ISDIR}}
	}

	ch <- created(dir)
	waitPaths(t, w, dir, filepath.Join(dir, "early"), filepath.Join(dir, "sub"))
	ch <- created(filepath.Join(dir, "sub"))
	waitPath(t, w, filepath.Join(dir, "sub"))
	if n := len(w.(*watcher).pendingRewalks()); n != 1 {
		t.Errorf("%d second walks pending, want 1 for the new subtree", n)
	}

	writeFile(t, filepath.Join(dir, "sub", "late"), "x") // no event: notify "missed" it
	clk.Step(time.Second)
	waitPath(t, w, filepath.Join(dir, "sub", "late"))
}

// TestRenameBurstRewatchesOnce: each directory renamed away asks for the
// root's watch to be rebuilt, but a burst of them costs one rebuild, after
// things settle, and a Rescan.
func TestRenameBurstRewatchesOnce(t *testing.T) {
	root := evalDir(t, t.TempDir())
	fn := &fakeNotify{}
	clk := clocktesting.NewFakeClock(time.Now())
	w := newFakeWatcher(t, []string{root}, Options{}, fn.backend(clk))
	ch := fn.channels()[root]
	var paths []string
	for i := range 3 {
		p := filepath.Join(root, fmt.Sprint("dir", i))
		ch <- fakeEvent{path: p, ev: notify.Rename, sys: &unix.InotifyEvent{Mask: unix.IN_MOVED_FROM | unix.IN_ISDIR}}
		paths = append(paths, p)
	}
	waitPaths(t, w, paths...)
	if got := fn.watches(); got != 1 {
		t.Fatalf("%d watches before things settled, want only the first", got)
	}
	clk.Step(time.Second)
	waitRescan(t, w, root)
	if got := fn.watches(); got != 2 {
		t.Errorf("%d watches, want the first and one rebuild", got)
	}
}

// TestRewatchOutOfDescriptors: the rebuild after a rename that finds no
// descriptor or watch left falls back to polling like the first watch.
func TestRewatchOutOfDescriptors(t *testing.T) {
	for _, errno := range outOfResourceErrors {
		t.Run(errno.Error(), func(t *testing.T) {
			root := evalDir(t, t.TempDir())
			fn := &fakeNotify{}
			clk := clocktesting.NewFakeClock(time.Now())
			w := newFakeWatcher(t, []string{root}, Options{}, fn.backend(clk))
			moved := filepath.Join(root, "moved")
			fn.channels()[root] <- fakeEvent{path: moved, ev: notify.Rename, sys: &unix.InotifyEvent{Mask: unix.IN_MOVED_FROM | unix.IN_ISDIR}}
			waitPath(t, w, moved)
			fn.mu.Lock()
			fn.watchErr = errno
			fn.mu.Unlock()

			clk.Step(time.Second) // the rebuild is due
			checkFallbackErrno(t, receiveError(t, w), root, errno)
			writeFile(t, filepath.Join(root, "after"), "x")
			stepUntil(t, clk, w, filepath.Join(root, "after"))
		})
	}
}

// TestRootRecreatedForReal deletes or renames the root under real notify
// and creates it again, at once (`rm -rf dist && tsc`) or later: the new
// directory must be watched, with a Rescan for what happened in between.
func TestRootRecreatedForReal(t *testing.T) {
	for _, tt := range []struct {
		name   string
		remove func(root string) error
		later  bool // the root stays away until the watcher saw it go
	}{
		{"rm -rf, mkdir", os.RemoveAll, false},
		{"rm -rf, mkdir later", os.RemoveAll, true},
		{"mv away, mkdir", func(root string) error { return os.Rename(root, root+".old") }, false},
		{"mv away, mkdir later", func(root string) error { return os.Rename(root, root+".old") }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "dist")
			mkdirAll(t, filepath.Join(root, "sub"))
			writeFile(t, filepath.Join(root, "sub", "old.js"), "x")
			w := newTestWatcher(t, []string{root}, Options{PollInterval: 20 * time.Millisecond})

			if err := tt.remove(root); err != nil {
				t.Fatal(err)
			}
			if tt.later {
				waitPath(t, w, root)
			}
			mkdirAll(t, root)
			writeFile(t, filepath.Join(root, "main.js"), "x")
			waitRescan(t, w, root)
			writeFile(t, filepath.Join(root, "later.js"), "x")
			waitPath(t, w, filepath.Join(root, "later.js"))
			mkdirAll(t, filepath.Join(root, "sub2"))
			writeFile(t, filepath.Join(root, "sub2", "deep.js"), "x")
			waitPath(t, w, filepath.Join(root, "sub2", "deep.js"))
		})
	}
}

// TestSingleFileRootReplacedForReal: a file root deleted and written anew
// is seen through its directory's watch; when the directory itself goes and
// comes back, the new one is watched.
func TestSingleFileRootReplacedForReal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "conf")
	file := filepath.Join(dir, "app.yaml")
	mkdirAll(t, dir)
	writeFile(t, file, "a: 1\n")
	w := newTestWatcher(t, []string{file}, Options{PollInterval: 20 * time.Millisecond})

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	waitPath(t, w, file)
	writeFile(t, file, "a: 2\n")
	waitPath(t, w, file)

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	waitPath(t, w, file)
	mkdirAll(t, dir)
	writeFile(t, file, "a: 3\n")
	waitRescan(t, w, file)
	writeFile(t, file, "a: 4\n")
	waitPath(t, w, file)
}

const usernsEnv = "LIVESYNC_WATCH_TEST_IN_USERNS"

// TestOutOfInotifyWatchesForReal runs itself again in a new user namespace
// whose inotify watch limit it can lower, and checks that real notify
// running out of watches, which notify doesn't report, is detected both
// when the root is set up and when new directories appear.
func TestOutOfInotifyWatchesForReal(t *testing.T) {
	const limit = 16
	if !inLowWatchNamespace(t, "TestOutOfInotifyWatchesForReal", limit) {
		return
	}
	opts := Options{PollInterval: 20 * time.Millisecond}
	wantErr := func(err error, root string) {
		t.Helper()
		if !errors.Is(err, ErrOutOfWatches) || !strings.Contains(err.Error(), fmt.Sprintf("watching %q: out of inotify watches", root)) {
			t.Errorf("error = %v, want the fallback error for %q", err, root)
		}
	}

	t.Run("at New", func(t *testing.T) {
		root := t.TempDir()
		for i := range 2 * limit {
			mkdirAll(t, filepath.Join(root, fmt.Sprint(i)))
		}
		w := newTestWatcher(t, []string{root}, opts)
		wantErr(receiveError(t, w), root)
		writeFile(t, filepath.Join(root, "7", "f"), "x")
		waitAll(t, w, root, []string{filepath.Join(root, "7", "f")}) // polled: a Rescan covers it
		w.Close()                                                    // give the watches back
	})

	t.Run("new directories", func(t *testing.T) {
		root := t.TempDir()
		w := newTestWatcher(t, []string{root}, opts)
		for i := range 2 * limit {
			mkdirAll(t, filepath.Join(root, fmt.Sprint(i)))
		}
		timeout := time.After(deadline)
		var fellBack, rescan bool
		for !fellBack || !rescan {
			select {
			case err := <-w.Errors():
				wantErr(err, root)
				fellBack = true
			case ev := <-w.Events():
				rescan = rescan || ev.Rescan
			case <-timeout:
				t.Fatalf("within %s: fallback error %v, Rescan %v; want both", deadline, fellBack, rescan)
			}
		}
		writeFile(t, filepath.Join(root, "3", "f"), "x")
		waitAll(t, w, root, []string{filepath.Join(root, "3", "f")}) // polled: a Rescan covers it
	})
}

// runInUserNamespace runs the test named name again, alone, in a new user
// namespace, where it may lower the namespace's inotify limits, and fails
// or skips as it did.
func runInUserNamespace(t *testing.T, name string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), usernsEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	if exitErr := (*exec.ExitError)(nil); err != nil && !errors.As(err, &exitErr) {
		t.Skipf("can't start a process in a new user namespace: %v", err)
	}
	if err != nil {
		t.Fatalf("in a user namespace with few inotify watches: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Skipf("skipped in the user namespace:\n%s", out)
	}
	t.Logf("in a user namespace:\n%s", out)
}

// TestProbeWatchHoldsNoWatch: probeWatch adds its watch to one inotify instance
// it keeps and removes it at once, so probing many directories holds none (an
// instance per probe cost a kernel RCU grace period each, at close).
func TestProbeWatchHoldsNoWatch(t *testing.T) {
	for i := range 200 {
		dir := filepath.Join(t.TempDir(), fmt.Sprint(i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := probeWatch(dir); err != nil {
			t.Fatal(err)
		}
	}
	probe.Lock()
	fd := probe.fd
	probe.Unlock()
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(info), "inotify wd:"); fd <= 0 || n != 0 {
		t.Errorf("probe instance %d holds %d watches after 200 probes, want 0:\n%s", fd, n, info)
	}
}

// TestProgressForReal: on real inotify, a file being written says Writing
// until its writer closes it, then Complete; a file or directory moved in
// and a new directory say Complete; a removal says Unknown.
func TestProgressForReal(t *testing.T) {
	root := evalDir(t, t.TempDir())
	outside := t.TempDir()
	w := newTestWatcher(t, []string{root}, Options{})
	hasProgress := func(path string, p Progress) func(Event) bool {
		return func(ev Event) bool { return ev.Path == path && !ev.Rescan && ev.Progress == p }
	}

	file := filepath.Join(root, "f.txt")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("half"); err != nil {
		t.Fatal(err)
	}
	for _, ev := range waitFor(t, w, "f.txt Writing", hasProgress(file, Writing)) {
		if ev.Path == file && ev.Progress == Complete {
			t.Fatalf("f.txt Complete while its writer still has it open: %v", ev)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, w, "f.txt Complete after the close", hasProgress(file, Complete))

	moved := filepath.Join(root, "moved.txt")
	writeFile(t, filepath.Join(outside, "moved.txt"), "x")
	if err := os.Rename(filepath.Join(outside, "moved.txt"), moved); err != nil {
		t.Fatal(err)
	}
	waitFor(t, w, "moved.txt Complete", hasProgress(moved, Complete))

	dir := filepath.Join(root, "d")
	mkdirAll(t, dir)
	waitFor(t, w, "d Complete", hasProgress(dir, Complete))
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, w, "d Unknown after its removal", hasProgress(dir, Unknown))
}

// TestProgressOf: how each inotify mask reads.
func TestProgressOf(t *testing.T) {
	for _, tt := range []struct {
		name string
		mask uint32
		want Progress
	}{
		{"close after write", unix.IN_CLOSE_WRITE, Complete},
		{"moved in", unix.IN_MOVED_TO, Complete},
		{"directory moved in", unix.IN_MOVED_TO | unix.IN_ISDIR, Complete},
		{"directory created", unix.IN_CREATE | unix.IN_ISDIR, Complete},
		{"file created", unix.IN_CREATE, Writing},
		{"modified", unix.IN_MODIFY, Writing},
		{"deleted", unix.IN_DELETE, Unknown},
		{"renamed away", unix.IN_MOVED_FROM, Unknown},
		{"attributes (then writerCheck for a file)", unix.IN_ATTRIB, Complete},
		{"deleted itself", unix.IN_DELETE_SELF, Unknown},
	} {
		if got := progressOf(tt.mask); got != tt.want {
			t.Errorf("%s: progressOf(%#x) = %d, want %d", tt.name, tt.mask, got, tt.want)
		}
	}
}

// TestWriterRecheckedAfterClose: a writer check that still finds a writer
// (the kernel queues IN_CLOSE_WRITE before it drops the file's count of
// writers) is made again soon, so the path does not wait as Writing for an
// event that never comes. Here the writer is a descriptor opened through a
// hard link outside the tree, so neither its open nor its close is an event
// of the tree; a chmod is the one event, and its check finds the writer.
// Before the recheck, f.txt was never Complete again.
func TestWriterRecheckedAfterClose(t *testing.T) {
	root := evalDir(t, t.TempDir())
	outside := t.TempDir()
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	be := notifyBackend()
	be.clock = fc
	w, err := newWatcher([]string{root}, Options{}, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	file := filepath.Join(root, "f.txt")
	is := func(p Progress) func(Event) bool {
		return func(ev Event) bool { return ev.Path == file && !ev.Rescan && ev.Progress == p }
	}
	writeFile(t, file, "one")
	waitFor(t, w, "f.txt Complete", is(Complete))
	for quiet := time.After(200 * time.Millisecond); ; { // the write's other events, handed out in any order
		select {
		case <-w.Events():
			continue
		case <-quiet:
		}
		break
	}

	link := filepath.Join(outside, "link")
	if err := os.Link(file, link); err != nil {
		t.Fatal(err)
	}
	writer, err := os.OpenFile(link, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, w, "f.txt Writing", is(Writing))
	if err := writer.Close(); err != nil {
		t.Fatal(err)
	}
	// Step the clock until a recheck hands f.txt out Complete.
	end := time.Now().Add(deadline)
	for {
		select {
		case ev := <-w.Events():
			if is(Complete)(ev) {
				return
			}
		case err := <-w.Errors():
			t.Fatal(err)
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(end) {
				t.Fatal("f.txt never Complete after its last writer closed")
			}
			fc.Step(recheckDelays[len(recheckDelays)-1])
		}
	}
}
