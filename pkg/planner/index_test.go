package planner

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// benchIndex returns an index of 100,000 files in 5,000 directories, and
// the rels of 5,000 of those files spread over the tree.
func benchIndex() (*Index, []string) {
	idx := NewIndex()
	var files []string
	for d := range 5000 {
		top := fmt.Sprintf("d%02d", d/100)
		dir := fmt.Sprintf("%s/s%03d", top, d%100)
		idx.Put(top, Entry{Type: TypeDir})
		idx.Put(dir, Entry{Type: TypeDir})
		for f := range 19 {
			rel := fmt.Sprintf("%s/f%06d.js", dir, d*20+f)
			idx.Put(rel, Entry{Type: TypeFile})
			if f == 0 {
				files = append(files, rel)
			}
		}
	}
	return idx, files
}

// BenchmarkIndexDeleteTree measures 5,000 single-file deletes against an
// index of 100,000 entries (what a batch deleting 5,000 files records), and
// putting them back.
func BenchmarkIndexDeleteTree(b *testing.B) {
	idx, files := benchIndex()
	if idx.Len() < 100_000 {
		b.Fatalf("index holds %d entries", idx.Len())
	}
	for b.Loop() {
		for _, rel := range files {
			idx.DeleteTree(rel)
		}
		for _, rel := range files {
			idx.Put(rel, Entry{Type: TypeFile})
		}
	}
}

func TestIndexDeleteTree(t *testing.T) {
	tests := []struct {
		name, del string
		want      []string // what is left
		count     int      // countTree(del) before the delete
	}{
		{name: "file", del: "a/b/f", want: []string{"a", "a/b", "ab", "ab/f", "a/bc", "top", "x/y/z", "x/y/z/w"}, count: 1},
		{name: "dir and everything under it", del: "a", want: []string{"ab", "ab/f", "top", "x/y/z", "x/y/z/w"}, count: 4},
		{name: "a sibling with the same prefix stays", del: "a/b", want: []string{"a", "ab", "ab/f", "a/bc", "top", "x/y/z", "x/y/z/w"}, count: 2},
		{name: "entries whose parents were never put", del: "x", want: []string{"a", "a/b", "a/b/f", "ab", "ab/f", "a/bc", "top"}, count: 2},
		{name: "root", del: "", want: nil, count: 9},
		{name: "unknown", del: "nope", want: []string{"a", "a/b", "a/b/f", "ab", "ab/f", "a/bc", "top", "x/y/z", "x/y/z/w"}, count: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx := NewIndex()
			for _, rel := range []string{"a", "a/b", "a/b/f", "ab", "ab/f", "a/bc", "top", "x/y/z", "x/y/z/w"} {
				idx.Put(rel, Entry{Type: TypeFile})
			}
			if n := idx.CountTree(tt.del); n != tt.count {
				t.Errorf("countTree(%q) = %d, want %d", tt.del, n, tt.count)
			}
			idx.DeleteTree(tt.del)
			got := idx.Paths()
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("left %q, want %q", got, want)
			}
			// Deleted paths put back are found by the next delete.
			idx.Put(tt.del+"/again", Entry{Type: TypeFile})
			idx.DeleteTree(tt.del)
			if _, ok := idx.Get(tt.del + "/again"); ok {
				t.Errorf("%q/again survived a second delete", tt.del)
			}
		})
	}
}

// The index keeps entries in a smaller form: what Get returns is what Put
// was given, mtimes to the nanosecond (before 1970 and after 2262 too),
// the zero mtime and the unexported marks included.
func TestIndexKeepsEntries(t *testing.T) {
	sum := [32]byte{1, 2, 3}
	for name, e := range map[string]Entry{
		"file":    {Type: TypeFile, Mode: 0o755, Size: 1 << 40, MTime: time.Unix(1_700_000_000, 123_456_789), Sum: &sum, Ino: 7, CTime: 9},
		"zero":    {Type: TypeDir, Mode: 0o700},
		"before":  {Type: TypeFile, MTime: time.Unix(-5, 999_999_999)},
		"far":     {Type: TypeFile, MTime: time.Date(3000, 1, 2, 3, 4, 5, 6, time.UTC)},
		"link":    {Type: TypeSymlink, Mode: 0o777, Link: "../x"},
		"stale":   {Type: TypeFile, stale: true},
		"retyped": {Type: TypeDir, stale: true, retype: true},
	} {
		x := NewIndex()
		x.Put("a/b", e)
		got, ok := x.Get("a/b")
		if !ok || !got.MTime.Equal(e.MTime) || got.MTime.IsZero() != e.MTime.IsZero() {
			t.Fatalf("%s: mtime %v, want %v", name, got.MTime, e.MTime)
		}
		got.MTime, e.MTime = time.Time{}, time.Time{}
		if got != e {
			t.Fatalf("%s: got %+v, want %+v", name, got, e)
		}
	}
}
