package filesync

import (
	"context"
	"errors"
	"maps"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncstate"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
	"github.com/livesync-dev/kubectl-livesync/pkg/threeway"
	"k8s.io/utils/clock"
)

// retryAfter is how long a target whose sync failed waits before trying
// again by itself (doubling up to maxRetryAfter). Any new batch also retries
// it. Failures that look permanent are retried too: an apiserver that just
// restarted answers "forbidden" until its RBAC cache is warm, and a kubelet
// that just restarted says "pod does not exist"; while the tracker keeps the
// target, only a later try can tell. The same error is reported once.
const (
	retryAfter    = 2 * time.Second
	maxRetryAfter = 30 * time.Second
)

// stallAfter is how long a target waits after a pass that confirmed nothing
// and put what it planned back for another pass (every file it sent changed
// while it was read), doubling up to maxRetryAfter while that goes on.
const stallAfter = 100 * time.Millisecond

// target is one target's state. idx and the fields above mu are owned by
// the target's worker goroutine.
type target struct {
	Target
	idx     []*planner.Index
	ctx     context.Context
	cancel  context.CancelFunc
	wake    chan struct{}
	visits  chan func() // see Engine.Visit
	backoff time.Duration
	runner  runners // after-sync runs: --on-sync, AfterSync
	// gzip: the container's `gzip -dc` works, and alg: its hash tool, as
	// its listing said (see batchGzip, findMoves).
	gzip bool
	alg  string
	// early is what passes that no batch waited for sent (copies ahead of
	// their batch), for the next batch's report.
	early unitResult
	// walkDeferred is, per mapping, whether a rescan's walk already waited
	// one pass behind the hinted paths (see syncBatch).
	walkDeferred []bool
	// earlyNew is, per mapping, what copies ahead of their batch added to
	// the index until that batch is planned (see planOpts).
	earlyNew map[int]map[string]bool
	// deleted is, per mapping, the delete burst under way (see deleteBurst).
	deleted map[int]*planner.DeleteBurst
	// relist is, per mapping, whether a failed apply left so much of the
	// index stale that the container is listed before the next compare.
	relist map[int]bool
	// failures counts the failed tries since the last success, the first at failedAt.
	failures int
	failedAt time.Time
	// requeued: this pass put paths back for another (see requeue).
	requeued bool
	// stall is the wait after the last pass that requeued without
	// confirming anything (see process).
	stall time.Duration
	// savedGen is, per mapping, the index generation last handed to the
	// engine's Ancestry (see save).
	savedGen []uint64
	// savedAt is when the index was last handed over; saveWake, whether a
	// timer will wake the worker to hand over what changed since (see save).
	savedAt  time.Time
	saveWake atomic.Bool

	mu      sync.Mutex
	due     []pending // per mapping, merged from the batches up to seqHi
	seqHi   uint64    // highest batch merged into due
	synced  bool      // initial sync done: idx is valid
	dirty   bool      // a batch failed: compare the whole tree next time
	lastErr string    // the last reported error, to report each once

	// held is, per mapping, the root problem last reported (see Engine.hold);
	// mass, the mass deletes held (see heldSet); redecided, the IDs of those
	// the plan under way decides again.
	held      map[int]string
	mass      map[int][]*heldSet
	redecided map[string]bool
}

func (tg *target) signal() {
	select {
	case tg.wake <- struct{}{}:
	default:
	}
}

// work is tg's worker: it processes what is pending whenever tg is woken or
// its backoff runs out, until tg is removed or the engine closes.
func (e *Engine) work(tg *target) {
	defer e.wg.Done()
	defer tg.runner.close()
	for {
		var (
			timer  clock.Timer
			retryC <-chan time.Time
		)
		if tg.backoff > 0 {
			timer = e.clk.NewTimer(tg.backoff)
			retryC = timer.C()
		}
		var visit func()
		select {
		case <-tg.ctx.Done():
		case <-tg.wake:
		case <-retryC:
		case visit = <-tg.visits:
		}
		if timer != nil {
			timer.Stop()
		}
		if visit != nil {
			visit()
			e.save(tg, false)
			continue
		}
		if tg.ctx.Err() != nil {
			if e.runCtx.Err() != nil {
				e.save(tg, true) // the session ends: what was confirmed last
			}
			return
		}
		e.mu.Lock()
		closing := e.closing
		e.mu.Unlock()
		_ = e.process(tg)   // reported by process; a failure is retried on backoff
		e.save(tg, closing) // the last pass of a closing engine saves what it confirmed
		if closing {
			return
		}
	}
}

// process does whatever tg has pending: its initial sync, a re-sync after a
// failure, or the merged paths of the batches since the last call. It returns
// the sync's error, or tg.ctx's once that ended it (nothing is reported then).
func (e *Engine) process(tg *target) error {
	tg.mu.Lock()
	due, seq := tg.due, tg.seqHi
	tg.due = make([]pending, len(e.maps))
	synced, dirty := tg.synced, tg.dirty
	tg.mu.Unlock()

	var (
		r       unitResult
		initial InitialSync
	)
	if !synced {
		initial, r.err = e.initialSync(tg.ctx, tg)
	} else {
		r = e.syncBatch(tg, due, dirty)
	}
	if err := tg.ctx.Err(); err != nil {
		return err // removed or shutting down: nothing to report
	}
	var recovered *Recovered
	requeued := tg.requeued
	tg.requeued = false
	if r.err != nil {
		tg.backoff = min(max(2*tg.backoff, retryAfter), maxRetryAfter)
		if tg.failures == 0 {
			tg.failedAt = e.clk.Now()
		}
		tg.failures++
	} else {
		tg.backoff = 0
		if tg.failures > 0 {
			recovered = &Recovered{Target: tg.Target, Failures: tg.failures, Duration: e.clk.Since(tg.failedAt)}
			tg.failures = 0
		}
		switch {
		case !requeued:
			tg.stall = 0
		case synced && r.confirmed == 0:
			// Everything this pass sent changed while it was read, or
			// vanished: no pass may requeue itself without progress as
			// fast as the apiserver answers. A change event still wakes
			// it at once.
			tg.backoff = min(max(2*tg.stall, stallAfter), maxRetryAfter)
			tg.stall = tg.backoff
		default:
			tg.stall = 0
			tg.signal()
		}
	}
	tg.mu.Lock()
	switch {
	case r.err == nil:
		tg.synced, tg.dirty, tg.lastErr = true, false, ""
	case synced:
		tg.dirty = true
	}
	tg.mu.Unlock()
	if recovered != nil {
		e.rep.Report(*recovered) // the errors said it failed: say it is over
	}
	switch {
	case r.err != nil:
		e.reportErr(tg, r.err, !synced)
	case !synced:
		e.rep.Report(initial)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	seqs := make([]uint64, 0, len(e.inflight))
	for s := range e.inflight {
		if s <= seq {
			seqs = append(seqs, s)
		}
	}
	slices.Sort(seqs)
	waited := false
	for _, s := range seqs {
		waited = waited || e.inflight[s].waiting[tg.String()]
	}
	if !waited {
		// Copies that went ahead of their batch (see syncBatch): counted
		// in the report of the batch that brings them.
		if r.err == nil {
			tg.early = tg.early.plus(r)
		}
		return r.err
	}
	r, tg.early = tg.early.plus(r), unitResult{}
	for i, s := range seqs {
		// Batches merged into this pass: the first one's report counts
		// what it did, the later ones' only whether it failed (counted
		// in each, a merged pass doubled every total).
		if i > 0 {
			r = unitResult{err: r.err}
		}
		e.doneLocked(s, tg.String(), r)
	}
	return r.err
}

// listed is a listing and how it ended.
type listed struct {
	l   *planner.Listing
	err error
}

// saveEvery is how often at most a worker hands its index to the Ancestry
// while the session runs: each hand-over copies the whole index, which for
// a tree of 100,000 entries cost a 10,000-file burst 250 ms more and the
// process 45 MiB more at its peak when it came after every pass (run J in
// test/bench/PERFORMANCE.md). The Ancestry writes no more often anyway.
const saveEvery = 2 * time.Second

// save hands tg's index to the engine's Ancestry when it changed since
// the last time; on tg's worker, between passes, so every entry is what
// the container confirmed (see Index). Never in a dry run, nor before the
// initial sync converged. Unless final (the session or Once ends), at most
// every saveEvery: a change in between is handed over when a timer wakes
// the worker at the end of the interval. A saved ancestor older than the
// last pass is safe: the next start finds more paths changed on a side,
// which it sends, keeps or calls a conflict, never deletes on its word.
func (e *Engine) save(tg *target, final bool) {
	if e.anc == nil || e.cfg.DryRun || tg.idx == nil {
		return
	}
	same := len(tg.savedGen) == len(tg.idx)
	for i, x := range tg.idx {
		same = same && tg.savedGen[i] == x.Gen()
	}
	if same {
		return
	}
	if wait := saveEvery - time.Since(tg.savedAt); !final && !tg.savedAt.IsZero() && wait > 0 {
		// Real time, not the engine's clock: a resource bound, not part of
		// what a test steps.
		if tg.saveWake.CompareAndSwap(false, true) {
			time.AfterFunc(wait, func() {
				tg.saveWake.Store(false)
				tg.signal()
			})
		}
		return
	}
	tg.savedAt = time.Now()
	recs := make([]syncstate.Mapping, len(tg.idx))
	tg.savedGen = make([]uint64, len(tg.idx))
	for i, x := range tg.idx {
		recs[i], tg.savedGen[i] = x.Records(), x.Gen()
	}
	e.anc.Confirmed(tg.Target, recs)
}

// initialSync compares each mapping with the container and sends the
// difference, then replaces tg's index. Callers report the outcome (after
// recording it, so events never run ahead of the state).
func (e *Engine) initialSync(ctx context.Context, tg *target) (InitialSync, error) {
	start := e.clk.Now()
	ev := InitialSync{Target: tg.Target}
	e.streams.Warm(ctx, tg.Target) // open it while listing
	idxs := make([]*planner.Index, len(e.maps))
	var (
		changed []string
		checked string // under DryRun: the transport a preflight found
		st      = Start{From: StartNone}
	)
	if e.anc != nil {
		st = e.anc.Start(tg.Target)
	}
	trust := st.SavedAt.Add(-time.Second)
	meter := &startMeter{clk: e.clk, start: start, target: tg.Target, report: func(p Progress) { e.rep.Report(p) }}
	metered := make(chan struct{})
	defer close(metered)
	go meter.run(metered)
	err := func() error {
		for i, m := range e.maps {
			savedRecs, cacheRecs := st.mapping(i)
			if e.cfg.Initial != planner.InitialUpload && !savedRecs.IsZero() {
				savedRecs, cacheRecs = syncstate.Mapping{}, savedRecs // mirror and none: the local side decides
			}
			var early chan listed
			if !savedRecs.IsZero() && !e.cfg.DryRun {
				// A listing without hashes prints as it goes and needs no
				// local sizes for its deadline: it runs while the local tree
				// is walked.
				early = make(chan listed, 1)
				go func() {
					var r listed
					lex := e.exec.Within(remote.ListLimit(e.cfg.ExecTimeout, 0))
					r.err = e.retry.Do(ctx, e.clk, func() (err error) {
						r.l, err = planner.ListRemote(ctx, lex, tg.Target, m, true)
						return err
					})
					early <- r
				}()
			}
			ixs := indexes(savedRecs, cacheRecs)
			local, warns, err := planner.LocalTreeMeter(m, &meter.Meter, max(savedRecs.Len(), cacheRecs.Len()))
			x := <-ixs
			saved, cache := x[0], x[1]
			if err != nil {
				if early != nil {
					<-early
				}
				return err
			}
			e.warn(tg, warns)
			var pf *Preflight
			if e.cfg.DryRun {
				if pf = e.preflight(ctx, tg.Target, m); ctx.Err() != nil {
					return ctx.Err()
				}
				if pf.Err == nil {
					checked = pf.Transport
				}
			}
			if e.cfg.Initial == planner.InitialNone {
				idxs[i] = planner.NewIndex()
				for rel, le := range local.Entries {
					idxs[i].Put(rel, le)
				}
				if pf != nil {
					e.reportDryRun(tg.Target, m, &planner.Plan{}, pf)
				}
				continue
			}
			var l *planner.Listing
			if early != nil {
				r := <-early
				l, err = r.l, r.err
			} else if pf != nil && pf.Err != nil {
				// The listing would fail alike, and a helper that a dry run
				// does not add would be asked for again.
				err = pf.Err
			} else {
				lex := e.exec.Within(remote.ListLimit(e.cfg.ExecTimeout, planner.TreeBytes(local.Entries)))
				err = e.retry.Do(ctx, e.clk, func() (err error) {
					l, err = planner.ListRemote(ctx, lex, tg.Target, m, saved != nil)
					return err
				})
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				e.log.Info("listing failed; sending everything", "target", tg.String(), "remote", m.Remote, "err", err)
				l = nil
			}
			if l != nil {
				tg.gzip, tg.alg = l.Gzip, l.Alg
				meter.remote.Add(int64(len(l.Entries)))
			}
			var (
				p       *planner.Plan
				idx     *planner.Index
				decided map[string]threeway.Action
			)
			if saved != nil && l != nil {
				if err := planner.StartConflict(m, l); err != nil {
					return err
				}
				if err := e.hashUnsure(ctx, tg.Target, m, l, saved); err != nil {
					return err
				}
				p, idx, decided = planner.ThreeWay(m, local, l, saved, trust, e.listedIn(tg.Target, i))
			} else {
				if saved != nil {
					cache = saved // the listing failed: today's start, hashes spared
				}
				planner.ApplyCache(m, local, cache, trust)
				var theirs func(string, remote.Entry) bool
				if e.cfg.Initial == planner.InitialUpload && !st.Started.IsZero() {
					listed, started := e.listedIn(tg.Target, i), st.Started.Unix()
					theirs = func(rel string, re remote.Entry) bool { return re.MTime > started && listed(rel, false) }
				}
				p, idx, err = planner.InitialWith(m, local, l, e.cfg.Initial, theirs)
				if err != nil {
					return err
				}
			}
			if e.anc != nil {
				e.rep.Report(startEvent(tg.Target, m, st, e.cfg.Initial, saved != nil && l != nil, decided))
			}
			planner.GuardInitial(m, p, idx, l)
			e.hold(tg, i, p.Held)
			if !p.Empty() || l == nil || !l.Exists || pf != nil {
				base := meter.progress()
				base.Files, base.TotalBytes = len(p.Copies), planner.PlanBytes(p)
				meter.sending.Store(true)
				pe := &progressExecutor{Executor: e.exec, clk: e.clk, start: start, after: startProgressAfter, report: func(p Progress) { e.rep.Report(p) },
					base: base}
				var res applyResult
				if threeWay := saved != nil && l != nil; threeWay && e.guard != nil && !e.cfg.DryRun {
					// Sync-back's preconditions against the saved ancestor: a
					// listed file the container changed in a way its stat did
					// not show is left, a conflict, not replaced or deleted.
					// A local edit of a file the container deleted goes up over
					// nothing there (threeway.Send), not over the ancestor.
					for rel, act := range decided {
						if _, inL := l.Entries[rel]; act == threeway.Send && !inL {
							if a, ok := saved.Get(rel); ok && a.Type == planner.TypeFile {
								saved.DeleteTree(rel)
							}
						}
					}
					res, err = e.applyGuardedOn(tg, saved, i, m, &sending{Plan: p, widen: tg.alg == "sha256sum"})
				} else {
					res, err = e.applyPlan(ctx, pe, tg.Target, m, &sending{Plan: p}, e.initialGzip(tg, l, p), pf)
				}
				meter.sending.Store(false)
				if err != nil {
					return err
				}
				idx.Apply(p, res.Result)
				e.warn(tg, res.Warnings)
				e.requeue(tg, i, res.Raced)
				e.requeue(tg, i, res.forgetReplaced(idx))
				ev.Files += res.Files
				ev.Deleted += res.deleted
				ev.Bytes += res.Bytes
				changed = append(changed, remotePaths(m, p)...)
			}
			idxs[i] = idx
		}
		return nil
	}()
	if err == nil {
		tg.idx = idxs
		e.onSync(tg, changed)
		ev.Transport = e.streams.Transport(ctx, tg.Target)
		if checked != "" {
			ev.Transport = checked
		}
	}
	if ctx.Err() != nil {
		return ev, ctx.Err()
	}
	ev.Duration = e.clk.Since(start)
	return ev, err
}

// hashUnsure reads, in t, the files of l whose stat data cannot tell
// whether they are still saved's (see unsure), with retries: a start
// decides them by content. It fails the start rather than decide them by
// their mtime.
func (e *Engine) hashUnsure(ctx context.Context, t Target, m *planner.Resolved, l *planner.Listing, saved *planner.Index) error {
	rels := planner.Unsure(saved, l)
	if len(rels) == 0 {
		return nil
	}
	var size int64
	for _, rel := range rels {
		size += l.Entries[rel].Size
	}
	lex := e.exec.Within(remote.ListLimit(e.cfg.ExecTimeout, size))
	return e.retry.Do(ctx, e.clk, func() error { return planner.HashUnsure(ctx, lex, t, m, l, rels) })
}

// applyPlan applies p in t with retries, or reports it under DryRun, with
// pf, the initial sync's preflight of m; gz compresses its archive (see
// apply).
func (e *Engine) applyPlan(ctx context.Context, ex Executor, t Target, m *planner.Resolved, p *sending, gz bool, pf *Preflight) (applyResult, error) {
	if e.cfg.DryRun {
		e.reportDryRun(t, m, p.Plan, pf)
		return applyResult{deleted: len(p.Deletes), Result: tarstream.Result{Files: len(p.Copies)}}, nil
	}
	var (
		res      applyResult
		replaced []string
	)
	err := e.retry.Do(ctx, e.clk, func() (err error) {
		// Each try begins with the recoveries of what the tries before it
		// may have left, its own tries' too: a retry's swap renames aside
		// under another name, and would find the path missing.
		p.unswap, p.unswapArgs = e.left.take(t, m)
		res, err = apply(ctx, ex, t, m, p, tarstream.Options{Gzip: gz, Owner: e.ownerOf(t)})
		replaced = append(replaced, res.replaced...) // failed attempts' too
		if err == nil || remote.IsChanged(err) {
			// Its recoveries ran first, and its own swaps ended (a
			// precondition that failed ended it before anything changed).
			e.left.done(t, m, p.unswap)
		} else {
			e.left.add(t, m, p.swapped) // it may have been killed in one
			p.unacked(res)              // it may have landed (see sending.tried)
		}
		return err
	})
	res.replaced = replaced
	if err == nil {
		e.learnSigs(t, p.Plan, res.Result) // delta.go
	}
	for _, rel := range slices.Sorted(maps.Keys(res.Unreadable)) {
		// Said once for the mapping, whichever target reads it first.
		if name := m.LocalPath(rel); m.Unreadable.Add(m.FS(), name, rel) {
			e.rep.Report(Error{Target: t, Err: localtree.CannotRead(name, res.Unreadable[rel])})
		}
	}
	return res, err
}

// reportDryRun reports what p would do in t, with pf, if any: always with
// a preflight, else only a plan that changes something.
func (e *Engine) reportDryRun(t Target, m *planner.Resolved, p *planner.Plan, pf *Preflight) {
	ev := DryRun{Target: t, Remote: m.RemoteDir(), Preflight: pf}
	for _, c := range p.Copies {
		ev.Copy = append(ev.Copy, path.Join(string(m.RemoteDir()), c.Name))
	}
	for _, d := range p.Deletes {
		ev.Delete = append(ev.Delete, path.Join(string(m.RemoteDir()), m.RemoteName(d)))
	}
	if len(ev.Copy)+len(ev.Delete) > 0 || pf != nil {
		e.rep.Report(ev)
	}
}

// onSync hands the changed remote paths to tg's after-sync runners, if any.
func (e *Engine) onSync(tg *target, changed []string) {
	tg.runner.submit(changed)
}

// reportErr reports err for tg unless it is the same as the last one: as a
// failed InitialSync when initial, else as an Error.
func (e *Engine) reportErr(tg *target, err error, initial bool) {
	tg.mu.Lock()
	msg := err.Error()
	repeat := msg == tg.lastErr
	tg.lastErr = msg
	tg.mu.Unlock()
	switch {
	case repeat:
	case initial:
		e.rep.Report(InitialSync{Target: tg.Target, Err: err})
	default:
		ev := Error{Target: tg.Target, Err: err}
		var se *remote.SyncError
		if errors.As(err, &se) {
			ev.Hint = se.Hint
		}
		e.rep.Report(ev)
	}
}

func (e *Engine) warn(tg *target, warns []error) {
	for _, w := range warns {
		e.rep.Report(Error{Target: tg.Target, Err: w})
	}
}
