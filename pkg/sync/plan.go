package sync

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"
)

// Copy is one entry to send.
type Copy struct {
	Rel  string // relative to the mapping root; the index key
	Name string // tar name, relative to the remote directory
	Src  string // absolute local path
	Entry
}

// Plan is what one batch changes for one mapping in one target. Deletes run
// before Copies are extracted, so type changes (dir→file) work.
type Plan struct {
	Deletes  []string         // rel paths; whole trees are removed
	Copies   []Copy           // sorted by Name, so parents come first
	Touched  map[string]Entry // content unchanged (same hash): only the index is refreshed
	Warnings []error          // paths that could not be read and were left alone
	// Rmdirs are remote-only directories that held entries to keep (ignored
	// ones) when listed: their other entries are in Deletes, and they are
	// removed after those only if nothing is left in them. Deepest first.
	Rmdirs []string
}

// Empty reports whether the plan changes nothing in the container.
func (p *Plan) Empty() bool { return len(p.Deletes) == 0 && len(p.Copies) == 0 }

// errRootMissing stops a plan whose local root vanished: mirroring that would
// empty the remote directory, which is almost never what was meant (a branch
// switch in progress, an unmounted volume).
var errRootMissing = errors.New("local root is missing")

type stat struct {
	e     Entry
	found bool // exists and is a synced type
	err   error
}

// planner holds one plan's state: memoized Lstat results and directory
// listings, so a path is stat'ed once however it is reached.
type planner struct {
	m       *mapping
	idx     *Index
	deep    bool // descend into known directories too (rescan)
	stats   map[string]stat
	dirs    map[string][]string
	visited map[string]bool
	copies  map[string]Copy
	deletes map[string]bool
	p       *Plan
}

func newPlanner(m *mapping, idx *Index) *planner {
	return &planner{
		m: m, idx: idx,
		stats: map[string]stat{}, dirs: map[string][]string{}, visited: map[string]bool{},
		copies: map[string]Copy{}, deletes: map[string]bool{},
		p: &Plan{Touched: map[string]Entry{}},
	}
}

// plan decides, by Lstat now, what the hinted paths (relative to m's root)
// need in a target whose state is idx. With rescan, the whole root is walked
// and diffed against idx instead.
func plan(m *mapping, idx *Index, hints []string, rescan bool) (*Plan, error) {
	pl := newPlanner(m, idx)
	if rescan {
		pl.deep = true
		hints = append([]string{""}, idx.Paths()...)
	}
	for _, rel := range hints {
		if err := pl.visit(rel); err != nil {
			return nil, err
		}
	}
	return pl.finish(), nil
}

func (pl *planner) visit(rel string) error {
	if pl.visited[rel] {
		return nil
	}
	pl.visited[rel] = true
	if !validRel(rel) {
		return nil
	}
	// A path under something that is no longer a directory is gone; plan the
	// ancestor instead (its type change deletes this path too).
	for a := parentRel(rel); a != ""; a = parentRel(a) {
		if st := pl.lstat(a); st.found && st.e.Type != TypeDir || !st.found && st.err == nil {
			return pl.visit(a)
		}
	}
	st := pl.lstat(rel)
	if st.err != nil {
		pl.p.Warnings = append(pl.p.Warnings, st.err)
		return nil
	}
	if !st.found {
		if rel == "" && !pl.m.file {
			return fmt.Errorf("planning %q: %w", pl.m.root, errRootMissing)
		}
		if _, ok := pl.idx.Get(rel); ok {
			pl.deletes[rel] = true
		}
		return nil
	}
	e := st.e
	if rel == "" {
		if err := pl.m.localRootConflict(e.Type); err != nil {
			return err
		}
	}
	if pl.m.ignored(rel, e.Type == TypeDir) {
		return nil
	}
	old, had := pl.idx.Get(rel)
	if had && old.Type != e.Type {
		pl.deletes[rel] = true
		had = false
	}
	switch e.Type {
	case TypeFile:
		if had && pl.unchanged(rel, old, &e) {
			return nil
		}
	case TypeSymlink:
		if had && old.sameMeta(e) {
			return nil
		}
	case TypeDir:
		if rel == "" {
			had = true // the root is created by mkdir -p, never sent
		} else if !had || old.Mode != e.Mode {
			pl.add(rel, e)
		}
		if !had || pl.deep {
			return pl.visitChildren(rel)
		}
		return nil
	}
	pl.add(rel, e)
	return nil
}

// unchanged reports whether a file needs no copy. A different mtime with the
// same size and an equal hash (an editor's touch) only refreshes the index.
func (pl *planner) unchanged(rel string, old Entry, e *Entry) bool {
	if old.Size != e.Size || old.Mode != e.Mode {
		return false
	}
	if old.MTime.Equal(e.MTime) {
		return true
	}
	if old.Sum == nil {
		return false
	}
	sum, err := hashFile(pl.m.localPath(rel))
	if err != nil || *sum != *old.Sum {
		return false
	}
	e.Sum = sum
	pl.p.Touched[rel] = *e
	return true
}

func (pl *planner) visitChildren(rel string) error {
	names, err := pl.readDir(rel)
	if err != nil {
		pl.p.Warnings = append(pl.p.Warnings, err)
		return nil
	}
	for _, n := range names {
		if err := pl.visit(path.Join(rel, n)); err != nil {
			return err
		}
	}
	return nil
}

// add queues rel for copying, with any parent directories the target lacks.
func (pl *planner) add(rel string, e Entry) {
	pl.copies[rel] = Copy{Rel: rel, Name: pl.m.remoteName(rel), Src: pl.m.localPath(rel), Entry: e}
	for a := parentRel(rel); a != ""; a = parentRel(a) {
		if _, ok := pl.copies[a]; ok {
			return
		}
		if old, ok := pl.idx.Get(a); ok && old.Type == TypeDir && !pl.deletes[a] {
			return
		}
		st := pl.lstat(a)
		if !st.found || st.e.Type != TypeDir {
			return
		}
		pl.copies[a] = Copy{Rel: a, Name: pl.m.remoteName(a), Src: pl.m.localPath(a), Entry: st.e}
	}
}

func (pl *planner) lstat(rel string) stat {
	if st, ok := pl.stats[rel]; ok {
		return st
	}
	var st stat
	fi, err := os.Lstat(pl.m.localPath(rel))
	switch {
	case err == nil:
		st.e, st.found = entryOf(fi)
		if st.e.Type == TypeSymlink {
			st.e.Link, err = os.Readlink(pl.m.localPath(rel))
			if err != nil {
				st = stat{err: fmt.Errorf("reading link %q: %w", pl.m.localPath(rel), err)}
			}
		}
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
	default:
		st.err = fmt.Errorf("checking %q: %w", pl.m.localPath(rel), err)
	}
	pl.stats[rel] = st
	return st
}

func (pl *planner) readDir(rel string) ([]string, error) {
	if names, ok := pl.dirs[rel]; ok {
		return names, nil
	}
	des, err := os.ReadDir(pl.m.localPath(rel))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listing %q: %w", pl.m.localPath(rel), err)
	}
	names := make([]string, 0, len(des))
	for _, de := range des {
		names = append(names, de.Name())
	}
	pl.dirs[rel] = names
	return names, nil
}

func (pl *planner) finish() *Plan {
	p := pl.p
	for d := range pl.deletes {
		if !pl.deletedAncestor(d) {
			p.Deletes = append(p.Deletes, d)
		}
	}
	slices.Sort(p.Deletes)
	for _, c := range pl.copies {
		p.Copies = append(p.Copies, c)
	}
	slices.SortFunc(p.Copies, func(a, b Copy) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return p
}

// deletedAncestor reports whether a parent of rel is deleted, which makes
// deleting rel itself redundant.
func (pl *planner) deletedAncestor(rel string) bool {
	for a := parentRel(rel); a != ""; a = parentRel(a) {
		if pl.deletes[a] {
			return true
		}
	}
	return false
}
