package planner

import (
	"slices"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// Apply records a successfully applied plan: deletes first, then copies, so a
// type change leaves the new entry.
func (x *Index) Apply(p *Plan, res tarstream.Result) {
	for _, d := range p.Deletes {
		x.DeleteTree(d)
	}
	for _, c := range p.Copies {
		if _, ok := res.Unreadable[c.Rel]; ok {
			continue // never sent: the target has what it had
		}
		e := c.Entry
		if s, ok := res.Sums[c.Rel]; ok {
			e.Sum = s
		}
		_, raced := res.Raced[c.Rel]
		var may []*[32]byte
		if raced {
			// Sent again, and checked against what the target holds
			// (see Maybe): what the entry carried, or, where none went
			// out, what the target held before. Before, the entry knew
			// nothing and the next upload went unchecked, over a container
			// write made in between.
			switch s, ok := res.Carried[c.Rel]; {
			case ok && c.Type == TypeFile:
				may = []*[32]byte{s}
			case c.Type == TypeFile:
				may, _ = x.held(c.Rel)
			}
			e.stale, e.Sum = true, nil
		}
		x.Put(c.Rel, e)
		if len(may) > 0 {
			if x.maybe == nil {
				x.maybe = map[string][]*[32]byte{}
			}
			x.maybe[c.Rel] = may
		}
	}
	for rel, e := range p.Touched {
		x.Put(rel, e)
	}
}

// held returns what the target may hold at rel as the index knows it: the
// confirmed sum, nothing (nil) where the index has no entry, or what Maybe
// says of a stale file; false where that is not known.
func (x *Index) held(rel string) ([]*[32]byte, bool) {
	e, ok := x.Get(rel)
	switch {
	case !ok:
		return []*[32]byte{nil}, true
	case e.Type != TypeFile:
		return nil, false
	case !e.stale && e.Sum != nil:
		return []*[32]byte{e.Sum}, true
	case e.stale:
		return x.Maybe(rel)
	}
	return nil, false
}

// Unconfirm records a plan that was sent but not confirmed: the target may
// hold any mix of the state before and after it. Every entry a delete would
// have removed, and every copied path, is marked stale; a copied path the
// index lacked is recorded stale too, so a local delete meanwhile still
// reaches the target. A path the plan both deleted and copied (a type
// change) may now be either type there: only it is kept, marked retype, so
// the next plan removes it whole before sending what is local then. It
// returns how many entries it marked.
//
// sent holds, by rel, the content each copy carried, where it is known (the
// archive's hashes, a patch's result): a file whose confirmed content was
// known then may hold either after it, which Maybe says, so that the next
// upload can still be checked against what the container may hold there
// rather than against nothing.
func (x *Index) Unconfirm(p *Plan, sent map[string]*[32]byte) int {
	// What each file may hold: what it was confirmed to hold (or what an
	// earlier failed plan left it maybe holding), and what this plan sent.
	before := map[string][]*[32]byte{}
	known := x.held
	for _, c := range p.Copies {
		if c.Type != TypeFile || sent[c.Rel] == nil {
			continue
		}
		if b, ok := known(c.Rel); ok {
			before[c.Rel] = appendSum(slices.Clone(b), sent[c.Rel])
		}
	}
	for _, d := range p.Deletes {
		x.Walk(d, func(rel string) {
			if _, copied := before[rel]; copied {
				return
			}
			if b, ok := known(rel); ok && len(b) > 0 {
				before[rel] = appendSum(slices.Clone(b), nil)
			}
		})
	}
	defer func() {
		for rel, sums := range before {
			if e, ok := x.Get(rel); ok && e.stale && !e.retype && e.Type == TypeFile && len(sums) <= maxMaybe {
				if x.maybe == nil {
					x.maybe = map[string][]*[32]byte{}
				}
				x.maybe[rel] = sums
			}
		}
	}()
	n := 0
	mark := func(rel string) {
		if e, ok := x.Get(rel); ok && !e.stale {
			e.stale, e.Sum = true, nil
			x.Put(rel, e)
			n++
		}
	}
	deleted := make(map[string]bool, len(p.Deletes))
	for _, d := range p.Deletes {
		deleted[d] = true
	}
	retyped := map[string]bool{}
	for _, c := range p.Copies {
		if deleted[c.Rel] {
			retyped[c.Rel] = true
			e := c.Entry
			e.stale, e.retype, e.Sum = true, true, nil
			x.DeleteTree(c.Rel)
			x.Put(c.Rel, e)
			n++
		}
	}
	for _, d := range p.Deletes {
		if !retyped[d] {
			x.Walk(d, mark)
		}
	}
	for _, c := range p.Copies {
		if localtree.UnderAny(c.Rel, retyped) {
			continue
		}
		if x.has(c.Rel) {
			mark(c.Rel)
			continue
		}
		e := c.Entry
		e.stale, e.Sum = true, nil
		x.Put(c.Rel, e)
		n++
	}
	return n
}

// Reconcile settles x's stale entries against l, a listing of the target
// taken after an apply whose outcome is unknown: an entry the container
// lacks is forgotten with what is under it (a local one is then sent as
// new); one it holds as the local side has it now is confirmed with the
// local metadata; any other stays stale. Entries that are not stale are the
// container's confirmed word already and stay as they are.
func (x *Index) Reconcile(m *Resolved, l *Listing) {
	pl := newPlanState(m, x) // for its Lstat, once for all entries
	var stale []string       // x changes below: not while it is ranged over
	for rel, e := range x.all() {
		if e.stale {
			stale = append(stale, rel)
		}
	}
	for _, rel := range stale {
		e, ok := x.Get(rel)
		if !ok || !e.stale {
			continue // gone with a directory above it
		}
		re, ok := l.Entries[rel]
		if !ok {
			if rel != "" {
				x.DeleteTree(rel)
			}
			continue
		}
		st := pl.lstat(rel)
		le := st.e
		if st.err != nil || !st.found || le.Type != re.Type || re.Type != e.Type {
			continue
		}
		if matchesRemote(m, rel, &le, re, l.Alg, nil) {
			x.Put(rel, le)
		}
	}
}

// appendSum adds sum to sums unless it is there already (nil: nothing).
func appendSum(sums []*[32]byte, sum *[32]byte) []*[32]byte {
	for _, s := range sums {
		if s == sum || s != nil && sum != nil && *s == *sum {
			return sums
		}
	}
	return append(sums, sum)
}
