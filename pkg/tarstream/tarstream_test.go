package tarstream

import (
	"bytes"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

func TestCopyExact(t *testing.T) {
	tests := []struct {
		name       string
		src        string
		size       int64
		want       string
		wantIntact bool
	}{
		{"exact", "abcd", 4, "abcd", true},
		{"shrank: padded", "ab", 4, "ab\x00\x00", false},
		{"grew: cut", "abcdef", 4, "abcd", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			r := strings.NewReader(tt.src)
			intact, err := copyExact(&out, r, r, tt.size)
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want || intact != tt.wantIntact {
				t.Errorf("copyExact = %q, %v; want %q, %v", out.String(), intact, tt.want, tt.wantIntact)
			}
		})
	}
}

// A one-file tar allocates about what it holds, not a fresh 64 KiB buffer
// each time: every replica's worker writes every batch's.
func TestWriteSmallAllocs(t *testing.T) {
	src := filepath.Join(t.TempDir(), "edit.txt")
	if err := os.WriteFile(src, []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	files := []File{{Rel: "edit.txt", Name: "edit.txt", Src: src, Type: remote.TypeFile, Mode: 0o644, Size: fi.Size(), MTime: fi.ModTime()}}
	var out bytes.Buffer
	write := func() {
		out.Reset()
		if res, err := Write(&out, files); err != nil || res.Files != 1 {
			t.Fatalf("Write: %+v, %v", res, err)
		}
	}
	write()
	const n = 50
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		write()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 16<<10 && !raceOn {
		t.Errorf("a one-file tar allocated %d bytes, want under 16 KiB", per)
	}
}

// A file not as planned (its mtime moved, as `cp -p` moves it after the
// write) is raced, and Carried holds the sha256 of what its entry carried;
// a file gone before its header carried nothing.
func TestWriteCarried(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "c.txt")
	if err := os.WriteFile(src, []byte("the copy's bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	files := []File{
		{Rel: "c.txt", Name: "c.txt", Src: src, Type: remote.TypeFile, Mode: 0o644, Size: fi.Size(), MTime: fi.ModTime().Add(-time.Hour)},
		{Rel: "gone", Name: "gone", Src: filepath.Join(dir, "gone"), Type: remote.TypeFile, Mode: 0o644, Size: 3},
	}
	res, err := Write(io.Discard, files)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256([]byte("the copy's bytes"))
	if _, raced := res.Raced["c.txt"]; !raced || res.Carried["c.txt"] == nil || *res.Carried["c.txt"] != want || res.Sums["c.txt"] != nil {
		t.Errorf("c.txt: raced %v, carried %x, sum %v; want raced, carried %x", raced, res.Carried["c.txt"], res.Sums["c.txt"], want)
	}
	if _, raced := res.Raced["gone"]; !raced || res.Carried["gone"] != nil {
		t.Errorf("gone: raced %v, carried %v; want raced, nothing carried", raced, res.Carried["gone"])
	}
}
