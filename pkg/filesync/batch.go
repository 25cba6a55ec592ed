package filesync

import (
	"path"
	"slices"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// pending is what a target has yet to compare under one mapping: the paths
// that changed, as rels, or the whole tree.
type pending struct {
	rels   map[string]struct{}
	rescan bool
	// early holds rels from peeks at a batch still open (see
	// coalesce.Options.PeekEvery): their copies may go ahead; the batch brings them
	// again, with all that may delete.
	early map[string]struct{}
	// first is when the first change of the batches merged here arrived
	// (coalesce.Batch.First; zero: none): the delete guard judges a burst
	// by when its changes came, not by when a loaded machine got to plan
	// them (see syncBatch).
	first time.Time
}

func (p *pending) add(rel string) {
	if p.rels == nil {
		p.rels = map[string]struct{}{}
	}
	p.rels[rel] = struct{}{}
}

func (p *pending) merge(q pending) {
	for rel := range q.rels {
		p.add(rel)
	}
	p.rescan = p.rescan || q.rescan
	for rel := range q.early {
		p.addEarly(rel)
	}
	if !q.first.IsZero() && (p.first.IsZero() || q.first.Before(p.first)) {
		p.first = q.first
	}
}

// judgedAt is when the delete guard judges p's deletes, now at the latest:
// when its first change came (see first).
func (p *pending) judgedAt(now time.Time) time.Time {
	if !p.first.IsZero() && p.first.Before(now) {
		return p.first
	}
	return now
}

func (p *pending) addEarly(rel string) {
	if p.early == nil {
		p.early = map[string]struct{}{}
	}
	p.early[rel] = struct{}{}
}

func (p *pending) has(rel string) bool {
	_, ok := p.rels[rel]
	return ok
}

// copyFirst returns, sorted, the rels whose copies go ahead of the batch's
// plan: the early ones it doesn't plan itself, and with a rescan every hinted
// one (see syncBatch); none when the whole tree is compared after a failure.
func (p *pending) copyFirst(dirty bool) []string {
	if dirty {
		return nil
	}
	var out []string
	for rel := range p.early {
		if _, ok := p.rels[rel]; !ok || p.rescan {
			out = append(out, rel)
		}
	}
	if p.rescan {
		for rel := range p.rels {
			if _, ok := p.early[rel]; !ok {
				out = append(out, rel)
			}
		}
	}
	slices.Sort(out)
	return out
}

// sorted returns the rels in order.
func (p *pending) sorted() []string {
	rels := make([]string, 0, len(p.rels))
	for rel := range p.rels {
		rels = append(rels, rel)
	}
	slices.Sort(rels)
	return rels
}

// batchStat collects a batch's outcome until every target it went to is done.
type batchStat struct {
	first   time.Time
	waiting map[string]bool
	targets int
	out     Batch
}

// dispatch hands a batch to every target and starts waiting for the ready
// ones (targets still in their initial sync get the paths but are not waited for).
func (e *Engine) dispatch(b *coalesce.Batch) {
	due := e.route(b)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	st := &batchStat{first: b.First, waiting: map[string]bool{}}
	for key, tg := range e.targets {
		tg.mu.Lock()
		for i := range due {
			tg.due[i].merge(due[i])
		}
		tg.seqHi = e.seq
		if tg.synced {
			st.waiting[key] = true
		}
		tg.mu.Unlock()
		tg.signal()
	}
	st.targets = len(st.waiting)
	if st.targets > 0 {
		e.inflight[e.seq] = st
	}
}

// dispatchPeek hands the paths of a peek at an open batch to every synced
// target, as early rels: copies they can start on while the batch is still
// open. Not a batch: nothing waits for it or reports it.
func (e *Engine) dispatchPeek(paths []string) {
	due := make([]pending, len(e.maps))
	for _, p := range paths {
		e.routePath(p, func(i int, rel string) { due[i].addEarly(rel) })
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, tg := range e.targets {
		tg.mu.Lock()
		if tg.synced {
			for i := range due {
				tg.due[i].merge(due[i])
			}
		}
		tg.mu.Unlock()
		tg.signal()
	}
}

// routePath calls add with each mapping a path is under, and its rel there.
func (e *Engine) routePath(p string, add func(i int, rel string)) {
	matched := false
	for i, m := range e.maps {
		if rel, ok := localtree.RelTo(m.Root, p); ok {
			add(i, rel)
			matched = true
		}
	}
	if !matched {
		e.log.Debug("dropping a change outside every mapping", "path", p)
	}
}

// route splits a batch by mapping.
func (e *Engine) route(b *coalesce.Batch) []pending {
	due := make([]pending, len(e.maps))
	for i := range due {
		due[i].first = b.First
	}
	for p := range b.Paths {
		e.routePath(p, func(i int, rel string) { due[i].add(rel) })
	}
	for r := range b.Rescans {
		for i, m := range e.maps {
			_, under := localtree.RelTo(m.Root, r)
			_, over := localtree.RelTo(r, m.Root)
			due[i].rescan = due[i].rescan || under || over
		}
	}
	return due
}

// unitResult is what one target did for one batch (or several merged).
type unitResult struct {
	changed, deleted int
	// confirmed counts the entries the container confirmed: copies sent
	// whole, and deletes.
	confirmed int
	names     []string
	bytes     int64
	err       error
}

// plus returns r with q's counts added, and q's error and names where r has
// none.
func (r unitResult) plus(q unitResult) unitResult {
	r.changed += q.changed
	r.deleted += q.deleted
	r.confirmed += q.confirmed
	r.bytes += q.bytes
	if len(r.names) == 0 {
		r.names = q.names
	}
	if r.err == nil {
		r.err = q.err
	}
	return r
}

// doneLocked records that target key finished batch seq.
func (e *Engine) doneLocked(seq uint64, key string, r unitResult) {
	st, ok := e.inflight[seq]
	if !ok || !st.waiting[key] {
		return
	}
	delete(st.waiting, key)
	st.out.Changed = max(st.out.Changed, r.changed)
	st.out.Deleted = max(st.out.Deleted, r.deleted)
	st.out.Bytes += r.bytes
	if len(st.out.Names) == 0 {
		st.out.Names = r.names
	}
	if r.err != nil {
		st.out.Failed++
	}
	if len(st.waiting) == 0 {
		delete(e.inflight, seq)
		st.out.Targets = st.targets
		st.out.Latency = e.clk.Since(st.first)
		// Reported under e.mu so batches are reported in order; the
		// reporter must not call back into the engine.
		e.rep.Report(st.out)
	}
}

// syncBatch plans and applies the pending paths of every mapping; with dirty
// (an earlier batch failed) or rescan, the whole tree is compared.
//
// Early rels (peeks at a batch still open) are planned first, for their
// copies only; deletes wait for the batch, whose plan sees them all at once,
// as the mass-delete guard must. A rescan the watcher asked for (events may
// have been lost: usually a burst of thousands of writes) walks the whole
// tree, which takes about a second per 100,000 files: the copies of the paths
// that were hinted go first too, so that the burst's files don't wait for
// the walk, and the deletes wait for it. The walk itself waits one pass, so
// that the hints still arriving from the burst go before it too; only one,
// so that a steady trickle of changes can't put it off for good.
func (e *Engine) syncBatch(tg *target, due []pending, dirty bool) unitResult {
	var (
		r       unitResult
		changed []string
	)
	for i, m := range e.maps {
		tg.touchHeld(m, i, due[i], due[i].rescan || dirty)
		if first := due[i].copyFirst(dirty); len(first) > 0 {
			p, err := planner.Changes(m, tg.idx[i], first, false)
			if err != nil {
				r.err = err
				return r
			}
			p.CopiesOnly()
			var added []string
			for _, c := range p.Copies {
				if _, ok := tg.idx[i].Get(c.Rel); !ok {
					added = append(added, c.Rel)
				}
			}
			if r.err = e.applyBatchPlan(tg, i, m, p, &r, &changed); r.err != nil {
				return r
			}
			tg.addEarly(i, added)
			if due[i].rescan && e.deferWalk(tg, i) {
				continue
			}
		}
		held := tg.decideHeld(i) // guard.go
		if r.err = e.applyReleased(tg, i, m, held, &r, &changed); r.err != nil {
			return r
		}
		if len(due[i].rels) == 0 && len(held.again) == 0 && !due[i].rescan && !dirty {
			continue
		}
		if due[i].rescan || dirty {
			tg.walkDeferred[i] = false
		}
		if dirty && tg.relist[i] {
			if r.err = e.relist(tg, i, m); r.err != nil {
				return r
			}
		}
		// A burst is judged by when the batch's changes came: a batch planned
		// late (a loaded machine, a slow apply before it) must not cut a
		// remover's deletes into two bursts that each stay under the line
		// (TestModel seeds 10244155657300434128 round 34,
		// 15620430712571607237 round 33: 80 of 149 deletes, 14 in one batch
		// and the rest 4.8 s later, none held).
		judged := due[i].judgedAt(e.clk.Now())
		burst := tg.deleted[i].Ongoing(judged)
		p, err := planner.ChangesWith(m, tg.idx[i], due[i].sorted(), due[i].rescan || dirty,
			planner.Opts{Kept: held.kept, Again: held.again, Early: tg.earlyNew[i], Burst: burst, Skip: e.skips(tg, i, m)})
		if err != nil {
			r.err = err
			return r
		}
		tg.settleEarly(i, due[i], due[i].rescan || dirty)
		e.hold(tg, i, p.Held)
		e.warn(tg, p.Warnings)
		if r.err = e.applyBatchPlan(tg, i, m, p, &r, &changed); r.err != nil {
			return r
		}
		tg.ranDeletes(i, burst, e.clk.Now(), p)
	}
	r.names = changed[:min(len(changed), 5)]
	if len(changed) > 0 {
		e.onSync(tg, changed)
	}
	return r
}

// addEarly records the entries that copies ahead of their batch added to
// mapping i's index (see planOpts).
func (tg *target) addEarly(i int, rels []string) {
	if len(rels) == 0 {
		return
	}
	if tg.earlyNew == nil {
		tg.earlyNew = map[int]map[string]bool{}
	}
	if tg.earlyNew[i] == nil {
		tg.earlyNew[i] = map[string]bool{}
	}
	for _, rel := range rels {
		tg.earlyNew[i][rel] = true
	}
}

// settleEarly forgets the early entries of mapping i whose batch was just
// planned: those among due's rels, and with a rescan's walk (whose hinted
// copies went a pass ahead of it) all but those of peeks at a batch still
// open.
func (tg *target) settleEarly(i int, due pending, walked bool) {
	for rel := range tg.earlyNew[i] {
		if _, open := due.early[rel]; due.has(rel) || walked && !open {
			delete(tg.earlyNew[i], rel)
		}
	}
}

// deferWalk puts mapping i's rescan off to tg's next pass, unless it was put
// off already or the engine is closing (then there is no next pass), and
// reports whether it did.
func (e *Engine) deferWalk(tg *target, i int) bool {
	e.mu.Lock()
	closing := e.closing
	e.mu.Unlock()
	if closing || tg.walkDeferred[i] {
		return false
	}
	tg.walkDeferred[i] = true
	tg.mu.Lock()
	tg.due[i].rescan = true
	tg.mu.Unlock()
	tg.signal()
	return true
}

// applyBatchPlan applies p, mapping i's plan of a batch, and records it in
// tg's index, r and changed.
func (e *Engine) applyBatchPlan(tg *target, i int, m *planner.Resolved, p *planner.Plan, r *unitResult, changed *[]string) error {
	if p.Empty() && len(p.Rmdirs) == 0 {
		// Nothing for the container (a touch, a re-walk, a held delete): no
		// exec, which would only cost a round trip and report a pod going
		// away as an error.
		tg.idx[i].Apply(p, tarstream.Result{})
		return nil
	}
	planner.FindMoves(m, tg.idx[i], p, tg.alg)
	s := &sending{Plan: p, widen: tg.alg == "sha256sum"}
	e.findPatches(tg, i, m, s)
	res, err := e.applyGuarded(tg, i, m, s)
	if err != nil {
		// Not confirmed: the container may have applied all of it, some of
		// it or none (a lost ack, a tar error after the deletes ran). See
		// Index. It may hold what any try carried.
		n := 0
		for _, sent := range s.tried {
			n = max(n, tg.idx[i].Unconfirm(p, sent))
		}
		if len(s.tried) == 0 {
			n = tg.idx[i].Unconfirm(p, s.sent(res))
		}
		if n >= relistMin {
			if tg.relist == nil {
				tg.relist = map[int]bool{}
			}
			tg.relist[i] = true
		}
		e.requeue(tg, i, res.forgetReplaced(tg.idx[i]))
		return err
	}
	tg.idx[i].Apply(p, res.Result)
	e.warn(tg, res.Warnings)
	e.requeue(tg, i, res.Raced)
	e.requeue(tg, i, res.forgetReplaced(tg.idx[i]))
	r.changed += len(p.Copies)
	r.deleted += len(p.Deletes)
	r.confirmed += res.Files + len(p.Deletes)
	r.bytes += res.Bytes
	*changed = append(*changed, remotePaths(m, p)...)
	return nil
}

// relistMin is how many entries a failed apply must leave stale before the
// container is listed again ahead of the next compare (see relist): below
// it, sending them again costs less than a listing that hashes the tree.
const relistMin = 256

// relist settles mapping i's stale entries in tg against a fresh listing of
// the container (see Index.reconcile): after a failed apply of a large plan
// (a rescan's), the container's own word on what it holds saves sending it
// all again.
func (e *Engine) relist(tg *target, i int, m *planner.Resolved) error {
	var l *planner.Listing
	lex := e.exec.Within(remote.ListLimit(e.cfg.ExecTimeout, tg.idx[i].Bytes()))
	err := e.retry.Do(tg.ctx, e.clk, func() (err error) {
		l, err = planner.ListRemote(tg.ctx, lex, tg.Target, m, false)
		return err
	})
	if err != nil {
		return err
	}
	tg.idx[i].Reconcile(m, l)
	delete(tg.relist, i)
	return nil
}

// ranDeletes records mapping i's batch plan p, once applied at now, in
// burst, tg's delete burst as the plan was judged with (see
// planner.DeleteBurst): an apply that took longer than the gap does not end
// it.
func (tg *target) ranDeletes(i int, burst *planner.DeleteBurst, now time.Time, p *planner.Plan) {
	b := burst.Ran(now, p)
	if b == nil {
		delete(tg.deleted, i)
		return
	}
	if tg.deleted == nil {
		tg.deleted = map[int]*planner.DeleteBurst{}
	}
	tg.deleted[i] = b
}

// requeue marks files that changed while being archived for another pass,
// which process starts once this one is over (see there).
func (e *Engine) requeue(tg *target, i int, raced map[string]struct{}) {
	if len(raced) == 0 {
		return
	}
	tg.mu.Lock()
	for rel := range raced {
		tg.due[i].add(rel)
	}
	tg.mu.Unlock()
	tg.requeued = true
}

// remotePaths returns the absolute remote paths a plan touches.
func remotePaths(m *planner.Resolved, p *planner.Plan) []string {
	out := make([]string, 0, len(p.Copies)+len(p.Deletes))
	for _, d := range p.Deletes {
		out = append(out, path.Join(string(m.RemoteDir()), m.RemoteName(d)))
	}
	for _, c := range p.Copies {
		out = append(out, path.Join(string(m.RemoteDir()), c.Name))
	}
	return out
}
