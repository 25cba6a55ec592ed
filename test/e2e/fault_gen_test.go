//go:build e2e

package e2e

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Bounds of the random tree.
const (
	maxDepth = 5 // path components below the root, files included
	// maxBurstRemoves bounds the entries one burst takes away from the container's view (deletes
	// and the old names of renames, a directory counting with all it holds). A batch that would
	// delete more than 50 files AND more than half the tree is held by the mass-delete guard until
	// the user allows it; staying at 50 keeps every burst under the first bound, whatever the tree.
	maxBurstRemoves = 50
	maxRemoveDir    = 20       // a larger directory is renamed, never removed: the tree grows
	maxTreeBytes    = 24 << 20 // above this, a "large" write is a small one: traffic stays moderate
	maxFileBytes    = 5 << 20
)

type entryKind byte

const (
	kindFile entryKind = iota
	kindDir
	kindLink
)

// fsGen makes seeded random changes to a local tree and keeps a model of it. Every pick goes
// through sorted lists of the model, never map order or a directory listing, so a seed replays
// the same operations. What it never does, and why:
//   - empty the root: a vanished or emptied root is held as a safety guard, never turned into
//     remote deletes; removing an entry of the root needs a sibling to stay;
//   - take more than maxBurstRemoves entries away in one burst (the mass-delete guard);
//   - create names that livesync always ignores (editor temp files, .git);
//   - create special files (FIFOs, sockets), which are skipped with a warning.
type fsGen struct {
	t       *testing.T
	rng     *rand.Rand
	root    string
	kinds   map[string]entryKind // slash-separated path below root → kind
	sizes   map[string]int64     // regular files only
	bytes   int64                // sum of sizes
	ops     int                  // operations done
	removed int                  // entries taken away in the current burst
	recent  []string             // the last operations, for failure messages
}

func newFSGen(t *testing.T, seed uint64, root string) *fsGen {
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return &fsGen{
		t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), root: root,
		kinds: map[string]entryKind{}, sizes: map[string]int64{},
	}
}

// ops of the generator with their weights; each returns a description, or "" when it does not
// apply to the tree as it is (the generator then draws again).
func (g *fsGen) table() []struct {
	weight int
	op     func() string
} {
	return []struct {
		weight int
		op     func() string
	}{
		{30, g.createFile}, {22, g.modifyFile}, {5, g.atomicSave}, {3, g.chmod},
		{8, g.deleteFile}, {8, g.renameFile}, {10, g.mkdir}, {3, g.removeDir},
		{6, g.renameDir}, {5, g.symlink},
	}
}

// beginBurst starts counting what a burst takes away.
func (g *fsGen) beginBurst() { g.removed = 0 }

// burst does n random operations as one burst.
func (g *fsGen) burst(n int) {
	g.beginBurst()
	for range n {
		g.step()
	}
}

// step does one random operation.
func (g *fsGen) step() {
	table := g.table()
	total := 0
	for _, e := range table {
		total += e.weight
	}
	for {
		r := g.rng.IntN(total)
		for _, e := range table {
			if r -= e.weight; r < 0 {
				if d := e.op(); d != "" {
					g.done(d)
					return
				}
				break
			}
		}
	}
}

// bootstrap fills an empty tree with n creations (files and directories).
func (g *fsGen) bootstrap(n int) {
	for g.ops < n {
		op := g.createFile
		if g.rng.IntN(4) == 0 {
			op = g.mkdir
		}
		if d := op(); d != "" {
			g.done(d)
		}
	}
}

func (g *fsGen) done(desc string) {
	g.ops++
	g.recent = append(g.recent, fmt.Sprintf("%d %s", g.ops, desc))
	if len(g.recent) > 40 {
		g.recent = g.recent[len(g.recent)-40:]
	}
}

// burstSize draws how many operations the next burst has, at most left: a third are single
// edits, most a handful, some a few dozen.
func (g *fsGen) burstSize(left int) int {
	var n int
	switch r := g.rng.IntN(100); {
	case r < 35:
		n = 1
	case r < 80:
		n = 2 + g.rng.IntN(14)
	default:
		n = 16 + g.rng.IntN(45)
	}
	return min(n, left)
}

// --- the model ------------------------------------------------------------------------------

func (g *fsGen) abs(rel string) string { return filepath.Join(g.root, filepath.FromSlash(rel)) }

func depth(rel string) int {
	if rel == "" {
		return 0
	}
	return strings.Count(rel, "/") + 1
}

func parentOf(rel string) string {
	if d := path.Dir(rel); d != "." {
		return d
	}
	return ""
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func within(rel, dir string) bool { return strings.HasPrefix(rel, dir+"/") }

// list returns the paths of the given kinds, sorted.
func (g *fsGen) list(kinds ...entryKind) []string {
	var out []string
	for rel, k := range g.kinds {
		if slices.Contains(kinds, k) {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
}

func (g *fsGen) pick(rels []string) string { return rels[g.rng.IntN(len(rels))] }

// subtree returns what dir holds, sorted.
func (g *fsGen) subtree(dir string) []string {
	var out []string
	for rel := range g.kinds {
		if within(rel, dir) {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
}

// height is how many levels dir holds below itself.
func (g *fsGen) height(dir string) int {
	h := 0
	for _, rel := range g.subtree(dir) {
		h = max(h, depth(rel)-depth(dir))
	}
	return h
}

// parents returns the directories (the root as "") that may get an entry reaching need levels
// below them.
func (g *fsGen) parents(need int) []string {
	out := []string{""}
	for _, d := range g.list(kindDir) {
		if depth(d)+need <= maxDepth {
			out = append(out, d)
		}
	}
	return out
}

// mayRemove says whether rel and what it holds may go in this burst: the burst's budget allows
// cost more entries, and the root keeps an entry.
func (g *fsGen) mayRemove(rel string, cost int) bool {
	if g.removed+cost > maxBurstRemoves {
		return false
	}
	if strings.Contains(rel, "/") {
		return true
	}
	top := 0
	for r := range g.kinds {
		if !strings.Contains(r, "/") {
			top++
		}
	}
	return top >= 2
}

var (
	nameWords = []string{"alpha", "beta", "gamma", "delta", "src", "lib", "docs", "img", "data", "cfg",
		"x", "y", "main", "util", "a b", "ünï", "node", "build", "k8s", "Readme"}
	nameExts = []string{"", "", ".txt", ".go", ".json", ".bin", ".md", ".sh"}
)

// newName returns a name that is free in dir, or "". Names come from a small pool, so a name
// deleted in a burst often comes back, maybe as the other kind.
func (g *fsGen) newName(dir string) string {
	for range 10 {
		n := g.pick(nameWords) + g.pick(nameExts)
		if g.rng.IntN(3) == 0 {
			n = fmt.Sprintf("%s-%d%s", g.pick(nameWords), g.rng.IntN(30), g.pick(nameExts))
		}
		if _, taken := g.kinds[join(dir, n)]; !taken {
			return n
		}
	}
	return ""
}

// size draws a file size from 0 B to 5 MB: mostly small, a few large.
func (g *fsGen) size() int {
	switch r := g.rng.IntN(100); {
	case r < 8:
		return 0
	case r < 75:
		return 1 + g.rng.IntN(4<<10)
	case r < 97 || g.bytes > maxTreeBytes:
		return 4<<10 + g.rng.IntN(252<<10)
	case r < 98:
		return maxFileBytes
	default:
		return 1<<20 + g.rng.IntN(maxFileBytes-1<<20)
	}
}

func (g *fsGen) content(n int) []byte {
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], g.rng.Uint64())
	}
	return b[:n]
}

func (g *fsGen) must(err error) {
	if err != nil {
		g.t.Helper()
		g.t.Fatalf("fault generator after %d operations: %v", g.ops, err)
	}
}

func (g *fsGen) setSize(rel string, n int64) {
	g.bytes += n - g.sizes[rel]
	g.sizes[rel] = n
}

// forget drops rel and what it holds from the model.
func (g *fsGen) forget(rel string) {
	for _, r := range append(g.subtree(rel), rel) {
		g.bytes -= g.sizes[r]
		delete(g.sizes, r)
		delete(g.kinds, r)
	}
}

// move renames rel and what it holds in the model.
func (g *fsGen) move(from, to string) {
	for _, r := range append(g.subtree(from), from) {
		nr := to + strings.TrimPrefix(r, from)
		g.kinds[nr] = g.kinds[r]
		if s, ok := g.sizes[r]; ok {
			g.sizes[nr] = s
			delete(g.sizes, r)
		}
		delete(g.kinds, r)
	}
}

// --- operations ------------------------------------------------------------------------------

func (g *fsGen) createFile() string { return g.createSized(g.size()) }

// createSized creates a file of n bytes in a random directory.
func (g *fsGen) createSized(n int) string {
	dir := g.pick(g.parents(1))
	name := g.newName(dir)
	if name == "" {
		return ""
	}
	rel := join(dir, name)
	mode := os.FileMode(0o644)
	if g.rng.IntN(10) == 0 {
		mode = 0o755
	}
	g.must(os.WriteFile(g.abs(rel), g.content(n), mode))
	g.kinds[rel] = kindFile
	g.setSize(rel, int64(n))
	return fmt.Sprintf("create %q (%d B)", rel, n)
}

func (g *fsGen) modifyFile() string {
	files := g.list(kindFile)
	if len(files) == 0 {
		return ""
	}
	rel := g.pick(files)
	switch r := g.rng.IntN(4); r {
	case 0: // same size, other bytes: size and a coarse mtime can't tell
		n := int(g.sizes[rel])
		g.must(os.WriteFile(g.abs(rel), g.content(n), 0))
		return fmt.Sprintf("rewrite %q (same %d B)", rel, n)
	case 1:
		f, err := os.OpenFile(g.abs(rel), os.O_WRONLY|os.O_APPEND, 0)
		g.must(err)
		n := 1 + g.rng.IntN(512)
		_, err = f.Write(g.content(n))
		g.must(err)
		g.must(f.Close())
		g.setSize(rel, g.sizes[rel]+int64(n))
		return fmt.Sprintf("append %d B to %q", n, rel)
	default:
		n := g.size()
		g.must(os.WriteFile(g.abs(rel), g.content(n), 0))
		g.setSize(rel, int64(n))
		return fmt.Sprintf("modify %q (%d B)", rel, n)
	}
}

// atomicSave writes a temporary file beside a file and renames it over the file, as editors do.
func (g *fsGen) atomicSave() string {
	files := g.list(kindFile)
	if len(files) == 0 || g.removed+1 > maxBurstRemoves {
		return ""
	}
	rel := g.pick(files)
	tmp := join(parentOf(rel), fmt.Sprintf(".%s.tmp%d", path.Base(rel), g.rng.IntN(1000)))
	n := g.size()
	fi, err := os.Stat(g.abs(rel))
	g.must(err)
	g.must(os.WriteFile(g.abs(tmp), g.content(n), fi.Mode().Perm()))
	g.must(os.Rename(g.abs(tmp), g.abs(rel)))
	g.removed++ // the temporary name, if a batch saw it
	g.setSize(rel, int64(n))
	return fmt.Sprintf("save %q via %q (%d B)", rel, path.Base(tmp), n)
}

func (g *fsGen) chmod() string {
	files := g.list(kindFile)
	if len(files) == 0 {
		return ""
	}
	rel := g.pick(files)
	fi, err := os.Stat(g.abs(rel))
	g.must(err)
	mode := fi.Mode().Perm() ^ 0o111
	g.must(os.Chmod(g.abs(rel), mode))
	return fmt.Sprintf("chmod %o %q", mode, rel)
}

func (g *fsGen) deleteFile() string {
	cands := g.list(kindFile, kindLink)
	if len(cands) == 0 {
		return ""
	}
	rel := g.pick(cands)
	if !g.mayRemove(rel, 1) {
		return ""
	}
	g.must(os.Remove(g.abs(rel)))
	g.removed++
	g.forget(rel)
	return fmt.Sprintf("delete %q", rel)
}

func (g *fsGen) renameFile() string {
	cands := g.list(kindFile, kindLink)
	if len(cands) == 0 {
		return ""
	}
	rel := g.pick(cands)
	dir := g.pick(g.parents(1))
	name := g.newName(dir)
	if name == "" || !g.mayRemove(rel, 1) {
		return ""
	}
	to := join(dir, name)
	g.must(os.Rename(g.abs(rel), g.abs(to)))
	g.removed++
	g.move(rel, to)
	return fmt.Sprintf("rename %q to %q", rel, to)
}

// mkdir creates a directory, sometimes with an empty directory inside.
func (g *fsGen) mkdir() string {
	dir := g.pick(g.parents(1))
	name := g.newName(dir)
	if name == "" {
		return ""
	}
	rel := join(dir, name)
	g.must(os.Mkdir(g.abs(rel), 0o755))
	g.kinds[rel] = kindDir
	if depth(rel) < maxDepth && g.rng.IntN(3) == 0 {
		if sub := g.newName(rel); sub != "" {
			g.must(os.Mkdir(g.abs(join(rel, sub)), 0o755))
			g.kinds[join(rel, sub)] = kindDir
			return fmt.Sprintf("mkdir -p %q", join(rel, sub))
		}
	}
	return fmt.Sprintf("mkdir %q", rel)
}

// dirWithFile creates a new directory holding one small file: what makes notify add a watch.
func (g *fsGen) dirWithFile() string {
	dir := g.pick(g.parents(2))
	name := g.newName(dir)
	if name == "" {
		return ""
	}
	rel := join(dir, name)
	g.must(os.Mkdir(g.abs(rel), 0o755))
	g.kinds[rel] = kindDir
	n := 1 + g.rng.IntN(1<<10)
	g.must(os.WriteFile(g.abs(rel+"/f.txt"), g.content(n), 0o644))
	g.kinds[rel+"/f.txt"] = kindFile
	g.setSize(rel+"/f.txt", int64(n))
	return fmt.Sprintf("mkdir %q with f.txt", rel)
}

func (g *fsGen) removeDir() string {
	dirs := g.list(kindDir)
	if len(dirs) == 0 {
		return ""
	}
	rel := g.pick(dirs)
	cost := 1 + len(g.subtree(rel))
	if cost > maxRemoveDir || !g.mayRemove(rel, cost) {
		return ""
	}
	g.must(os.RemoveAll(g.abs(rel)))
	g.removed += cost
	g.forget(rel)
	return fmt.Sprintf("rm -r %q (%d entries)", rel, cost)
}

func (g *fsGen) renameDir() string {
	dirs := g.list(kindDir)
	if len(dirs) == 0 {
		return ""
	}
	rel := g.pick(dirs)
	var dests []string
	for _, p := range g.parents(1 + g.height(rel)) {
		if p != rel && !within(p, rel) {
			dests = append(dests, p)
		}
	}
	dir := g.pick(dests) // the root always qualifies
	name := g.newName(dir)
	cost := 1 + len(g.subtree(rel))
	if name == "" || !g.mayRemove(rel, cost) {
		return ""
	}
	to := join(dir, name)
	g.must(os.Rename(g.abs(rel), g.abs(to)))
	g.removed += cost
	g.move(rel, to)
	return fmt.Sprintf("rename dir %q to %q (%d entries)", rel, to, cost)
}

// symlink creates a relative link to a file of the tree, or a dangling one: links travel as
// links, whatever they point to.
func (g *fsGen) symlink() string {
	dir := g.pick(g.parents(1))
	name := g.newName(dir)
	if name == "" {
		return ""
	}
	rel := join(dir, name)
	target := fmt.Sprintf("missing-%d", g.rng.IntN(100))
	if files := g.list(kindFile); len(files) > 0 && g.rng.IntN(4) != 0 {
		var err error
		target, err = filepath.Rel(g.abs(dir), g.abs(g.pick(files)))
		g.must(err)
	}
	g.must(os.Symlink(target, g.abs(rel)))
	g.kinds[rel] = kindLink
	return fmt.Sprintf("symlink %q -> %q", rel, target)
}
