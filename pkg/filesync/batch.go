package filesync

import (
	"path"
	"slices"
	"time"
)

// pending is what a target has yet to compare under one mapping: the paths
// that changed, as rels, or the whole tree.
type pending struct {
	rels   map[string]struct{}
	rescan bool
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
func (e *Engine) dispatch(b *batch) {
	due := e.route(b)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	st := &batchStat{first: b.first, waiting: map[string]bool{}}
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

// route splits a batch by mapping.
func (e *Engine) route(b *batch) []pending {
	due := make([]pending, len(e.maps))
	for p := range b.paths {
		matched := false
		for i, m := range e.maps {
			if rel, ok := relTo(m.root, p); ok {
				due[i].add(rel)
				matched = true
			}
		}
		if !matched {
			e.log.Debug("dropping a change outside every mapping", "path", p)
		}
	}
	for r := range b.rescans {
		for i, m := range e.maps {
			_, under := relTo(m.root, r)
			_, over := relTo(r, m.root)
			due[i].rescan = due[i].rescan || under || over
		}
	}
	return due
}

// unitResult is what one target did for one batch (or several merged).
type unitResult struct {
	changed, deleted int
	names            []string
	bytes            int64
	err              error
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
func (e *Engine) syncBatch(tg *target, due []pending, dirty bool) unitResult {
	var (
		r       unitResult
		changed []string
	)
	for i, m := range e.maps {
		if len(due[i].rels) == 0 && !due[i].rescan && !dirty {
			continue
		}
		p, err := plan(m, tg.idx[i], due[i].sorted(), due[i].rescan || dirty)
		if err != nil {
			r.err = err
			return r
		}
		e.hold(tg, i, p.Held)
		e.warn(tg, p.Warnings)
		if p.Empty() && len(p.Rmdirs) == 0 {
			// Nothing for the container (a touch, a re-walk, a held
			// delete): no exec, which would only cost a round trip and
			// report a pod going away as an error.
			tg.idx[i].apply(p, archiveResult{})
			continue
		}
		res, err := e.applyPlan(tg.ctx, e.exec, tg.Target, m, p, false, nil)
		if err != nil {
			e.requeue(tg, i, res.forgetReplaced(tg.idx[i]))
			r.err = err
			return r
		}
		tg.idx[i].apply(p, res.archiveResult)
		e.warn(tg, res.warnings)
		e.requeue(tg, i, res.raced)
		e.requeue(tg, i, res.forgetReplaced(tg.idx[i]))
		r.changed += len(p.Copies)
		r.deleted += len(p.Deletes)
		r.bytes += res.bytes
		changed = append(changed, remotePaths(m, p)...)
	}
	r.names = changed[:min(len(changed), 5)]
	if len(changed) > 0 {
		e.onSync(tg, changed)
	}
	return r
}

// requeue marks files that changed while being archived for another pass.
func (e *Engine) requeue(tg *target, i int, raced map[string]struct{}) {
	if len(raced) == 0 {
		return
	}
	tg.mu.Lock()
	for rel := range raced {
		tg.due[i].add(rel)
	}
	tg.mu.Unlock()
	tg.signal()
}

// remotePaths returns the absolute remote paths a plan touches.
func remotePaths(m *mapping, p *Plan) []string {
	out := make([]string, 0, len(p.Copies)+len(p.Deletes))
	for _, d := range p.Deletes {
		out = append(out, path.Join(string(m.remoteDir()), m.remoteName(d)))
	}
	for _, c := range p.Copies {
		out = append(out, path.Join(string(m.remoteDir()), c.Name))
	}
	return out
}
