package filesync

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

func TestListRemote(t *testing.T) {
	variants := map[string]struct {
		ex  func(t *testing.T) Executor
		alg string
	}{
		"busybox":                   {func(t *testing.T) Executor { return busybox(t) }, "sha256sum"},
		"busybox without sha256sum": {func(t *testing.T) Executor { return busybox(t, "sha256sum") }, "md5sum"},
		"busybox without hashes":    {func(t *testing.T) Executor { return busybox(t, "sha256sum", "md5sum") }, ""},
		"gnu":                       {func(t *testing.T) Executor { return &localExecutor{} }, "sha256sum"},
	}
	for name, v := range variants {
		t.Run(name, func(t *testing.T) {
			remote := t.TempDir()
			writeTree(t, remote, weirdNames)
			writeTree(t, remote, map[string]string{"bin/run": "#!/bin/sh", "empty/": "", "link@bin/run": "", "nl@new\nline\n": ""})
			must(t, os.Chmod(filepath.Join(remote, "bin/run"), 0o751))
			m := testMapping(t, t.TempDir(), remote, nil)
			l, err := listRemote(context.Background(), v.ex(t), testTarget, m, false)
			must(t, err)
			if !l.exists || l.alg != v.alg {
				t.Fatalf("exists=%v alg=%q, want true %q", l.exists, l.alg, v.alg)
			}
			want := readTree(t, remote)
			if len(l.entries) != len(want) {
				t.Errorf("listed %d entries, want %d", len(l.entries), len(want))
			}
			for rel := range want {
				e, ok := l.entries[filepath.ToSlash(rel)]
				if !ok {
					t.Errorf("%q not listed", rel)
					continue
				}
				fi, err := os.Lstat(filepath.Join(remote, rel))
				must(t, err)
				le, _ := entryOf(fi)
				if e.Type != le.Type || e.MTime != fi.ModTime().Unix() {
					t.Errorf("%q: listed %+v, have %+v", rel, e, le)
				}
				switch le.Type {
				case TypeFile:
					b, _ := os.ReadFile(filepath.Join(remote, rel))
					if e.Size != fi.Size() || e.Mode != le.Mode || string(e.Sum) != string(digest(v.alg, b)) {
						t.Errorf("%q: listed %+v (sum %x), want size %d mode %v sum %x", rel, e, e.Sum, fi.Size(), le.Mode, digest(v.alg, b))
					}
				case TypeSymlink:
					target, _ := os.Readlink(filepath.Join(remote, rel))
					if e.Link != target {
						t.Errorf("%q: link %q, want %q", rel, e.Link, target)
					}
				}
			}
		})
	}
}

func digest(alg string, b []byte) []byte {
	switch alg {
	case "sha256sum":
		s := sha256.Sum256(b)
		return s[:]
	case "md5sum":
		s := md5.Sum(b)
		return s[:]
	}
	return nil
}

func TestListRemoteMissingAndFile(t *testing.T) {
	ex := busybox(t)
	dir := t.TempDir()
	m := testMapping(t, t.TempDir(), filepath.Join(dir, "nope"), nil)
	l, err := listRemote(context.Background(), ex, testTarget, m, false)
	must(t, err)
	if l.exists || len(l.entries) != 0 {
		t.Errorf("missing root listed as %+v", l)
	}

	local := filepath.Join(t.TempDir(), "config.dev.yaml")
	must(t, os.WriteFile(local, []byte("a: 1"), 0o644))
	writeTree(t, dir, map[string]string{"config.yaml": "a: 1", "other": "not listed"})
	m = testMapping(t, local, filepath.Join(dir, "config.yaml"), nil)
	l, err = listRemote(context.Background(), ex, testTarget, m, false)
	must(t, err)
	if e, ok := l.entries[""]; len(l.entries) != 1 || !ok || e.Size != 4 {
		t.Errorf("file mapping listed %+v", l.entries)
	}
}

func TestParseListingRejectsUnsafeNames(t *testing.T) {
	m := testMapping(t, t.TempDir(), "/app", nil)
	out := "LS2\x00\x00\x00dir\x00C\x00./ok\x00./a/../../etc\x00/abs\x00S\x00" +
		"81a4 1 0 ./ok\n81a4 1 0 ./a/../../etc\n81a4 1 0 /abs\n\x00L\x00H\x00\x00END\x00"
	rl, err := remote.ParseListing([]byte(out))
	must(t, err)
	l := listingOf(rl, m)
	if len(l.entries) != 1 {
		t.Errorf("entries = %v, want only ok", l.entries)
	}
	if _, err := remote.ParseListing([]byte("LS2\x00\x00\x00dir\x00C\x00./ok\x00S\x00")); err == nil {
		t.Error("truncated listing parsed")
	}
}

// A stat listing says each mtime to the nanosecond, whatever the names
// hold; a listing of names hashes only those regular files, in execs
// bounded by remote.MaxArgBytes.
func TestListRemoteNanosAndNames(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, weirdNames)
			writeTree(t, dir, map[string]string{"sub/": "", "link@with space": ""})
			m := testMapping(t, t.TempDir(), dir, nil)
			l, err := listRemote(context.Background(), ex, testTarget, m, true)
			must(t, err)
			var files []string
			for rel, e := range l.entries {
				fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(rel)))
				must(t, err)
				if e.MTimeNs != fi.ModTime().UnixNano() || e.MTime != fi.ModTime().Unix() {
					t.Errorf("%q: mtime %d (%d ns), want %d ns", rel, e.MTime, e.MTimeNs, fi.ModTime().UnixNano())
				}
				if e.Type == TypeFile {
					files = append(files, rel)
				}
			}
			if len(l.entries) != len(readTree(t, dir)) {
				t.Errorf("listed %d entries, want %d", len(l.entries), len(readTree(t, dir)))
			}
			// Every file, a directory, a link and a missing name, each asked
			// for many times over so that the names take several execs.
			var rels []string
			for len(rels)*40 < 3*remote.MaxArgBytes {
				rels = append(rels, files...)
				rels = append(rels, "sub", "link", "gone")
			}
			n := 0
			counting := &localExecutor{Runner: ex.Runner, Fail: func(_ Target, argv []string) error {
				if isList(argv) {
					n++
				}
				return nil
			}}
			must(t, hashUnsure(context.Background(), counting, testTarget, m, l, rels))
			if n < 3 {
				t.Errorf("%d execs for %d names", n, len(rels))
			}
			for rel, e := range l.entries {
				if e.Type != TypeFile {
					if e.Sum != nil {
						t.Errorf("%q hashed", rel)
					}
					continue
				}
				b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
				must(t, err)
				if sum := sha256.Sum256(b); string(e.Sum) != string(sum[:]) {
					t.Errorf("%q: sum %x, want %x", rel, e.Sum, sum)
				}
			}
		})
	}
}
