package planner

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// syncedIndex returns the index of a target that has everything under m.
func syncedIndex(t testing.TB, m *Resolved) *Index {
	t.Helper()
	idx := NewIndex()
	p, err := Changes(m, idx, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	idx.Apply(p, tarstream.Result{})
	return idx
}

func TestPlan(t *testing.T) {
	base := map[string]string{
		"a.txt": "a", "d/x": "x", "d/y/z": "z", "keep": "k", "sub/": "",
	}
	tests := []struct {
		name        string
		base        map[string]string // added to the common base
		change      func(t *testing.T, dir string)
		hints       []string
		rescan      bool
		wantCopies  []string
		wantDeletes []string
		wantTouched []string
	}{
		{name: "new file", hints: []string{"new"},
			change:     func(t *testing.T, d string) { writeTree(t, d, map[string]string{"new": "n"}) },
			wantCopies: []string{"new"}},
		{name: "modified file", hints: []string{"a.txt"},
			change:     func(t *testing.T, d string) { must(t, os.WriteFile(filepath.Join(d, "a.txt"), []byte("aaa"), 0o644)) },
			wantCopies: []string{"a.txt"}},
		{name: "chmod", hints: []string{"a.txt"},
			change:     func(t *testing.T, d string) { must(t, os.Chmod(filepath.Join(d, "a.txt"), 0o755)) },
			wantCopies: []string{"a.txt"}},
		{name: "deleted file", hints: []string{"a.txt"},
			change:      func(t *testing.T, d string) { must(t, os.Remove(filepath.Join(d, "a.txt"))) },
			wantDeletes: []string{"a.txt"}},
		{name: "deleted unknown file", hints: []string{"never-synced"}},
		{name: "rename file", hints: []string{"a.txt", "b.txt"},
			change: func(t *testing.T, d string) {
				must(t, os.Rename(filepath.Join(d, "a.txt"), filepath.Join(d, "b.txt")))
			},
			wantCopies: []string{"b.txt"}, wantDeletes: []string{"a.txt"}},
		{name: "rename dir arrives as one event each", hints: []string{"d", "e"},
			change:     func(t *testing.T, d string) { must(t, os.Rename(filepath.Join(d, "d"), filepath.Join(d, "e"))) },
			wantCopies: []string{"e", "e/x", "e/y", "e/y/z"}, wantDeletes: []string{"d"}},
		{name: "dir delete emits no child deletes", hints: []string{"d/y/z", "d/x", "d/y", "d"},
			change:      func(t *testing.T, d string) { must(t, os.RemoveAll(filepath.Join(d, "d"))) },
			wantDeletes: []string{"d"}},
		{name: "file becomes dir", hints: []string{"a.txt"},
			change: func(t *testing.T, d string) {
				must(t, os.Remove(filepath.Join(d, "a.txt")))
				writeTree(t, d, map[string]string{"a.txt/inner": "i"})
			},
			wantCopies: []string{"a.txt", "a.txt/inner"}, wantDeletes: []string{"a.txt"}},
		{name: "dir becomes file, hinted through a child", hints: []string{"d/x"},
			change: func(t *testing.T, d string) {
				must(t, os.RemoveAll(filepath.Join(d, "d")))
				writeTree(t, d, map[string]string{"d": "now a file"})
			},
			wantCopies: []string{"d"}, wantDeletes: []string{"d"}},
		{name: "file becomes dir, hinted through a child", hints: []string{"a.txt/inner"},
			change: func(t *testing.T, d string) {
				must(t, os.Remove(filepath.Join(d, "a.txt")))
				writeTree(t, d, map[string]string{"a.txt/inner": "i", "a.txt/other": "o"})
			},
			wantCopies: []string{"a.txt", "a.txt/inner", "a.txt/other"}, wantDeletes: []string{"a.txt"}},
		{name: "symlink becomes dir, hinted through a grandchild", hints: []string{"ln/sub/f"},
			base: map[string]string{"ln@/etc": ""},
			change: func(t *testing.T, d string) {
				must(t, os.Remove(filepath.Join(d, "ln")))
				writeTree(t, d, map[string]string{"ln/sub/f": "f"})
			},
			wantCopies: []string{"ln", "ln/sub", "ln/sub/f"}, wantDeletes: []string{"ln"}},
		{name: "file becomes symlink", hints: []string{"a.txt"},
			change: func(t *testing.T, d string) {
				must(t, os.Remove(filepath.Join(d, "a.txt")))
				writeTree(t, d, map[string]string{"a.txt@keep": ""})
			},
			wantCopies: []string{"a.txt"}, wantDeletes: []string{"a.txt"}},
		{name: "symlinks inside and outside the root are sent as links", hints: []string{"in", "out", "out/passwd"},
			change:     func(t *testing.T, d string) { writeTree(t, d, map[string]string{"in@keep": "", "out@/etc": ""}) },
			wantCopies: []string{"in", "out"}},
		{name: "new file in new dirs brings its parents", hints: []string{"n1/n2/f"},
			change:     func(t *testing.T, d string) { writeTree(t, d, map[string]string{"n1/n2/f": "f"}) },
			wantCopies: []string{"n1", "n1/n2", "n1/n2/f"}},
		{name: "new file in known dir", hints: []string{"sub/f"},
			change:     func(t *testing.T, d string) { writeTree(t, d, map[string]string{"sub/f": "f"}) },
			wantCopies: []string{"sub/f"}},
		{name: "ignored", hints: []string{"x.swp", "cache/a", "cache"},
			change:     func(t *testing.T, d string) { writeTree(t, d, map[string]string{"x.swp": "", "cache/a": ""}) },
			wantCopies: nil},
		{name: "unchanged", hints: []string{"a.txt", "keep", "d", "sub"}},
		{name: "touch with same content only refreshes the index", hints: []string{"keep"},
			change: func(t *testing.T, d string) {
				later := time.Now().Add(time.Hour)
				must(t, os.Chtimes(filepath.Join(d, "keep"), later, later))
			},
			wantTouched: []string{"keep"}},
		{name: "touch without a known hash copies", hints: []string{"a.txt"},
			change: func(t *testing.T, d string) {
				later := time.Now().Add(time.Hour)
				must(t, os.Chtimes(filepath.Join(d, "a.txt"), later, later))
			},
			wantCopies: []string{"a.txt"}},
		{name: "a save keeping size and mtime (touch -r) is sent", hints: []string{"a.txt"},
			change:     func(t *testing.T, d string) { rewriteKeepingStat(t, filepath.Join(d, "a.txt"), "A") },
			wantCopies: []string{"a.txt"}},
		{name: "a save keeping size and mtime with a known hash is sent", hints: []string{"keep"},
			change:     func(t *testing.T, d string) { rewriteKeepingStat(t, filepath.Join(d, "keep"), "K") },
			wantCopies: []string{"keep"}},
		{name: "a chmod back and forth only refreshes the index", hints: []string{"keep"},
			change: func(t *testing.T, d string) {
				must(t, os.Chmod(filepath.Join(d, "keep"), 0o600))
				must(t, os.Chmod(filepath.Join(d, "keep"), 0o644))
			},
			wantTouched: []string{"keep"}},
		{name: "invalid hints are dropped", hints: []string{"../etc/passwd", "/abs", "a/./b"}},
		{name: "rescan diffs the whole tree", rescan: true,
			change: func(t *testing.T, d string) {
				must(t, os.Remove(filepath.Join(d, "a.txt")))
				must(t, os.RemoveAll(filepath.Join(d, "d/y")))
				writeTree(t, d, map[string]string{"sub/new": "n", "top": "t", "x.swp": ""})
				must(t, os.WriteFile(filepath.Join(d, "d/x"), []byte("changed"), 0o644))
			},
			wantCopies: []string{"d/x", "sub/new", "top"}, wantDeletes: []string{"a.txt", "d/y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, base)
			writeTree(t, dir, tt.base)
			m := testMapping(t, dir, "/app", globMatcher{"*.swp", "cache"})
			idx := syncedIndex(t, m)
			e, _ := idx.Get("keep")
			e.Sum, _ = hashFile(filepath.Join(dir, "keep"))
			idx.Put("keep", e)
			if tt.change != nil {
				tt.change(t, dir)
			}
			p, err := Changes(m, idx, tt.hints, tt.rescan)
			must(t, err)
			assertPlan(t, p, tt.wantCopies, tt.wantDeletes)
			var touched []string
			for rel := range p.Touched {
				touched = append(touched, rel)
			}
			if !slices.Equal(touched, tt.wantTouched) {
				t.Errorf("touched = %q, want %q", touched, tt.wantTouched)
			}
			// Once applied, planning the same hints again finds nothing.
			idx.Apply(p, tarstream.Result{})
			p, err = Changes(m, idx, tt.hints, true)
			must(t, err)
			if !p.Empty() {
				t.Errorf("after apply, rescan still plans %+v", p)
			}
		})
	}
}

func TestPlanSymlinkTargets(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"in@a/b": "", "out@../../etc/passwd": ""})
	m := testMapping(t, dir, "/app", nil)
	p, err := Changes(m, NewIndex(), []string{"in", "out"}, false)
	must(t, err)
	got := map[string]string{}
	for _, c := range p.Copies {
		if c.Type != TypeSymlink {
			t.Errorf("%s: type %v, want symlink", c.Name, c.Type)
		}
		got[c.Name] = c.Link
	}
	if got["in"] != "a/b" || got["out"] != "../../etc/passwd" {
		t.Errorf("links = %v", got)
	}
}

// Deletes that could lose files are held: a vanished, replaced or emptied
// root, or a mass delete. Held entries stay in the index.
func TestPlanHoldsDeletes(t *testing.T) {
	gone := func(names ...string) func(t *testing.T, d string, m *Resolved) {
		return func(t *testing.T, d string, m *Resolved) {
			for _, n := range names {
				must(t, os.RemoveAll(filepath.Join(d, n)))
			}
		}
	}
	emptied := gone("a", "d", "keep", "sub", "many")
	otherDevice := func(change func(t *testing.T, d string, m *Resolved)) func(t *testing.T, d string, m *Resolved) {
		return func(t *testing.T, d string, m *Resolved) {
			if !m.devKnown {
				t.Skip("no device ids on this platform")
			}
			m.dev++ // as if something was mounted or unmounted there
			change(t, d, m)
		}
	}
	tests := []struct {
		name         string
		many         int // files under many/
		change       func(t *testing.T, dir string, m *Resolved)
		hints        []string
		rescan       bool
		allow        bool
		wantCopies   []string
		wantDeletes  []string
		wantHeld     []string
		wantCopyHeld []string
		wantReason   string
	}{
		{name: "root missing, the root hinted", change: gone(""), hints: []string{""},
			wantHeld: []string{"a", "d", "keep", "sub"}, wantReason: "is missing"},
		{name: "root missing, children hinted (polling)", change: gone(""), hints: []string{"a", "d/x", "keep"},
			wantHeld: []string{"a", "d", "keep"}, wantReason: "is missing"},
		{name: "root missing, rescan", change: gone(""), rescan: true,
			wantHeld: []string{"a", "d", "keep", "sub"}, wantReason: "is missing"},
		{name: "root replaced by a file", hints: []string{"a"},
			change: func(t *testing.T, d string, m *Resolved) {
				must(t, os.RemoveAll(d))
				must(t, os.WriteFile(d, nil, 0o644))
			},
			wantHeld: []string{"a"}, wantReason: "no longer a directory"},
		{name: "root on another device, copies still go", hints: []string{"a", "n"},
			change: otherDevice(func(t *testing.T, d string, m *Resolved) {
				gone("a")(t, d, m)
				writeTree(t, d, map[string]string{"n": "new"})
			}),
			wantCopies: []string{"n"}, wantHeld: []string{"a"}, wantReason: "another file system"},
		{name: "a copy under a held delete waits with it", hints: []string{"d"},
			change: otherDevice(func(t *testing.T, d string, m *Resolved) {
				gone("d")(t, d, m)
				writeTree(t, d, map[string]string{"d": "now a file"})
			}),
			wantHeld: []string{"d"}, wantCopyHeld: []string{"d"}, wantReason: "another file system"},
		{name: "root emptied", change: emptied, hints: []string{"a", "d", "keep", "sub"},
			wantHeld: []string{"a", "d", "keep", "sub"}, wantReason: "is empty"},
		{name: "root emptied but for ignored files", hints: []string{"a", "keep"},
			change: func(t *testing.T, d string, m *Resolved) {
				emptied(t, d, m)
				writeTree(t, d, map[string]string{"x.swp": "", "cache/y": ""})
			},
			wantHeld: []string{"a", "keep"}, wantReason: "is empty"},
		{name: "root emptied, allowed", change: emptied, hints: []string{"a", "d", "keep", "sub"}, allow: true,
			wantDeletes: []string{"a", "d", "keep", "sub"}},
		{name: "mass delete", many: 100, change: gone("many"), hints: []string{"many"},
			wantHeld: []string{"many"}, wantReason: "half of the 106 entries"},
		{name: "mass delete, rescan", many: 100, change: gone("many", "a"), rescan: true,
			wantHeld: []string{"a", "many"}, wantReason: "half of the 106 entries"},
		{name: "mass delete, allowed", many: 100, change: gone("many"), hints: []string{"many"}, allow: true,
			wantDeletes: []string{"many"}},
		{name: "50 entries may go", many: 49, change: gone("many"), hints: []string{"many"},
			wantDeletes: []string{"many"}},
		{name: "more than 50 but at most half may go", many: 51, change: gone("many"), hints: []string{"many"},
			wantDeletes: []string{"many"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "src")
			writeTree(t, dir, map[string]string{"a": "a", "d/x": "x", "keep": "k", "sub/": ""})
			for i := range tt.many {
				writeTree(t, dir, map[string]string{fmt.Sprintf("many/f%03d", i): ""})
			}
			if tt.many == 51 {
				// Twice as many elsewhere: 52 of 110 is less than half.
				for i := range 52 {
					writeTree(t, dir, map[string]string{fmt.Sprintf("more/f%03d", i): ""})
				}
			}
			m := testMapping(t, dir, "/app", globMatcher{"*.swp", "cache"})
			m.AllowMassDelete = tt.allow
			idx := syncedIndex(t, m)
			before := idx.Len()
			tt.change(t, dir, m)
			p, err := Changes(m, idx, tt.hints, tt.rescan)
			must(t, err)
			assertPlan(t, p, tt.wantCopies, tt.wantDeletes)
			var held, copyHeld []string
			var reason string
			if p.Held != nil {
				held, copyHeld, reason = p.Held.Deletes, p.Held.Copies, p.Held.Reason
			}
			if !slices.Equal(held, tt.wantHeld) || !slices.Equal(copyHeld, tt.wantCopyHeld) {
				t.Errorf("held deletes %q, copies %q; want %q, %q", held, copyHeld, tt.wantHeld, tt.wantCopyHeld)
			}
			if !strings.Contains(reason, tt.wantReason) || (reason == "") != (tt.wantReason == "") {
				t.Errorf("reason %q, want %q", reason, tt.wantReason)
			}
			idx.Apply(p, tarstream.Result{})
			if p.Held != nil && idx.Len() != before+len(p.Copies) {
				t.Errorf("index holds %d entries, want the %d it had plus %d copies", idx.Len(), before, len(p.Copies))
			}
		})
	}
}

// TestPlanGuardWeighsWhatTheContainerHolds: entries the container deleted
// while the local side keeps them (Index.Gone: a container delete that does
// not come home) are not what the container holds. Counted, 80 of them let a
// local delete of 80 of the 153 entries the container held go with no hold
// (TestModel seed 15620430712571607237 round 33).
func TestPlanGuardWeighsWhatTheContainerHolds(t *testing.T) {
	for _, tt := range []struct {
		name       string
		rm         string
		rewrite    int // kept/ entries written again (Put) after they were gone
		wantHeld   bool
		wantReason string
	}{
		{name: "a local delete of most of what the container holds", rm: "many", wantHeld: true, wantReason: "half of the 66 entries"},
		{name: "what was written again counts again", rm: "many", rewrite: 40, wantHeld: true, wantReason: "half of the 106 entries"},
		{name: "what the container deleted is no mass delete", rm: "kept"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "src")
			writeTree(t, dir, map[string]string{"a": "a", "d/x": "x", "keep": "k", "sub/": ""})
			for i := range 60 {
				writeTree(t, dir, map[string]string{fmt.Sprintf("many/f%03d", i): ""})
			}
			for i := range 80 {
				writeTree(t, dir, map[string]string{fmt.Sprintf("kept/f%03d", i): ""})
			}
			m := testMapping(t, dir, "/app", nil)
			idx := syncedIndex(t, m)
			idx.Gone("kept", true)
			idx.Gone("not-an-entry", true)
			for i := range tt.rewrite {
				rel := fmt.Sprintf("kept/f%03d", i)
				e, _ := idx.Get(rel)
				idx.Put(rel, e)
			}
			if got, want := idx.Present(), 147-81+tt.rewrite; got != want {
				t.Fatalf("Present() = %d of %d entries, want %d", got, idx.Len(), want)
			}
			must(t, os.RemoveAll(filepath.Join(dir, tt.rm)))
			p, err := Changes(m, idx, []string{tt.rm}, false)
			must(t, err)
			if (p.Held != nil) != tt.wantHeld {
				t.Fatalf("deleting %s: held %+v, deletes %q; want held %v", tt.rm, p.Held, p.Deletes, tt.wantHeld)
			}
			if p.Held != nil && !strings.Contains(p.Held.Reason, tt.wantReason) {
				t.Errorf("reason %q, want %q", p.Held.Reason, tt.wantReason)
			}
			if p.Held == nil && !slices.Equal(p.Deletes, []string{tt.rm}) {
				t.Errorf("deletes %q, want %q", p.Deletes, tt.rm)
			}
		})
	}
}

// lstatGoneFS says the root is missing to Lstat only: a root that vanished
// while planned and was back (with content) when the deletes were checked.
type lstatGoneFS struct {
	localtree.OS
	Root string
}

func (g lstatGoneFS) Lstat(name string) (fs.FileInfo, error) {
	if name == g.Root {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrNotExist}
	}
	return os.Lstat(name)
}

func TestPlanHoldsDeletesOfRootBackTooSoon(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "a", "d/x": "x"})
	m := testMapping(t, dir, "/app", nil)
	idx := syncedIndex(t, m)
	m.fsys = lstatGoneFS{Root: dir}
	p, err := Changes(m, idx, []string{""}, false)
	must(t, err)
	if len(p.Deletes) != 0 || p.Held == nil || !slices.Equal(p.Held.Deletes, []string{"a", "d"}) || !strings.Contains(p.Held.Reason, "missing") {
		t.Errorf("plan = %+v, held %+v", p, p.Held)
	}
}

func TestPlanFileMapping(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"config.dev.yaml": "a: 1"})
	m := testMapping(t, filepath.Join(dir, "config.dev.yaml"), "/etc/app/config.yaml", nil)
	if !m.File || m.RemoteDir() != "/etc/app" {
		t.Fatalf("mapping = %+v", m)
	}
	idx := NewIndex()
	p, err := Changes(m, idx, []string{""}, false)
	must(t, err)
	if len(p.Copies) != 1 || p.Copies[0].Name != "config.yaml" || p.Copies[0].Rel != "" {
		t.Fatalf("copies = %+v", p.Copies)
	}
	idx.Apply(p, tarstream.Result{})
	must(t, os.Remove(filepath.Join(dir, "config.dev.yaml")))
	p, err = Changes(m, idx, []string{""}, false)
	must(t, err)
	if !slices.Equal(p.Deletes, []string{""}) {
		t.Fatalf("deletes = %q", p.Deletes)
	}
}

func BenchmarkPlan(b *testing.B) {
	dir := b.TempDir()
	var hints []string
	for i := range 1000 {
		rel := filepath.Join("pkg", string(rune('a'+i%20)), "file"+string(rune('a'+i/20%26))+string(rune('a'+i/520)))
		must2(b, os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755))
		must2(b, os.WriteFile(filepath.Join(dir, rel), []byte("package x\n"), 0o644))
		hints = append(hints, filepath.ToSlash(rel))
	}
	m, err := Resolve(Mapping{Local: LocalPath(dir), Remote: "/app"}, nil)
	must2(b, err)
	idx := syncedIndex(b, m)
	b.ResetTimer()
	for b.Loop() {
		// A touch storm: every file hinted, nothing changed.
		p, err := Changes(m, idx, hints, false)
		if err != nil || !p.Empty() {
			b.Fatal(err, p)
		}
	}
}

func must2(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// assertPlan checks a plan's copies (by tar name) and deletes, in order.
func assertPlan(t *testing.T, p *Plan, wantCopies, wantDeletes []string) {
	t.Helper()
	var copies []string
	for _, c := range p.Copies {
		copies = append(copies, c.Name)
	}
	if !slices.Equal(copies, wantCopies) {
		t.Errorf("copies = %q, want %q", copies, wantCopies)
	}
	if !slices.Equal(p.Deletes, wantDeletes) {
		t.Errorf("deletes = %q, want %q", p.Deletes, wantDeletes)
	}
}

// A file or link that changed while it was archived may have reached the
// container cut short: the index must keep it, so that a later local delete
// still deletes it remotely and a rescan sends it again.
func TestPlanAfterRace(t *testing.T) {
	tests := []struct {
		name        string
		raced       []string
		change      func(t *testing.T, dir string)
		hints       []string
		rescan      bool
		wantCopies  []string
		wantDeletes []string
	}{
		{name: "deleted, hinted", raced: []string{"f"}, hints: []string{"f"},
			change:      func(t *testing.T, d string) { must(t, os.Remove(filepath.Join(d, "f"))) },
			wantDeletes: []string{"f"}},
		{name: "deleted, rescan", raced: []string{"f"}, rescan: true,
			change:      func(t *testing.T, d string) { must(t, os.Remove(filepath.Join(d, "f"))) },
			wantDeletes: []string{"f"}},
		{name: "link deleted, rescan", raced: []string{"l"}, rescan: true,
			change:      func(t *testing.T, d string) { must(t, os.Remove(filepath.Join(d, "l"))) },
			wantDeletes: []string{"l"}},
		{name: "unchanged since, hinted", raced: []string{"f", "l"}, hints: []string{"f", "l"}, wantCopies: []string{"f", "l"}},
		{name: "unchanged since, rescan", raced: []string{"f", "l"}, rescan: true, wantCopies: []string{"f", "l"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"f": "partial", "l@f": "", "keep": "k"})
			m := testMapping(t, dir, "/app", nil)
			idx := NewIndex()
			p, err := Changes(m, idx, nil, true)
			must(t, err)
			raced := map[string]struct{}{}
			for _, rel := range tt.raced {
				raced[rel] = struct{}{}
			}
			idx.Apply(p, tarstream.Result{Raced: raced})
			if tt.change != nil {
				tt.change(t, dir)
			}
			p, err = Changes(m, idx, tt.hints, tt.rescan)
			must(t, err)
			assertPlan(t, p, tt.wantCopies, tt.wantDeletes)
			idx.Apply(p, tarstream.Result{})
			if p, _ = Changes(m, idx, nil, true); !p.Empty() {
				t.Errorf("after a clean apply, rescan still plans %+v", p)
			}
		})
	}
}

// A local symlink replaced by a directory, announced only through a child:
// the container still has the symlink, which points outside the remote root.
// It must be replaced, never written through (busybox tar would follow it).
func TestSymlinkBecomesDirNeverWritesThroughRemoteLink(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			local, remote, outside := t.TempDir(), t.TempDir(), t.TempDir()
			writeTree(t, local, map[string]string{"keep": "k", "link@" + outside: ""})
			m := testMapping(t, local, remote, nil)
			idx := NewIndex()
			sync := func(hints []string, rescan bool) {
				t.Helper()
				p, err := Changes(m, idx, hints, rescan)
				must(t, err)
				res, err := apply(context.Background(), ex, testTarget, m, p, tarstream.Options{})
				must(t, err)
				idx.Apply(p, res.Result)
			}
			sync(nil, true)
			if got := readTree(t, remote)["link"]; got != "link "+outside {
				t.Fatalf("remote link = %q", got)
			}
			must(t, os.Remove(filepath.Join(local, "link")))
			writeTree(t, local, map[string]string{"link/passwd": "pwned", "link/shadow": "s"})
			sync([]string{"link/passwd"}, false)
			if got := readTree(t, outside); len(got) != 0 {
				t.Errorf("written outside the remote root: %v", got)
			}
			assertSameTree(t, local, remote)
		})
	}
}

// On a case-insensitive disk, Lstat("Foo.txt") still succeeds after a rename
// to foo.txt; the container (case-sensitive) must lose Foo.txt all the same.
func TestPlanCaseOnlyRename(t *testing.T) {
	tests := []struct {
		name        string
		from, to    string
		hints       []string
		rescan      bool
		wantCopies  []string
		wantDeletes []string
	}{
		{name: "file", from: "Foo.txt", to: "foo.txt", hints: []string{"Foo.txt", "foo.txt"},
			wantCopies: []string{"foo.txt"}, wantDeletes: []string{"Foo.txt"}},
		{name: "file, rescan", from: "Foo.txt", to: "foo.txt", rescan: true,
			wantCopies: []string{"foo.txt"}, wantDeletes: []string{"Foo.txt"}},
		{name: "dir", from: "Dir", to: "dir", hints: []string{"Dir", "dir"},
			wantCopies: []string{"dir", "dir/x"}, wantDeletes: []string{"Dir"}},
		{name: "dir, hinted through children", from: "Dir", to: "dir", hints: []string{"Dir/x", "dir/x"},
			wantCopies: []string{"dir", "dir/x"}, wantDeletes: []string{"Dir"}},
		{name: "unchanged names stay", hints: []string{"Foo.txt", "Dir/x", "Dir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"Foo.txt": "f", "Dir/x": "x", "keep": "k"})
			m := testMapping(t, dir, "/app", nil)
			m.fsys, m.foldCase = testtree.FoldFS{}, true
			idx := syncedIndex(t, m)
			if tt.from != "" {
				must(t, os.Rename(filepath.Join(dir, tt.from), filepath.Join(dir, tt.to)))
			}
			p, err := Changes(m, idx, tt.hints, tt.rescan)
			must(t, err)
			assertPlan(t, p, tt.wantCopies, tt.wantDeletes)
			idx.Apply(p, tarstream.Result{})
			if p, _ = Changes(m, idx, nil, true); !p.Empty() {
				t.Errorf("after apply, rescan still plans %+v", p)
			}
		})
	}
}

// rewriteKeepingStat writes body (of the file's size) over name through a
// temporary file renamed over it, then gives it the old mtime back, as cp -p,
// touch -r and archive tools leave a save: only its inode and ctime moved.
func rewriteKeepingStat(t *testing.T, name, body string) {
	t.Helper()
	fi, err := os.Stat(name)
	must(t, err)
	if int64(len(body)) != fi.Size() {
		t.Fatalf("rewriteKeepingStat(%q): %d bytes for a %d-byte file", name, len(body), fi.Size())
	}
	must(t, os.WriteFile(name+".new", []byte(body), fi.Mode().Perm()))
	must(t, os.Chtimes(name+".new", fi.ModTime(), fi.ModTime()))
	must(t, os.Rename(name+".new", name))
}
