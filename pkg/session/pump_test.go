package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/fakewatch"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/watch"
)

// receiveChange returns the next change on ch, failing the test after 10s.
func receiveChange(t *testing.T, ch <-chan coalesce.Change) (coalesce.Change, bool) {
	t.Helper()
	select {
	case c, ok := <-ch:
		return c, ok
	case <-time.After(10 * time.Second):
		t.Fatal("no change")
		return coalesce.Change{}, false
	}
}

// TestPump: events become changes; an edit of .livesyncignore reloads the root's matcher and
// refreshes the root's watches instead; watcher errors are warnings; a closed watcher closes
// the changes.
func TestPump(t *testing.T) {
	dir, file := t.TempDir(), filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, filepath.Join(dir, ".livesyncignore"), "*.log\n")
	writeFile(t, file, "a: 1\n")
	cfg := Config{Sync: filesync.Config{Mappings: []planner.Mapping{
		{Local: planner.LocalPath(dir), Remote: "/app"},
		{Local: planner.LocalPath(file), Remote: "/etc/app/config.yaml"},
	}}}
	roots, matchers, err := newMatchers(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if matchers[1] != nil {
		t.Error("a single-file root got a matcher")
	}
	w, j := fakewatch.New(), newJournal()
	out := make(chan coalesce.Change)
	go pump(context.Background(), w, roots, matchers, out, fakeReporter{j})

	for _, ev := range []watch.Event{
		{Root: dir, Path: filepath.Join(dir, "a.txt")},
		{Root: dir, Path: dir, Rescan: true},
		{Root: file, Path: file},
	} {
		if !w.Send(ev) {
			t.Fatal("pump does not read events")
		}
		if c, _ := receiveChange(t, out); c != (coalesce.Change{Root: ev.Root, Path: ev.Path, Rescan: ev.Rescan}) {
			t.Errorf("event %+v became change %+v", ev, c)
		}
	}

	skip := skipper(roots, matchers)
	if skip(dir, "build.txt", false) {
		t.Fatal("build.txt skipped before .livesyncignore names it")
	}
	writeFile(t, filepath.Join(dir, ".livesyncignore"), "*.log\nbuild.txt\n")
	w.Send(watch.Event{Root: dir, Path: filepath.Join(dir, ".livesyncignore")})
	w.SendError(errors.New("watching: out of inotify watches"))
	j.waitFor(t, "warn watching: out of inotify watches")
	if got := w.Refreshed(); len(got) != 1 || got[0] != dir {
		t.Errorf("refreshed roots %q, want [%s]", got, dir)
	}
	if !skip(dir, "build.txt", false) {
		t.Error("the edited .livesyncignore was not reloaded")
	}

	// A .livesyncignore that cannot be read (here a directory, unreadable even to root) is a
	// warning; the session goes on.
	ignoreFile := filepath.Join(dir, ".livesyncignore")
	if err := os.Remove(ignoreFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ignoreFile, 0o755); err != nil {
		t.Fatal(err)
	}
	w.Send(watch.Event{Root: dir, Path: ignoreFile})
	if l := j.waitFor(t, "warn "); !strings.Contains(l, ".livesyncignore") {
		t.Errorf("warning %q does not name the file", l)
	}

	_ = w.Close()
	if _, ok := receiveChange(t, out); ok {
		t.Error("changes stay open after the watcher closed")
	}
}

func TestSkipper(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".livesyncignore"), "node_modules/\n")
	cfg := Config{Sync: filesync.Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(dir), Remote: "/app"}}}}
	roots, matchers, err := newMatchers(cfg)
	if err != nil {
		t.Fatal(err)
	}
	skip := skipper(roots, matchers)
	for _, tt := range []struct {
		root, rel string
		isDir     bool
		want      bool
	}{
		{dir, "node_modules", true, true},
		{dir, "src/node_modules", true, true},
		{dir, ".git", true, true},
		{dir, "src", true, false},
		{dir, "", true, false}, // the root itself is never skipped
		{"/elsewhere", "node_modules", true, false},
	} {
		if got := skip(tt.root, tt.rel, tt.isDir); got != tt.want {
			t.Errorf("skip(%q, %q) = %v, want %v", tt.root, tt.rel, got, tt.want)
		}
	}
}
