package filesync

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
)

// hold reports a plan's held deletes in tg (for mapping i), once per root
// problem or distinct mass delete. A root problem's paths stay pending without
// waking the target: the next batch or rescan decides again, and nothing
// loops meanwhile. A mass delete is remembered as a heldSet instead. A nil h
// clears the root problem last said.
func (e *Engine) hold(tg *target, i int, h *planner.Hold) {
	m := e.maps[i]
	id := ""
	tg.mu.Lock()
	if tg.held == nil {
		tg.held = map[int]string{}
	}
	var repeat bool
	switch {
	case h != nil && h.Mass():
		sum := sha256.Sum256([]byte(fmt.Sprint(i, "\x00", h.Same())))
		id = fmt.Sprintf("%x", sum[:8])
		// The same set decided again (by more events of the same rm -rf)
		// is the same question: said once, and held as before (decideHeld
		// took it out for the plan that decided it).
		present := slices.ContainsFunc(tg.mass[i], func(s *heldSet) bool { return s.id == id })
		repeat = present || tg.redecided[id]
		if !present {
			if tg.mass == nil {
				tg.mass = map[int][]*heldSet{}
			}
			tg.mass[i] = append(tg.mass[i], newHeldSet(id, h))
		}
		tg.held[i] = ""
	default:
		key := ""
		if h != nil {
			key = h.Same()
			for _, rel := range slices.Concat(h.Deletes, h.Copies) {
				tg.due[i].add(rel)
			}
		}
		repeat = tg.held[i] == key
		tg.held[i] = key
	}
	tg.mu.Unlock()
	if h == nil || repeat {
		return
	}
	ev := Held{Target: tg.Target, Mapping: m.Mapping, Reason: h.Reason, Hint: h.Hint, Deleted: h.Entries, ID: id}
	if id != "" {
		ev.Under = filepath.Join(string(m.Local), filepath.FromSlash(planner.CommonRel(h.Deletes)))
	}
	for _, d := range h.Deletes[:min(len(h.Deletes), 3)] {
		ev.Examples = append(ev.Examples, path.Join(string(m.RemoteDir()), m.RemoteName(d)))
	}
	e.rep.Report(ev)
}

// heldSet is a mass delete a target holds for one mapping. Its paths are not
// planned again while it is held, whatever a later plan's guard would say of
// them (the mapping may grow until they are no longer "more than half"): only
// a local change at or under them (touched) or the user's answer (released,
// see Engine.Release) has them decided again.
type heldSet struct {
	id                string
	deletes           map[string]bool
	paths             []string // the held deletes and the copies that wait on them
	touched, released bool
}

func newHeldSet(id string, h *planner.Hold) *heldSet {
	s := &heldSet{id: id, deletes: make(map[string]bool, len(h.Deletes)), paths: slices.Concat(h.Deletes, h.Copies)}
	for _, d := range h.Deletes {
		s.deletes[d] = true
	}
	return s
}

// touchHeld marks the sets mapping i holds in tg that due's changes are at
// or under: the next plan of the mapping decides them again. A walk
// (walked: a rescan, or a compare after a failure) or a directory's event
// above held paths names none of them, yet it is news of them: a held path
// that exists again locally is a change at it (a directory made again, its
// files written before the watcher could name them), and its set is
// decided again too. Without that the set, and sync-back's passes, stayed
// held for good.
func (tg *target) touchHeld(m *planner.Resolved, i int, due pending, walked bool) {
	tg.mu.Lock()
	var look []*heldSet
	for _, s := range tg.mass[i] {
		for rel := range due.rels {
			if s.touched {
				break
			}
			s.touched = localtree.UnderAny(rel, s.deletes)
		}
		if !s.touched {
			look = append(look, s)
		}
	}
	tg.mu.Unlock()
	for _, s := range look {
		back := false
		for d := range s.deletes {
			if (walked || underRels(d, due.rels)) && exists(m.LocalPath(d)) {
				back = true
				break
			}
		}
		if back {
			tg.mu.Lock()
			s.touched = true
			tg.mu.Unlock()
		}
	}
}

// underRels reports whether a parent of rel is among rels.
func underRels(rel string, rels map[string]struct{}) bool {
	if len(rels) == 0 {
		return false
	}
	for a := rel; a != ""; {
		a = localtree.ParentRel(a)
		if _, ok := rels[a]; ok {
			return true
		}
	}
	return false
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// heldDecision is what the sets a target holds for a mapping mean for its
// next plan (see decideHeld).
type heldDecision struct {
	kept     map[string]bool // held deletes that stay held
	again    []string        // paths of touched sets, to plan with the batch
	released map[string]bool // held deletes the user let through
	hints    []string        // paths of the released sets
}

// decideHeld takes the touched and released sets mapping i holds in tg out of
// it, for the plan about to decide them, and says what the others keep held.
func (tg *target) decideHeld(i int) heldDecision {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	var (
		d    heldDecision
		left []*heldSet
	)
	tg.redecided = nil
	for _, s := range tg.mass[i] {
		if s.released || s.touched {
			if tg.redecided == nil {
				tg.redecided = map[string]bool{}
			}
			tg.redecided[s.id] = true
		}
		switch {
		case s.released:
			if d.released == nil {
				d.released = map[string]bool{}
			}
			maps.Copy(d.released, s.deletes)
			d.hints = append(d.hints, s.paths...)
		case s.touched:
			d.again = append(d.again, s.paths...)
		default:
			if d.kept == nil {
				d.kept = map[string]bool{}
			}
			maps.Copy(d.kept, s.deletes)
			left = append(left, s)
		}
	}
	if len(tg.mass[i]) > 0 {
		tg.mass[i] = left
	}
	slices.Sort(d.hints)
	return d
}

// applyReleased plans and applies in tg the held deletes of mapping i that
// the user let through, checked again against the local tree as it is now: a
// held path that exists again is not deleted, and every other guard still
// holds; only the mass-delete verdict is lifted, for those paths alone.
func (e *Engine) applyReleased(tg *target, i int, m *planner.Resolved, d heldDecision, r *unitResult, changed *[]string) error {
	if d.released == nil {
		return nil
	}
	p, err := planner.ChangesWith(m, tg.idx[i], nil, false, planner.Opts{Kept: d.kept, Again: d.hints, Released: d.released})
	if err != nil {
		return err
	}
	e.hold(tg, i, p.Held)
	e.warn(tg, p.Warnings)
	return e.applyBatchPlan(tg, i, m, p, r, changed)
}

// Release lets through the mass delete that Held events with this ID
// reported, in every target that still holds it: its paths are planned again
// against the local tree as it is then (a held path that exists again is not
// deleted), with every other guard in force; only the mass-delete verdict is
// lifted, and only for deletes at or under the held paths. The outcome is
// reported as a Batch. It returns how many targets held it. Safe for
// concurrent use, but not from a Reporter.
func (e *Engine) Release(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	st := &batchStat{first: e.clk.Now(), waiting: map[string]bool{}}
	n := 0
	for key, tg := range e.targets {
		tg.mu.Lock()
		found := false
		for _, sets := range tg.mass {
			for _, s := range sets {
				if s.id == id {
					s.released, found = true, true
				}
			}
		}
		if found {
			n++
			tg.seqHi = e.seq
			if tg.synced {
				st.waiting[key] = true
			}
		}
		tg.mu.Unlock()
		if found {
			tg.signal()
		}
	}
	st.targets = len(st.waiting)
	if st.targets > 0 {
		e.inflight[e.seq] = st
	}
	return n
}

// holding reports whether tg holds deletes back in any mapping.
func (tg *target) holding() bool {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	for _, k := range tg.held {
		if k != "" {
			return true
		}
	}
	for _, sets := range tg.mass {
		if len(sets) > 0 {
			return true
		}
	}
	return false
}
