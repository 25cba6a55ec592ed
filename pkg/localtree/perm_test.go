package localtree

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestPerm: the modes sent for a file, a read-only file and a directory are
// the local ones on Unix and 0644, 0444, 0755 on Windows, never writable by
// group or others where the local system has no say (wine found Windows'
// 0666 and 0777 arriving in the container as they were).
func TestPerm(t *testing.T) {
	dir := t.TempDir()
	for name, perm := range map[string]fs.FileMode{"rw": 0o644, "ro": 0o444, "x": 0o755} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), perm); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "d"), 0o750); err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{"rw": 0o644, "ro": 0o444, "x": 0o755, "d": 0o750}
	if runtime.GOOS == "windows" {
		want = map[string]fs.FileMode{"rw": 0o644, "ro": 0o444, "x": 0o644, "d": 0o755}
	}
	for name, w := range want {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := Perm(fi); got != w {
			t.Errorf("Perm(%s) = %v, want %v", name, got, w)
		}
	}
}

// TestKeepExec: on Windows, where nothing local says whether a file is
// executable, the container's exec bits are kept; elsewhere the local mode
// is what goes.
func TestKeepExec(t *testing.T) {
	want := map[bool]fs.FileMode{false: 0o644, true: 0o755}[runtime.GOOS == "windows"]
	if got := KeepExec(0o644, 0o755); got != want {
		t.Errorf("KeepExec(0644, 0755) = %v, want %v", got, want)
	}
	want = map[bool]fs.FileMode{false: 0o755, true: 0o644}[runtime.GOOS == "windows"]
	if got := KeepExec(0o755, 0o644); got != want {
		t.Errorf("KeepExec(0755, 0644) = %v, want %v", got, want)
	}
}
