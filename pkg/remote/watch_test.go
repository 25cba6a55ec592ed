package remote

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// watchRecorder collects what Watch reports, for a test to wait on.
type watchRecorder struct {
	mu     sync.Mutex
	ready  chan struct{}
	events []WatchEvent
	got    chan struct{} // a token per event
}

func newWatchRecorder() *watchRecorder {
	return &watchRecorder{ready: make(chan struct{}), got: make(chan struct{}, 1024)}
}

func (w *watchRecorder) event(ev WatchEvent) {
	w.mu.Lock()
	w.events = append(w.events, ev)
	w.mu.Unlock()
	w.got <- struct{}{}
}

// waitFor waits until an event for name came (bounded, so a broken watch
// fails the test rather than hanging it).
func (w *watchRecorder) waitFor(t *testing.T, name string, isDir bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		w.mu.Lock()
		for _, ev := range w.events {
			if ev.Name == name && ev.IsDir == isDir {
				w.mu.Unlock()
				return
			}
		}
		seen := append([]WatchEvent(nil), w.events...)
		w.mu.Unlock()
		select {
		case <-w.got:
		case <-deadline:
			t.Fatalf("no event for %q (dir %v); got %v", name, isDir, seen)
		}
	}
}

// TestWatch runs watch.sh with the host's inotifywait (inotify-tools, which
// hack/deps.sh installs): events name the path under the remote directory,
// start points that don't exist yet widen the watch to the whole directory,
// and a name with a newline comes through whole.
func TestWatch(t *testing.T) {
	if _, err := exec.LookPath("inotifywait"); err != nil {
		t.Fatal("needs inotifywait (apt-get install inotify-tools; hack/deps.sh installs it)")
	}
	root := filepath.Join(t.TempDir(), "app")
	writeTree(t, root, map[string]string{"src/main.go": "x"})
	w := newWatchRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, &localExecutor{}, testTarget, root, []string{"./gen", "./src"}, func() { close(w.ready) }, w.event)
	}()
	select {
	case <-w.ready:
	case err := <-done:
		t.Fatalf("Watch ended before its watches were in place: %v", err)
	}
	must(t, os.MkdirAll(filepath.Join(root, "gen/deep"), 0o755)) // ./gen did not exist: "." is watched
	w.waitFor(t, "./gen", true)
	must(t, os.WriteFile(filepath.Join(root, "src/main.go"), []byte("y"), 0o644))
	w.waitFor(t, "./src/main.go", false)
	must(t, os.WriteFile(filepath.Join(root, "odd\nname"), []byte("y"), 0o644))
	w.waitFor(t, "./odd\nname", false)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch after its context ended: %v", err)
	}
}

// TestWatchWithoutInotifywait: an image without inotifywait (busybox has
// none) says so with ErrNoInotifywait, and Watch never calls ready.
func TestWatchWithoutInotifywait(t *testing.T) {
	root := t.TempDir()
	err := Watch(context.Background(), busybox(t), testTarget, root, []string{"."}, func() { t.Error("ready without inotifywait") }, func(WatchEvent) {})
	if !errors.Is(err, ErrNoInotifywait) {
		t.Fatalf("want ErrNoInotifywait, got %v", err)
	}
}

// TestWatchOutput: records are cut at NUL whatever the writes' boundaries,
// and a record that is not "EVENTS ./name" is dropped.
func TestWatchOutput(t *testing.T) {
	var got []WatchEvent
	w := &watchOutput{event: func(ev WatchEvent) { got = append(got, ev) }}
	for _, p := range []string{"CLOSE_WRITE,CLOSE ./a", "\x00CREATE,ISDIR ./b\x00garbage\x00MOVED_TO ./c d", "\x00"} {
		_, _ = w.Write([]byte(p))
	}
	want := []WatchEvent{{Name: "./a"}, {Name: "./b", IsDir: true}, {Name: "./c d"}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// TestWatchEndsAtStdinEOF: the client closing the exec's stdin (its end of
// the connection) ends inotifywait in the container, which otherwise would
// hold its watches until its next event. The exec returns only once every
// process that holds its stdout, inotifywait among them, is gone.
func TestWatchEndsAtStdinEOF(t *testing.T) {
	if _, err := exec.LookPath("inotifywait"); err != nil {
		t.Fatal("needs inotifywait (apt-get install inotify-tools; hack/deps.sh installs it)")
	}
	root := t.TempDir()
	stdin, w := io.Pipe()
	errs := &watchStderr{tail: TailBuffer{Max: 4 << 10}}
	ready := make(chan struct{})
	errs.ready = func() { close(ready) }
	done := make(chan error, 1)
	go func() {
		done <- (&localExecutor{}).Exec(context.Background(), testTarget, WatchArgv(root, []string{"."}), stdin, io.Discard, errs)
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("watch.sh ended before its watches were in place: %v\n%s", err, errs.String())
	}
	must(t, w.Close())
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("watch.sh still runs 30 s after its stdin ended")
	}
}
