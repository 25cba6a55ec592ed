package filesync

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
)

// massDeleteMin is the mass-delete guard's floor: a plan that deletes more
// than this many remote entries, and more than half of what the target holds
// for the mapping, is held unless AllowMassDelete.
const massDeleteMin = 50

// Hold is what a plan holds back: deletes that are not safe to run now, and
// the copies that depend on them. The target's index keeps its entries, so a
// later batch or rescan decides again.
type Hold struct {
	Reason  string   // why, one line
	Hint    string   // what to do about it
	Deletes []string // rels whose deletion is held (whole trees), sorted
	Copies  []string // rels at or under a held delete whose copy waits too
	Entries int      // remote entries the held deletes would remove
	// same identifies what is held, to say it once: the root's problem, or
	// the set of deletes of a mass delete.
	same string
	// mass: held by the mass-delete verdict alone, which the user may lift
	// (see heldSet); a root problem is lifted only by the root.
	mass bool
}

// guard holds p's deletes when running them could lose files: the local root
// is missing, no longer a directory, or on another device than when the
// mapping was created (an unmount leaving an empty mount point); or, unless
// deletes are allowed en masse, the root is empty while the target holds
// entries, or the deletes would remove more than massDeleteMin entries and
// more than half of total, the entries the target holds. size(rel) counts the
// entries a delete of rel removes; allow is how to allow a mass delete.
//
// Copies still go, except those at or under a held delete: the target still
// has the old entry there (a symlink tar would write through, a file in the
// way of a directory).
//
// total is what the target held before the delete burst under way (see
// deleteBurst), and the deletes are judged with what the burst already
// deleted (pl.prior): a delete cut into several batches (rm -rf under load, a
// slow remover, with a dev server's log written beside it) is held as it
// would be in one.
//
// pl.released lifts the mass-delete verdict for a plan whose deletes are all
// at or under it: the user let exactly those through (see Engine.Release).
func (pl *planner) guard(p *Plan, total int, size func(string) int, allow string) {
	if len(p.Deletes) == 0 || pl.m.file {
		return // a single-file mapping deletes one entry: its own
	}
	n := 0
	released := pl.released != nil
	counted := make(map[string]int, len(p.Deletes))
	for _, d := range p.Deletes {
		counted[d] = size(d)
		n += counted[d]
		released = released && localtree.UnderAny(d, pl.released)
	}
	reason, hint := pl.rootProblem(total)
	same, mass := reason, false
	if burst := n + pl.prior; reason == "" && !pl.m.allowMassDelete && !released && burst > massDeleteMin && 2*burst > total {
		reason = fmt.Sprintf("more than half of the %d entries the container has", total)
		if pl.prior > 0 {
			reason = fmt.Sprintf("with the %d deleted just before, more than half of the %d entries the container had", pl.prior, total)
		}
		hint = "if that is intended, " + allow
		sum := sha256.Sum256([]byte(strings.Join(p.Deletes, "\x00")))
		same, mass = string(sum[:]), true
	}
	if reason == "" {
		p.deleted, p.counted = n, counted
		return
	}
	h := &Hold{Reason: reason, Hint: hint, Deletes: p.Deletes, Entries: n, same: same, mass: mass}
	held := make(map[string]bool, len(h.Deletes))
	for _, d := range h.Deletes {
		held[d] = true
	}
	copies := p.Copies[:0]
	for _, c := range p.Copies {
		if localtree.UnderAny(c.Rel, held) {
			h.Copies = append(h.Copies, c.Rel)
		} else {
			copies = append(copies, c)
		}
	}
	p.Deletes, p.Copies, p.Held = nil, copies, h
}

// rootProblem says why the local root cannot vouch for deletes under it, or
// "" when it can. total is what the target holds for the mapping.
func (pl *planner) rootProblem(total int) (reason, hint string) {
	root := pl.m.root
	fi, err := pl.m.fs().Stat(root)
	if pl.rootGone && err == nil && fi.IsDir() {
		err = fs.ErrNotExist // back already: the next change decides, against what is there then
	}
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return fmt.Sprintf("local root %q is missing", root), "nothing is deleted until it is back"
	case err != nil:
		return fmt.Sprintf("local root %q cannot be checked: %v", root, err), "nothing is deleted until it can be read"
	case !fi.IsDir():
		return fmt.Sprintf("local root %q is no longer a directory", root), "nothing is deleted until it is a directory again"
	}
	if dev, ok := localtree.DeviceOf(fi); ok && pl.m.devKnown && dev != pl.m.dev {
		return fmt.Sprintf("local root %q is on another file system than when livesync started (unmounted?)", root),
			"remount it, or restart livesync to sync what is there now"
	}
	if total > 0 && !pl.m.allowMassDelete && pl.rootEmpty() {
		return fmt.Sprintf("local root %q is empty", root),
			"if it was emptied on purpose, restart with --initial=mirror --allow-mass-delete"
	}
	return "", ""
}

// rootEmpty reports whether the root holds nothing to sync. What cannot be
// read counts as something.
func (pl *planner) rootEmpty() bool {
	names, err := pl.readDir("")
	if err != nil {
		return false
	}
	for _, n := range names {
		st := pl.lstat(n)
		if st.err != nil || st.found && !pl.m.ignored(n, st.e.Type == TypeDir) {
			return false
		}
	}
	return true
}

// guardInitial applies guard to an initial sync's plan p against the
// container listing l, and records the remote entries whose deletion is held
// in idx (the index of what the target has), marked stale: a later batch or
// rescan decides about them again.
func guardInitial(m *mapping, p *Plan, idx *Index, l *listing) {
	if l == nil || len(p.Deletes) == 0 {
		return
	}
	dels := make(map[string]bool, len(p.Deletes))
	for _, d := range p.Deletes {
		dels[d] = true
	}
	sizes := map[string]int{}
	for rel := range l.entries {
		for a := rel; ; a = localtree.ParentRel(a) {
			if dels[a] {
				sizes[a]++
				break
			}
			if a == "" {
				break
			}
		}
	}
	pl := newPlanner(m, idx)
	pl.guard(p, len(l.entries), func(rel string) int { return max(sizes[rel], 1) }, "run again with --allow-mass-delete")
	if p.Held == nil {
		return
	}
	held := map[string]bool{}
	for _, d := range p.Held.Deletes {
		held[d] = true
	}
	for rel, re := range l.entries {
		if localtree.UnderAny(rel, held) {
			idx.Put(rel, Entry{Type: re.Type, Mode: re.Mode, Size: re.Size, MTime: time.Unix(re.MTime, 0), Link: re.Link, stale: true})
		}
	}
}

// keep drops p's deletes at or under kept, and the copies at or under kept:
// what a target holds stays held (see heldSet).
func (p *Plan) keep(kept map[string]bool) {
	if len(kept) == 0 {
		return
	}
	p.Deletes = slices.DeleteFunc(p.Deletes, func(d string) bool { return localtree.UnderAny(d, kept) })
	p.Copies = slices.DeleteFunc(p.Copies, func(c Copy) bool { return localtree.UnderAny(c.Rel, kept) })
}

// commonRel returns the deepest path every one of rels is at or under.
func commonRel(rels []string) string {
	if len(rels) == 0 {
		return ""
	}
	c := rels[0]
	for _, r := range rels[1:] {
		for c != "" && r != c && !strings.HasPrefix(r, c+"/") {
			c = localtree.ParentRel(c)
		}
	}
	return c
}

// deleteBurstGap is how long after a batch's deletes the next batch's count
// with them (see deleteBurst): longer than a batch's cap, so that a remover
// that never pauses is one burst, and short enough that deletes a user makes
// one after the other are judged each on its own.
const deleteBurstGap = 2 * time.Second

// deleteBurst is the deletes a target ran for a mapping in batches that
// followed each other by less than deleteBurstGap, as a remover (rm -rf,
// find -delete, git clean, a branch switch) cut into batches makes them: the
// guard counts them with the next batch's, so that how the watcher cut it
// does not decide whether it is held, and a slow remover whose every batch
// takes less than half of what is left is still held once the burst passes
// the line. What a burst deleted before that is gone (at most massDeleteMin
// entries, or half the mapping); the rest is held and asked about.
//
// What the batches write does not end a burst: a dev server's log or a
// build's output written beside an rm -rf would let it through. The burst
// counts only what the target held before it began, against that: an entry
// one of its batches added (a temp file a tool makes and removes) is neither
// counted nor keeps it going, so a tool that churns its own files cannot
// stretch a burst until everything the user deleted since adds up. Nor is an
// entry counted that its batch writes again elsewhere (see movedAway), and
// what a later batch writes again where the burst deleted (rm -rf dist &&
// tsc) is given back.
type deleteBurst struct {
	last    time.Time       // when the last of its deletes ran or was held
	before  int             // the entries the target held when it began
	entries int             // the entries its deletes removed, of those
	added   map[string]bool // the entries its batches added
	// gone is, per path the burst deleted, the entries it counted there
	// that no later batch wrote again.
	gone map[string]int
}

// burstAt is mapping i's delete burst under way in tg, or nil when there is
// none or its last deletes ran deleteBurstGap or more ago.
func (tg *target) burstAt(i int, now time.Time) *deleteBurst {
	b := tg.deleted[i]
	if b == nil || now.Sub(b.last) >= deleteBurstGap {
		return nil
	}
	return b
}

// ranDeletes records mapping i's batch plan p, once applied, in tg's delete
// burst: deletes it counted add to it (a new burst after a gap), and so does
// a mass delete the guard held, which keeps it going; the entries it added
// are the burst's own.
func (tg *target) ranDeletes(i int, now time.Time, p *Plan) {
	b := tg.burstAt(i, now)
	if b != nil {
		for _, rel := range p.fresh {
			b.giveBack(rel)
		}
	}
	if p.deleted > 0 || p.Held != nil && p.Held.mass {
		if b == nil {
			b = &deleteBurst{before: p.before, added: map[string]bool{}, gone: map[string]int{}}
			if tg.deleted == nil {
				tg.deleted = map[int]*deleteBurst{}
			}
			tg.deleted[i] = b
		}
		b.last, b.entries = now, b.entries+p.deleted
		for d, n := range p.counted {
			b.gone[d] += n
		}
	}
	if b == nil {
		delete(tg.deleted, i)
		return
	}
	for _, rel := range p.fresh {
		b.added[rel] = true
	}
}

// giveBack takes an entry written at rel off b's count when b deleted rel,
// or a path above it, and counted what it deleted there.
func (b *deleteBurst) giveBack(rel string) {
	if a, ok := b.goneAbove(rel, nil); ok {
		b.gone[a]--
		b.entries--
	}
}

// givenBack is how many of the entries written at rels giveBack would take
// off b's count.
func (b *deleteBurst) givenBack(rels []string) int {
	taken := map[string]int{}
	for _, rel := range rels {
		if a, ok := b.goneAbove(rel, taken); ok {
			taken[a]++
		}
	}
	n := 0
	for _, k := range taken {
		n += k
	}
	return n
}

// goneAbove returns the path at or above rel where b counted entries that
// are still gone, less taken.
func (b *deleteBurst) goneAbove(rel string, taken map[string]int) (string, bool) {
	for a := rel; ; a = localtree.ParentRel(a) {
		if b.gone[a]-taken[a] > 0 {
			return a, true
		}
		if a == "" {
			return "", false
		}
	}
}

// moveKey is what tells an entry written elsewhere from a new one without
// reading it: a rename keeps a file's size, mode and mtime (mv, git mv, an
// IDE's move).
type moveKey struct {
	typ   EntryType
	mode  fs.FileMode
	size  int64
	mtime int64
	link  string
}

func moveKeyOf(e Entry) moveKey {
	return moveKey{typ: e.Type, mode: e.Mode, size: e.Size, mtime: e.MTime.UnixNano(), link: e.Link}
}

// movedAway returns the entries of idx under p's deletes that p, or the
// copies ahead of it (early), writes again elsewhere, one for one: a file or
// tree renamed or moved. The guard does not count them: nothing of them is
// lost, and a directory renamed is not a mass delete. A delete the guard
// lets through still runs, and the copies send what was moved.
func movedAway(idx *Index, p *Plan, early map[string]bool) map[string]bool {
	out := map[string]bool{}
	if len(p.Deletes) == 0 || len(p.Copies)+len(early) == 0 {
		return out
	}
	written := map[moveKey]int{}
	for _, c := range p.Copies {
		written[moveKeyOf(c.Entry)]++
	}
	for rel := range early {
		if e, ok := idx.Get(rel); ok {
			written[moveKeyOf(e)]++
		}
	}
	for _, d := range p.Deletes {
		idx.walk(d, func(rel string) {
			e, ok := idx.Get(rel)
			if !ok || early[rel] {
				return
			}
			if k := moveKeyOf(e); written[k] > 0 {
				written[k]--
				out[rel] = true
			}
		})
	}
	return out
}
