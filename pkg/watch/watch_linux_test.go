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
// no watch left, the root falls back to polling and gets a Rescan.
func TestNewDirectoryOutOfWatches(t *testing.T) {
	root := evalDir(t, t.TempDir())
	newDir := filepath.Join(root, "new")
	mkdirAll(t, newDir)
	fn := &fakeNotify{probe: func(dir string) error {
		if dir == newDir {
			return syscall.ENOSPC
		}
		return nil
	}}
	clk := clocktesting.NewFakeClock(time.Now())
	w := newFakeWatcher(t, []string{root}, Options{}, fn.backend(clk))
	fn.channels()[filepath.Join(root, "...")] <- fakeEvent{
		path: newDir,
		ev:   notify.Create,
		sys:  &unix.InotifyEvent{Mask: unix.IN_CREATE | unix.IN_ISDIR},
	}

	checkFallbackError(t, receiveError(t, w), root)
	waitRescan(t, w, root)
	if got := fn.channels(); len(got) != 0 {
		t.Errorf("notify still watches %v after the fallback", got)
	}
	writeFile(t, filepath.Join(root, "after"), "x")
	stepUntil(t, clk, w, filepath.Join(root, "after"))
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
	ch := fn.channels()[filepath.Join(root, "...")]
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
	ch := fn.channels()[filepath.Join(root, "...")]
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

const usernsEnv = "LIVESYNC_WATCH_TEST_IN_USERNS"

// TestOutOfInotifyWatchesForReal runs itself again in a new user namespace
// whose inotify watch limit it can lower, and checks that real notify
// running out of watches, which notify doesn't report, is detected both
// when the root is set up and when new directories appear.
func TestOutOfInotifyWatchesForReal(t *testing.T) {
	if os.Getenv(usernsEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestOutOfInotifyWatchesForReal$", "-test.v", "-test.count=1")
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
		return
	}

	const limit = 16
	if err := os.WriteFile("/proc/sys/user/max_inotify_watches", []byte(fmt.Sprint(limit)), 0); err != nil {
		t.Skipf("can't lower the inotify watch limit: %v", err)
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
		waitPath(t, w, filepath.Join(root, "7", "f"))
		w.Close() // give the watches back
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
		waitPath(t, w, filepath.Join(root, "3", "f"))
	})
}
