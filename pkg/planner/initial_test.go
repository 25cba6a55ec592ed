package planner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// The listing tells a directory mapping whose remote root is a file, and
// Initial refuses a root that is a directory on one side only.
func TestPlanInitialRootConflict(t *testing.T) {
	ex := busybox(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"app": "a file", "data/pg/base": "precious"})
	seed := filepath.Join(t.TempDir(), "seed.sql")
	must(t, os.WriteFile(seed, []byte("insert"), 0o644))
	for _, m := range []*Resolved{
		testMapping(t, t.TempDir(), filepath.Join(dir, "app"), nil),
		testMapping(t, seed, filepath.Join(dir, "data"), nil),
	} {
		l, err := ListRemote(context.Background(), ex, testTarget, m, false)
		must(t, err)
		if l.notDir != !m.File {
			t.Errorf("%s: notDir = %v", m.Mapping, l.notDir)
		}
		local, _, err := LocalTree(m)
		must(t, err)
		if _, _, err := Initial(m, local, l, InitialUpload); !errors.Is(err, remote.ErrTypeConflict) {
			t.Errorf("%s: Initial: %v, want remote.ErrTypeConflict", m.Mapping, err)
		}
	}
}

func TestPlanInitial(t *testing.T) {
	old := time.Unix(1_000_000, 0)
	tests := []struct {
		name        string
		mode        InitialMode
		hashes      bool
		wantCopies  []string
		wantDeletes []string
	}{
		// The image has the same sources with other mtimes: hashes save the copy.
		{name: "upload with hashes", mode: InitialUpload, hashes: true,
			wantCopies: []string{"changed", "dir2", "dir2/f", "new", "typechange", "typechange/x"}, wantDeletes: []string{"typechange"}},
		{name: "upload without hashes falls back to size and mtime", mode: InitialUpload,
			wantCopies:  []string{"changed", "dir2", "dir2/f", "new", "same-content", "typechange", "typechange/x"},
			wantDeletes: []string{"typechange"}},
		{name: "mirror deletes what is neither local nor ignored", mode: InitialMirror, hashes: true,
			wantCopies:  []string{"changed", "dir2", "dir2/f", "new", "typechange", "typechange/x"},
			wantDeletes: []string{"remote-only", "remote-only-dir", "typechange"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local, remote := t.TempDir(), t.TempDir()
			writeTree(t, local, map[string]string{
				"same-content": "s", "same-mtime": "m", "changed": "new content", "new": "n",
				"dir/": "", "dir2/f": "f", "typechange/x": "x", "link@same-content": "",
			})
			writeTree(t, remote, map[string]string{
				"same-content": "s", "same-mtime": "m", "changed": "old content", "dir/": "",
				"typechange": "was a file", "link@same-content": "",
				"remote-only": "r", "remote-only-dir/a": "a", "cache.swp": "ignored",
			})
			must(t, os.Chtimes(filepath.Join(remote, "same-content"), old, old))
			must(t, os.Chtimes(filepath.Join(remote, "changed"), old, old))
			for _, n := range []string{"same-mtime"} {
				fi, err := os.Stat(filepath.Join(local, n))
				must(t, err)
				must(t, os.Chtimes(filepath.Join(remote, n), fi.ModTime(), fi.ModTime()))
			}
			m := testMapping(t, local, remote, globMatcher{"*.swp"})
			var ex Executor = busybox(t)
			if !tt.hashes {
				ex = busybox(t, "sha256sum", "md5sum")
			}
			l, err := ListRemote(context.Background(), ex, testTarget, m, false)
			must(t, err)
			tree, warns, err := LocalTree(m)
			must(t, err)
			if len(warns) > 0 {
				t.Fatal(warns)
			}
			p, idx, err := Initial(m, tree, l, tt.mode)
			must(t, err)
			assertPlan(t, p, tt.wantCopies, tt.wantDeletes)
			if e, ok := idx.Get("same-content"); tt.hashes && (!ok || e.Sum == nil) {
				t.Errorf("same-content not indexed with its hash: %+v", e)
			}

			// Applying it converges, and the index then matches the local tree.
			res, err := apply(context.Background(), ex, testTarget, m, p, tarstream.Options{})
			must(t, err)
			idx.Apply(p, res.Result)
			if tt.mode == InitialMirror {
				must(t, os.Remove(filepath.Join(remote, "cache.swp")))
				assertSameTree(t, local, remote)
			}
			again, err := Changes(m, idx, nil, true)
			must(t, err)
			if !again.Empty() {
				t.Errorf("index does not match the local tree: %+v", again)
			}
		})
	}
}

func TestParseInitialMode(t *testing.T) {
	for _, s := range []string{"upload", "mirror", "none"} {
		if m, err := ParseInitialMode(s); err != nil || string(m) != s {
			t.Errorf("ParseInitialMode(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := ParseInitialMode("full"); err == nil {
		t.Error("ParseInitialMode(full) succeeded")
	}
}
