package planner

import (
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
		if _, raced := res.Raced[c.Rel]; raced {
			e.stale, e.Sum = true, nil
		}
		x.Put(c.Rel, e)
	}
	for rel, e := range p.Touched {
		x.Put(rel, e)
	}
}

// Unconfirm records a plan that was sent but not confirmed: the target may
// hold any mix of the state before and after it. Every entry a delete would
// have removed, and every copied path, is marked stale; a copied path the
// index lacked is recorded stale too, so a local delete meanwhile still
// reaches the target. A path the plan both deleted and copied (a type
// change) may now be either type there: only it is kept, marked retype, so
// the next plan removes it whole before sending what is local then. It
// returns how many entries it marked.
func (x *Index) Unconfirm(p *Plan) int {
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
	for rel, e := range x.all() {
		if !e.stale {
			continue
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
		if matchesRemote(m, rel, &le, re, l.Alg) {
			x.Put(rel, le)
		}
	}
}
