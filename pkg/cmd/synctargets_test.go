package cmd

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/session"
	"github.com/livesync-dev/kubectl-livesync/pkg/watch"
)

// TestSyncResolvesSymlinkedLocal: a LOCAL that is a symlink is resolved in
// Validate, so the roots the watcher reports and the roots the engine plans
// are one path, and an edit of the linked file is seen through the watch of
// the real file's directory.
func TestSyncResolvesSymlinkedLocal(t *testing.T) {
	base := t.TempDir()
	realDir, realFile := filepath.Join(base, "releases", "v2"), filepath.Join(base, "conf", "v2.yaml")
	for _, d := range []string{realDir, filepath.Dir(realFile)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(realFile, []byte("a: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("releases", "v2"), filepath.Join(base, "current")); err != nil {
		t.Skip("no symlinks:", err)
	}
	if err := os.Symlink(filepath.Join("conf", "v2.yaml"), filepath.Join(base, "config.yaml")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(base)
	o := &SyncOptions{
		args:    []string{"deploy/web", "./current:/app", "config.yaml:/etc/app/config.yaml"},
		initial: string(planner.InitialUpload), output: "text", transport: "stream",
		cfg: session.Config{Helper: "auto", HelperImage: defaultHelperImage, Sync: filesync.Config{Quiet: coalesce.DefaultQuiet, Cap: coalesce.DefaultCap, Parallelism: 1,
			ExecTimeout: filesync.DefaultExecTimeout, OnSyncTimeout: filesync.DefaultOnSyncTimeout}},
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	var roots []string
	for i, want := range []string{realDir, realFile} {
		want, err := filepath.EvalSymlinks(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(o.cfg.Sync.Mappings[i].Local); got != want {
			t.Errorf("mapping %d: LOCAL %q, want the resolved %q", i, got, want)
		}
		roots = append(roots, want)
	}

	w, err := watch.New(roots, watch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	if err := os.WriteFile(filepath.Join(realDir, "index.html"), []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(realFile, []byte("a: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{roots[0]: filepath.Join(roots[0], "index.html"), roots[1]: roots[1]}
	timeout := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case ev := <-w.Events():
			if !slices.Contains(roots, ev.Root) {
				t.Fatalf("event %+v for a root the engine does not know; roots %v", ev, roots)
			}
			if want[ev.Root] == ev.Path {
				delete(want, ev.Root)
			}
		case err := <-w.Errors():
			t.Fatalf("watcher: %v", err)
		case <-timeout:
			t.Fatalf("no events for %v", want)
		}
	}
}

func TestSyncEmptyContainerRefused(t *testing.T) {
	_, _, err := execute(t, "deploy/web", t.TempDir()+":/app", "-c", "app", "-c", "")
	if want := `-c "": name a container`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v, want %q", err, want)
	}
}
