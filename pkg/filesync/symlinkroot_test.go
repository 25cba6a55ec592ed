package filesync

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testwait"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestSymlinkedLocalRoots syncs mappings whose LOCAL is a symlink, as in
// ./current -> releases/v2 and ./config.yaml -> conf/v2.yaml: the directory
// must sync and rescan like the directory it points to (not fail on an
// entry with an empty name, forever), and the file must arrive as its
// content, not as a link that dangles in the container. Changes name paths
// under the resolved roots, as the watcher reports them once the command
// resolved the roots.
func TestSymlinkedLocalRoots(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			writeTree(t, base, map[string]string{
				"releases/v2/index.html":   "v2",
				"releases/v2/css/site.css": "body{}",
				"conf/v2.yaml":             "a: 1\n",
				"current@releases/v2":      "",
				"config.yaml@conf/v2.yaml": "",
			})
			realDir, realFile := evalPath(t, filepath.Join(base, "releases", "v2")), evalPath(t, filepath.Join(base, "conf", "v2.yaml"))
			sandbox := t.TempDir()
			ex.Sandbox = func(Target) string { return sandbox }
			fc, rec := clocktesting.NewFakeClock(time.Unix(1000, 0)), newRecorder()
			e := New(ex, Config{Mappings: []planner.Mapping{
				{Local: planner.LocalPath(filepath.Join(base, "current")), Remote: "/app"},
				{Local: planner.LocalPath(filepath.Join(base, "config.yaml")), Remote: "/etc/app/config.yaml"},
			}}, WithClock(fc), WithReporter(rec))
			e.AddTarget(podTarget("web-1"))
			changes, done := make(chan coalesce.Change), make(chan error, 1)
			ctx, cancel := context.WithCancel(context.Background())
			go func() { done <- e.Run(ctx, changes) }()
			var stop sync.Once
			t.Cleanup(func() { stop.Do(func() { cancel(); <-done }) })

			if ev := wait[InitialSync](t, rec); ev.Err != nil {
				t.Fatalf("initial sync: %v", ev.Err)
			}
			remoteFile := filepath.Join(sandbox, "etc", "app", "config.yaml")
			check := func(content string) {
				t.Helper()
				assertSameTree(t, realDir, filepath.Join(sandbox, "app"))
				if got := readTree(t, filepath.Dir(remoteFile))["config.yaml"]; got != "file -rw-r--r-- "+content {
					t.Errorf("remote config.yaml = %q, want the content %q", got, content)
				}
			}
			check("a: 1\n")

			// An edit through each link, announced the way the watcher does
			// for the resolved roots: a Rescan of the directory, a hint for
			// the file.
			writeTree(t, realDir, map[string]string{"index.html": "v2.1", "new.js": "js"})
			must(t, os.WriteFile(realFile, []byte("a: 2\n"), 0o644))
			for _, c := range []struct {
				change  coalesce.Change
				changed int
			}{
				{coalesce.Change{Root: realDir, Path: realDir, Rescan: true}, 2},
				{coalesce.Change{Root: realFile, Path: realFile}, 1},
			} {
				changes <- c.change
				testwait.Waiters(t, fc, 1)
				fc.Step(coalesce.DefaultQuiet)
				if b := wait[Batch](t, rec); b.Failed != 0 || b.Changed != c.changed {
					t.Errorf("batch for %+v = %+v, want %d sent", c.change, b, c.changed)
				}
			}
			check("a: 2\n")
			stop.Do(func() { cancel(); <-done })
			if errs := rec.errors(); len(errs) != 0 {
				t.Errorf("errors: %v", errs)
			}
		})
	}
}

func evalPath(t *testing.T, p string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(p)
	must(t, err)
	return real
}

func TestNewMappingResolvesSymlinks(t *testing.T) {
	base := t.TempDir()
	writeTree(t, base, map[string]string{"real/f": "x", "dir@real": "", "file@real/f": "", "dangling@nowhere": ""})
	real := evalPath(t, filepath.Join(base, "real"))
	for _, tt := range []struct {
		local, root string
		file        bool
	}{
		{"dir", real, false},
		{"file", filepath.Join(real, "f"), true},
		{"real", real, false},
		{"missing", filepath.Join(base, "missing"), false}, // the initial sync reports it
		{"dangling", filepath.Join(base, "dangling"), false},
	} {
		t.Run(tt.local, func(t *testing.T) {
			m := testMapping(t, filepath.Join(base, tt.local), "/app", nil)
			if m.Root != tt.root || m.File != tt.file {
				t.Errorf("root %q, file %v; want %q, %v", m.Root, m.File, tt.root, tt.file)
			}
		})
	}
}
