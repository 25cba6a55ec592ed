package planner

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"syscall"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
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
	Held     *Hold            // deletes not safe to run now (see guard); nil if none
	// deleted is the entries its deletes remove, as the guard counted
	// them (counted: per delete); before, what the target held for the mapping before the delete
	// burst under way (see DeleteBurst); fresh, the paths it copies that
	// the target lacked.
	deleted, before int
	counted         map[string]int
	fresh           []string
	// Rmdirs are remote-only directories that held entries to keep (ignored
	// ones) when listed: their other entries are in Deletes, and they are
	// removed after those only if nothing is left in them. Deepest first.
	Rmdirs []string
	// Moves are copies, by rel, whose content the container already holds
	// (see FindMoves): it moves or copies it, and the archive leaves them out.
	Moves map[string]Move
}

// Empty reports whether the plan changes nothing in the container.
func (p *Plan) Empty() bool { return len(p.Deletes) == 0 && len(p.Copies) == 0 }

// CopiesOnly drops p's deletes and the copies at or under them (a type
// change, a symlink replaced by a directory), and what p would report (holds,
// warnings): what is left only adds to the container. A full compare that
// follows decides the rest.
func (p *Plan) CopiesOnly() {
	if len(p.Deletes) > 0 {
		gone := make(map[string]bool, len(p.Deletes))
		for _, d := range p.Deletes {
			gone[d] = true
		}
		p.Copies = slices.DeleteFunc(p.Copies, func(c Copy) bool { return localtree.UnderAny(c.Rel, gone) })
	}
	p.Deletes, p.Held, p.Warnings = nil, nil, nil
}

// Drop leaves the copies and deletes at or under gone out of p.
func (p *Plan) Drop(gone map[string]bool) {
	if len(gone) > 0 {
		p.Copies = slices.DeleteFunc(p.Copies, func(c Copy) bool { return localtree.UnderAny(c.Rel, gone) })
		p.Deletes = slices.DeleteFunc(p.Deletes, func(d string) bool { return localtree.UnderAny(d, gone) })
	}
}

// Sent returns the copies p's archive carries: those the container does
// not move (see Plan.Moves).
func (p *Plan) Sent() []Copy {
	if len(p.Moves) == 0 {
		return p.Copies
	}
	out := make([]Copy, 0, len(p.Copies))
	for _, c := range p.Copies {
		if _, ok := p.Moves[c.Rel]; !ok {
			out = append(out, c)
		}
	}
	return out
}

// errRootMissing stops an initial sync whose local root is missing. A batch
// plan holds its deletes instead (see guard): mirroring a vanished root would
// empty the remote directory, which is almost never what was meant (a branch
// switch in progress, an unmounted volume).
var errRootMissing = errors.New("local root is missing")

type stat struct {
	e     Entry
	found bool // exists and is a synced type
	err   error
}

// planState holds one plan's state: memoized Lstat results (of directories
// and of what is missing or unreadable; see lstat) and directory listings,
// so a directory is stat'ed once however it is reached.
type planState struct {
	m       *Resolved
	idx     *Index
	deep    bool // descend into known directories too (rescan)
	stats   map[string]stat
	dirs    map[string][]string
	visited map[string]bool
	// seenIdx marks the visited paths that are entries of idx, a bit per
	// entry by its place (idx does not change while a plan is made): a
	// rescan visits every path of the tree, and a map of them all held
	// 4 MiB at a burst's peak. visited holds the others.
	seenIdx []uint64
	copies  map[string]Copy
	deletes map[string]bool
	p       *Plan
	// rootGone: the root itself was missing when visited, so every
	// top-level entry is planned for deletion; guard holds that even if the
	// root is back by then.
	rootGone bool
	// deepUnder: held paths decided again, compared in depth (see Opts).
	deepUnder map[string]bool
	// released lifts the mass-delete verdict for deletes at or under it (see guard).
	released map[string]bool
	// prior: entries the delete burst under way already deleted (see
	// DeleteBurst).
	prior int
	// err stops the plan: the root's type no longer fits the mapping.
	err error
}

func newPlanState(m *Resolved, idx *Index) *planState {
	return &planState{
		m: m, idx: idx,
		stats: map[string]stat{}, dirs: map[string][]string{}, visited: map[string]bool{},
		copies: map[string]Copy{}, deletes: map[string]bool{},
		p: &Plan{Touched: map[string]Entry{}},
	}
}

// Changes decides, by Lstat now, what the hinted paths (relative to m's root)
// need in a target whose state is idx. With rescan, the whole root is walked
// and diffed against idx instead. Deletes that could lose files are held
// (see guard). What cannot be read becomes a warning, and doubt never becomes
// a delete; the only error is a root whose type no longer fits the mapping.
func Changes(m *Resolved, idx *Index, hints []string, rescan bool) (*Plan, error) {
	return ChangesWith(m, idx, hints, rescan, Opts{})
}

// Opts are what a target adds to a batch's plan.
type Opts struct {
	// Kept: deletes at or under these held paths stay held whatever the
	// guard would say of them now, and the copies at or under them wait (see
	// filesync.Engine.Release).
	Kept map[string]bool
	// Again: held paths decided again, compared in depth as a rescan would.
	Again []string
	// Released lifts the mass-delete verdict for deletes at or under it.
	Released map[string]bool
	// Early holds the entries that copies ahead of the batch added to the
	// index (see filesync's syncBatch), which the mass-delete guard does not count, so
	// that its verdict on the batch's deletes does not depend on how the
	// batch was cut. Without them, a burst that deletes 60 files under src/
	// and writes 60 under lib/ is held as one batch but runs when a peek sent
	// lib/ first.
	Early map[string]bool
	// Burst is the delete burst under way, nil if none: the guard judges
	// the burst, not the batch (see DeleteBurst).
	Burst *DeleteBurst
	// Skip, where set, names the deletes the batch will leave out whatever
	// is decided here (sync-back's conflicts that no local save followed):
	// not the batch's, so the mass-delete guard neither counts nor holds
	// them. Before, such a delete planned within a burst was held with it,
	// and a hold stops sync-back's passes (TestModel seed
	// 1229838384427958497 round 168).
	Skip func(rel string) bool
}

// ChangesWith is Changes in a target, with what it holds and sent ahead (see
// Opts).
func ChangesWith(m *Resolved, idx *Index, hints []string, rescan bool, o Opts) (*Plan, error) {
	pl := newPlanState(m, idx)
	pl.released = o.Released
	if len(o.Again) > 0 {
		pl.deepUnder = map[string]bool{}
		for _, a := range o.Again {
			pl.deepUnder[a] = true
			hints = append(hints, a)
			idx.Walk(a, func(p string) { hints = append(hints, p) })
		}
	}
	if rescan {
		pl.deep = true
		hints = []string{""}
	}
	for _, rel := range hints {
		pl.visit(rel)
		if pl.err != nil {
			return nil, pl.err
		}
	}
	if rescan {
		// Then every entry (what is gone locally): in place, not a copy
		// of 100,000 paths.
		for _, rel := range idx.m.keys {
			pl.visit(rel)
			if pl.err != nil {
				return nil, pl.err
			}
		}
	}
	p := pl.finish()
	p.keep(o.Kept)
	if o.Skip != nil {
		p.Deletes = slices.DeleteFunc(p.Deletes, o.Skip)
	}
	// Entries whose delete the guard does not count: those that copies
	// ahead of the batch or the burst's batches added (they were not there
	// before it), and those the batch writes again elsewhere (see
	// movedAway). What the target held is counted as before the burst.
	// Nor are entries the container is known to have deleted (Index.Gone):
	// the guard weighs what the container holds.
	total := idx.Present()
	uncounted := movedAway(idx, p, o.Early)
	for rel := range o.Early {
		if _, ok := idx.Get(rel); ok && !idx.gone[rel] {
			uncounted[rel] = true
			total--
		}
	}
	if b := o.Burst; b != nil {
		for rel := range b.added {
			if _, ok := idx.Get(rel); ok {
				uncounted[rel] = true
			}
		}
		// What the batch writes again where the burst deleted is back.
		total, pl.prior = b.before, b.Entries-b.givenBack(freshCopies(idx, p))
	}
	size := idx.presentTree
	if len(uncounted) > 0 {
		// under counts, per path, the uncounted entries at or under it
		// (that presentTree counts).
		under := map[string]int{}
		for rel := range uncounted {
			if idx.gone[rel] {
				continue
			}
			for a := rel; ; a = localtree.ParentRel(a) {
				under[a]++
				if a == "" {
					break
				}
			}
		}
		size = func(rel string) int { return idx.presentTree(rel) - under[rel] }
	}
	pl.guard(p, total, size, "restart with --initial=mirror --allow-mass-delete")
	p.before, p.fresh = total, freshCopies(idx, p)
	return p, nil
}

// freshCopies returns the paths p copies that idx lacks.
func freshCopies(idx *Index, p *Plan) []string {
	var out []string
	for _, c := range p.Copies {
		if _, ok := idx.Get(c.Rel); !ok {
			out = append(out, c.Rel)
		}
	}
	return out
}

func (pl *planState) visit(rel string) {
	if pl.seen(rel) {
		return
	}
	if !localtree.ValidRel(rel) {
		return
	}
	// A path under something that is no longer a directory is gone; plan the
	// ancestor instead (its type change deletes this path too).
	for a := localtree.ParentRel(rel); a != ""; a = localtree.ParentRel(a) {
		if st := pl.lstat(a); st.found && st.e.Type != TypeDir || !st.found && st.err == nil {
			pl.visit(a)
			return
		}
	}
	st := pl.lstat(rel)
	if st.err != nil {
		pl.p.Warnings = append(pl.p.Warnings, st.err)
		return
	}
	if rel == "" && !pl.m.File && (!st.found || st.e.Type == TypeFile) {
		// The root itself is gone: mirroring that deletes everything the
		// target has, which guard holds.
		pl.rootGone = true
		for _, k := range pl.idx.children("") {
			pl.deletes[k] = true
		}
		return
	}
	if !st.found {
		if _, ok := pl.idx.Get(rel); ok {
			pl.deletes[rel] = true
		}
		return
	}
	e := st.e
	if rel == "" {
		if err := pl.m.localRootConflict(e.Type); err != nil {
			pl.err = err
			return
		}
	}
	if pl.m.Ignored(rel, e.Type == TypeDir) {
		return
	}
	old, had := pl.idx.Get(rel)
	if had && (old.Type != e.Type || old.retype) {
		pl.deletes[rel] = true
		had = false
	}
	switch e.Type {
	case TypeFile:
		if had {
			e.Mode = localtree.KeepExec(e.Mode, old.Mode)
		}
		if had && pl.unchanged(rel, old, &e) || pl.m.Unreadable.Holds(pl.m.FS(), pl.m.LocalPath(rel), rel) {
			return
		}
	case TypeSymlink:
		if had && old.sameMeta(e) {
			return
		}
	case TypeDir:
		if rel == "" {
			had = true // the root is created by mkdir -p, never sent
		} else if !had || old.stale || old.Mode != e.Mode {
			pl.add(rel, e)
		}
		if !had || pl.deep || pl.deepUnder != nil && localtree.UnderAny(rel, pl.deepUnder) {
			pl.visitChildren(rel)
		}
		return
	}
	pl.add(rel, e)
}

// unchanged reports whether a file needs no copy. A different mtime, inode
// or ctime with the same size and an equal hash (an editor's touch, a chmod
// back) only refreshes the index. Size and mtime alone miss a save that
// keeps them (cp -p, touch -r, archive tools), which the inode (a rename
// over it) or ctime (a write in place) still show, where the platform
// says them (see localtree.IdentityOf).
func (pl *planState) unchanged(rel string, old Entry, e *Entry) bool {
	if old.stale || old.Size != e.Size || old.Mode != e.Mode {
		return false
	}
	if old.MTime.Equal(e.MTime) && old.sameIdentity(*e) {
		return true
	}
	if old.Sum == nil {
		return false
	}
	sum, err := hashFile(pl.m.LocalPath(rel))
	if err != nil || *sum != *old.Sum {
		return false
	}
	e.Sum = sum
	pl.p.Touched[rel] = *e
	return true
}

func (pl *planState) visitChildren(rel string) {
	names, err := pl.readDir(rel)
	if err != nil {
		pl.p.Warnings = append(pl.p.Warnings, err)
		return
	}
	for _, n := range names {
		pl.visit(path.Join(rel, n))
	}
}

// add queues rel for copying, with any parent directories the target lacks.
// A parent the target has as something else (a symlink, a file) is deleted
// first and sent whole: tar would otherwise write through a stale remote
// symlink, outside the remote root.
func (pl *planState) add(rel string, e Entry) {
	pl.copies[rel] = Copy{Rel: rel, Name: pl.m.RemoteName(rel), Src: pl.m.LocalPath(rel), Entry: e}
	for a := localtree.ParentRel(rel); a != ""; a = localtree.ParentRel(a) {
		if _, ok := pl.copies[a]; ok {
			return
		}
		old, had := pl.idx.Get(a)
		if had && old.Type == TypeDir && !old.stale && !pl.deletes[a] {
			return
		}
		st := pl.lstat(a)
		if !st.found || st.e.Type != TypeDir {
			return
		}
		pl.copies[a] = Copy{Rel: a, Name: pl.m.RemoteName(a), Src: pl.m.LocalPath(a), Entry: st.e}
		if had && old.Type != TypeDir {
			pl.deletes[a] = true
			pl.visitChildren(a)
		}
	}
}

func (pl *planState) lstat(rel string) stat {
	if st, ok := pl.stats[rel]; ok {
		return st
	}
	var st stat
	name := pl.m.LocalPath(rel)
	fi, err := pl.m.FS().Lstat(name)
	switch {
	case err == nil && !pl.exactName(rel):
		// Found under another case only (Foo.txt renamed to foo.txt on a
		// case-insensitive disk): this name is gone.
	case err == nil:
		st.e, st.found = EntryOf(fi)
		if st.e.Type == TypeSymlink {
			st.e.Link, err = pl.m.FS().Readlink(name)
			if err != nil {
				st = stat{err: fmt.Errorf("reading link %q: %w", name, err)}
			}
		}
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
	default:
		st.err = fmt.Errorf("checking %q: %w", name, err)
	}
	// A file or link found is looked up once, by its own visit: keeping it
	// would hold an entry per path of a rescan (25 MiB at 100,000 paths)
	// for nothing. Directories (every path under one asks for it) and what
	// is missing or unreadable are kept.
	if !st.found || st.err != nil || st.e.Type == TypeDir {
		pl.stats[rel] = st
	}
	return st
}

// exactName reports whether rel's last element is spelled as in its parent's
// listing. Only mappings on case-folding file systems need the listing; when
// it cannot be read, the Lstat result stands (doubt never becomes a delete).
func (pl *planState) exactName(rel string) bool {
	if !pl.m.foldCase || rel == "" || pl.m.File {
		return true
	}
	names, err := pl.readDir(localtree.ParentRel(rel))
	if err != nil {
		return true
	}
	_, ok := slices.BinarySearch(names, path.Base(rel))
	return ok
}

// seen reports whether rel was visited already, and marks it visited.
func (pl *planState) seen(rel string) bool {
	if i := pl.idx.m.pos(rel); i >= 0 {
		if pl.seenIdx == nil {
			pl.seenIdx = make([]uint64, (pl.idx.m.len()+63)/64)
		}
		w, b := i/64, uint64(1)<<(i%64)
		was := pl.seenIdx[w]&b != 0
		pl.seenIdx[w] |= b
		return was
	}
	if pl.visited[rel] {
		return true
	}
	pl.visited[rel] = true
	return false
}

// readDir returns the names in directory rel, sorted. It keeps them only
// where they are asked for again (the root; every directory where names
// fold case): a rescan lists each directory once, and kept, the names of
// a tree of 100,000 files were 4 MiB at a burst's peak.
func (pl *planState) readDir(rel string) ([]string, error) {
	if names, ok := pl.dirs[rel]; ok {
		return names, nil
	}
	des, err := pl.m.FS().ReadDir(pl.m.LocalPath(rel))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listing %q: %w", pl.m.LocalPath(rel), err)
	}
	names := make([]string, 0, len(des))
	for _, de := range des {
		names = append(names, de.Name())
	}
	slices.Sort(names)
	if rel == "" || pl.m.foldCase {
		pl.dirs[rel] = names
	}
	return names, nil
}

func (pl *planState) finish() *Plan {
	p := pl.p
	for d := range pl.deletes {
		if !pl.deletedAncestor(d) {
			p.Deletes = append(p.Deletes, d)
		}
	}
	slices.Sort(p.Deletes)
	p.Copies = slices.Grow(p.Copies, len(pl.copies))
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
func (pl *planState) deletedAncestor(rel string) bool {
	for a := localtree.ParentRel(rel); a != ""; a = localtree.ParentRel(a) {
		if pl.deletes[a] {
			return true
		}
	}
	return false
}

// PlanBytes is the file content a plan sends.
func PlanBytes(p *Plan) int64 {
	var n int64
	for _, c := range p.Copies {
		n += c.Size
	}
	return n
}
