// Package testtree is test support: a directory tree written from, and described as, a map
// of names to contents, so a test states a tree in one literal and compares trees as maps.
package testtree

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Write creates entries under dir: "name/" is a directory, "name@target"
// a symlink, anything else a file with the given content.
func Write(t testing.TB, dir string, entries map[string]string) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		content := entries[name]
		switch {
		case strings.HasSuffix(name, "/"):
			must(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
		case strings.Contains(name, "@"):
			n, target, _ := strings.Cut(name, "@")
			must(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, n)), 0o755))
			must(t, os.Symlink(target, filepath.Join(dir, n)))
		default:
			must(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
			must(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
		}
	}
}

// Read describes every entry under dir: "dir 755", "file 644 <content>",
// "link <target>".
func Read(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		case fi.IsDir():
			out[rel] = "dir " + fi.Mode().Perm().String()
		default:
			b, _ := os.ReadFile(p)
			out[rel] = "file " + fi.Mode().Perm().String() + " " + string(b)
		}
		return nil
	})
	must(t, err)
	return out
}

// Diff reports every entry where got (described by what) differs from want, as Read describes
// them.
func Diff(t testing.TB, what string, got, want map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: %q missing, want %q", what, k, want[k])
		} else if g != want[k] {
			t.Errorf("%s: %q is %q, want %q", what, k, g, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: %q is %q, want it absent", what, k, got[k])
		}
	}
}
