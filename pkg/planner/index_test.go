package planner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
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

// The index's tree (kids, anc and each path's place) against a model of
// what it links: an entry and its ancestors once put, until a delete of
// them or of a directory above; through random puts and deletes of files,
// directories and paths whose parents were never put.
func TestIndexTreeRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	idx := NewIndex()
	entries, linked := map[string]bool{}, map[string]bool{}
	under := func(p, rel string) bool { return rel == "" || p == rel || strings.HasPrefix(p, rel+"/") }
	randRel := func() string {
		parts := make([]string, 1+r.IntN(4))
		for i := range parts {
			parts[i] = fmt.Sprint("abcd"[r.IntN(4):][:1], r.IntN(3))
		}
		return strings.Join(parts, "/")
	}
	for i := range 30_000 {
		rel := randRel()
		switch n := r.IntN(10); {
		case n < 6:
			idx.Put(rel, Entry{Type: TypeFile, Size: int64(i)})
			entries[rel] = true
			for a := rel; a != ""; a = localtree.ParentRel(a) {
				linked[a] = true
			}
		case n < 9 || i%1000 == 0:
			if i%1000 == 0 {
				rel = ""
			}
			idx.DeleteTree(rel)
			for p := range linked {
				if under(p, rel) {
					delete(linked, p)
					delete(entries, p)
				}
			}
		default:
			idx.Put(rel, Entry{Type: TypeFile, Size: -1}) // an overwrite keeps the place
			entries[rel] = true
			for a := rel; a != ""; a = localtree.ParentRel(a) {
				linked[a] = true
			}
		}
		if i%500 != 0 {
			continue
		}
		if idx.Len() != len(entries) {
			t.Fatalf("step %d: %d entries, want %d", i, idx.Len(), len(entries))
		}
		// Every walk yields what is linked under it, children first, once.
		for _, from := range []string{"", "a0", "b1/c2", rel} {
			var got []string
			idx.Walk(from, func(p string) { got = append(got, p) })
			want, count := []string{from}, 0
			for p := range linked {
				if p != from && under(p, from) {
					want = append(want, p)
				}
			}
			for _, p := range want {
				if entries[p] {
					count++
				}
			}
			for j, p := range got {
				if slices.Contains(got[:j], p) {
					t.Fatalf("step %d: walk of %q yields %q twice", i, from, p)
				}
				if p != "" && slices.Contains(got[:j], localtree.ParentRel(p)) && localtree.ParentRel(p) != from {
					t.Fatalf("step %d: walk of %q yields %q after its parent", i, from, p)
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: walk of %q:\n got %q\nwant %q", i, from, got, want)
			}
			if n := idx.CountTree(from); n != count {
				t.Fatalf("step %d: CountTree(%q) = %d, want %d", i, from, n, count)
			}
		}
		// Every place is right.
		for p, l := range idx.kids {
			for j, k := range l {
				if localtree.ParentRel(k) != p {
					t.Fatalf("step %d: %q listed under %q", i, k, p)
				}
				var at int32
				if s := idx.m.ptr(k); s != nil {
					at = s.kid
				} else if a, ok := idx.anc[k]; ok {
					at = a
				} else {
					t.Fatalf("step %d: %q listed under %q but not linked", i, k, p)
				}
				if at != int32(j) {
					t.Fatalf("step %d: %q at %d under %q, its place says %d", i, k, j, p, at)
				}
			}
		}
	}
}

// BenchmarkIndexOf measures the rebuild of an index of 100,000 entries from saved records,
// what a start from saved state does first: its bytes allocated per op are the measure (an
// index grown by append allocates several times what it ends up holding).
func BenchmarkIndexOf(b *testing.B) {
	idx, _ := benchIndex()
	rs := idx.Records()
	b.ReportAllocs()
	for b.Loop() {
		if x := IndexOf(rs); x.Len() != idx.Len() {
			b.Fatalf("%d entries, want %d", x.Len(), idx.Len())
		}
	}
}
