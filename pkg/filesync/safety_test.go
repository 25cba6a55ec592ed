package filesync

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// onceSync runs the initial sync of cfg into testTarget as --once does,
// without retries, and returns its outcome and everything reported.
func onceSync(t *testing.T, ex Executor, cfg Config) (InitialSync, *recorder) {
	t.Helper()
	rec := newRecorder()
	e := New(ex, cfg, WithReporter(rec), WithRetry(remote.RetryPolicy{Tries: 1}))
	e.AddTarget(testTarget)
	_, err := e.Once(context.Background())
	must(t, err)
	for _, ev := range rec.all {
		if is, ok := ev.(InitialSync); ok {
			return is, rec
		}
	}
	t.Fatal("no InitialSync reported")
	return InitialSync{}, nil
}

// assertOneLine fails unless err is a one-line message holding every want.
func assertOneLine(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not say %q", msg, w)
		}
	}
}

// Mirror deletes what is neither local nor ignored, file by file: a
// remote-only directory that still holds ignored entries stays, with them.
func TestMirrorKeepsIgnoredEntries(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			local, remote := t.TempDir(), t.TempDir()
			writeTree(t, local, map[string]string{"src/a.go": "a", "keep.log": "local log"})
			writeTree(t, remote, map[string]string{
				"src/a.go": "a", "src/old.go": "old",
				"logs/app.log": "ignored", "logs/old.txt": "not ignored", "logs/sub/x.log": "ignored",
				"logs/sub/y.txt": "not ignored", "logs/deep/z/z.txt": "not ignored", "logs/empty/": "",
				"tmp/anything": "under an ignored directory", "gone/a": "a", "gone/b/c": "c", "gone-empty/": "",
				"with space/new\nline/x.log": "ignored", "with space/-dash": "not ignored",
			})
			_, rec := onceSync(t, ex, Config{
				Mappings: []planner.Mapping{{Local: planner.LocalPath(local), Remote: planner.RemotePath(remote)}},
				Matchers: []planner.Matcher{globMatcher{"*.log", "tmp"}}, Initial: planner.InitialMirror,
			})
			if errs := rec.errors(); len(errs) > 0 {
				t.Fatal(errs)
			}
			got := readTree(t, remote)
			want := map[string]string{
				"src": "dir -rwxr-xr-x", "src/a.go": "file -rw-r--r-- a",
				"logs": "dir -rwxr-xr-x", "logs/app.log": "file -rw-r--r-- ignored",
				"logs/sub": "dir -rwxr-xr-x", "logs/sub/x.log": "file -rw-r--r-- ignored",
				"tmp": "dir -rwxr-xr-x", "tmp/anything": "file -rw-r--r-- under an ignored directory",
				"with space": "dir -rwxr-xr-x", "with space/new\nline": "dir -rwxr-xr-x",
				"with space/new\nline/x.log": "file -rw-r--r-- ignored",
			}
			diffTrees(t, "remote", got, want)
		})
	}
}

// A file mapped onto a directory in the container (./seed.sql:/data, a
// volume perhaps), or a directory onto a file, is refused in one line and
// leaves the container alone: no `rm -rf` at a mapping's root.
func TestRootTypeConflict(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			seed := filepath.Join(t.TempDir(), "seed.sql")
			must(t, os.WriteFile(seed, []byte("insert"), 0o644))
			src := t.TempDir()
			writeTree(t, src, map[string]string{"main.go": "package main"})
			writeTree(t, dir, map[string]string{"data/pg/base": "precious", "app": "a file"})
			before := readTree(t, dir)

			for _, tc := range []struct {
				name string
				m    planner.Mapping
				want []string
			}{
				{"file onto a directory", planner.Mapping{Local: planner.LocalPath(seed), Remote: planner.RemotePath(filepath.Join(dir, "data"))},
					[]string{"is a directory", "seed.sql:" + filepath.Join(dir, "data", "seed.sql")}},
				{"directory onto a file", planner.Mapping{Local: planner.LocalPath(src), Remote: planner.RemotePath(filepath.Join(dir, "app"))},
					[]string{"is not a directory"}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					for _, mode := range []planner.InitialMode{planner.InitialUpload, planner.InitialMirror} {
						is, _ := onceSync(t, ex, Config{Mappings: []planner.Mapping{tc.m}, Initial: mode})
						assertOneLine(t, is.Err, tc.want...)
						if !errors.Is(is.Err, remote.ErrTypeConflict) || remote.IsTransient(is.Err) {
							t.Errorf("%s: %v: want a non-transient remote.ErrTypeConflict", mode, is.Err)
						}
						if after := readTree(t, dir); !maps.Equal(before, after) {
							t.Fatalf("%s: the container changed: %q, was %q", mode, after, before)
						}
					}
					// Without a listing (--initial=none, then a batch) the
					// apply script refuses by itself.
					m := testMapping(t, string(tc.m.Local), string(tc.m.Remote), nil)
					p, err := planner.Changes(m, planner.NewIndex(), nil, true)
					must(t, err)
					_, err = apply(context.Background(), ex, testTarget, m, &sending{Plan: p}, tarstream.Options{})
					assertOneLine(t, err, tc.want...)
					if !errors.Is(err, remote.ErrTypeConflict) || remote.IsTransient(err) {
						t.Errorf("apply: %v: want a non-transient remote.ErrTypeConflict", err)
					}
					if after := readTree(t, dir); !maps.Equal(before, after) {
						t.Fatalf("apply: the container changed: %q, was %q", after, before)
					}
				})
			}
		})
	}
}

// A mapping's local root that changes type (a file mapping's file replaced
// by a directory) is refused by the planner instead of deleting the remote
// file and sending the directory's children under the file's name.
func TestPlanRootTypeChange(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, "config.yaml")
	must(t, os.WriteFile(local, []byte("a: 1"), 0o644))
	m := testMapping(t, local, "/etc/app/config.yaml", nil)
	idx := syncedIndex(t, m)
	must(t, os.Remove(local))
	writeTree(t, dir, map[string]string{"config.yaml/x": "x"})
	p, err := planner.Changes(m, idx, []string{""}, false)
	if err == nil {
		t.Fatalf("planned %+v", p)
	}
	assertOneLine(t, err, "is now a directory")
	if !errors.Is(err, remote.ErrTypeConflict) || remote.IsTransient(err) {
		t.Errorf("%v: want a non-transient remote.ErrTypeConflict", err)
	}
}
