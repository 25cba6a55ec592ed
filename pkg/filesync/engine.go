package filesync

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Config is what to sync and how. Zero values mean the documented defaults.
type Config struct {
	Mappings []Mapping
	// Matchers[i] says what to ignore under Mappings[i]; missing or nil
	// entries ignore nothing.
	Matchers []Matcher
	// Initial is what a new container gets; default InitialUpload.
	Initial InitialMode
	// Quiet and Cap bound batching: a batch is cut after Quiet without a
	// change, or Cap after its first change. Defaults DefaultQuiet, DefaultCap.
	Quiet, Cap time.Duration
	// Parallelism bounds concurrent execs over all targets; default 8.
	Parallelism int
	// OnSync, if set, runs as `sh -c OnSync` in a target after every applied
	// batch and after its initial sync. LIVESYNC_CHANGED holds the changed
	// remote paths, absolute and newline-separated; when they would exceed
	// 32 KiB it holds the affected remote directories instead. It runs off
	// the sync path, one run at a time per target: batches applied during a
	// run are coalesced into one follow-up run with the union of their paths.
	// Each run is reported as an OnSync event; a failure is otherwise ignored.
	OnSync string
	// OnSyncTimeout bounds each run of OnSync; then its exec is closed (what
	// the command started keeps running in the container) and the run is
	// reported as timed out. Default DefaultOnSyncTimeout.
	OnSyncTimeout time.Duration
	// ExecTimeout bounds every exec that lists or copies files: one that
	// moves no byte on any stream for ExecTimeout is cancelled and fails with
	// ErrTimeout, which is transient (retried, then the target is re-synced).
	// A transfer that keeps moving is never cut off. A listing also gets the
	// time to hash the local tree at a conservative rate, since it prints
	// nothing while hashing. Default DefaultExecTimeout.
	ExecTimeout time.Duration
	// DryRun lists (as DryRun events) what would be copied and deleted, and
	// changes nothing; the read-only listing of an initial sync still runs.
	DryRun bool
	// AllowMassDelete lets a batch or initial sync delete more than 50
	// remote entries and more than half of what the container holds for a
	// mapping, or empty a mapping whose local root was emptied. Without it
	// such deletes are held (Held events); copies still go.
	AllowMassDelete bool
}

// Option configures an Engine.
type Option func(*Engine)

// WithClock sets the clock for batching and backoff (tests use a fake one).
func WithClock(c clock.Clock) Option { return func(e *Engine) { e.clk = c } }

// WithReporter sets where events go; by default they are dropped.
func WithReporter(r Reporter) Option { return func(e *Engine) { e.rep.r = r } }

// WithRetry sets the retry policy for transient failures; default DefaultRetry.
func WithRetry(p RetryPolicy) Option { return func(e *Engine) { e.retry = p } }

// WithLogger sets a logger for paths that are dropped and other detail; by
// default nothing is logged.
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.log = l } }

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

// Engine syncs the mappings into every target: an initial sync per new
// target, then each batch of changes.
type Engine struct {
	exec    *boundedExecutor
	cfg     Config
	maps    []*mapping
	initErr error
	clk     clock.Clock
	rep     *lockedReporter
	retry   RetryPolicy
	log     *slog.Logger

	onSyncExec *boundedExecutor // on-sync commands, with slots of their own
	streams    *streams         // one exec stream per target; nil: an exec per batch (stream.go)

	mu       sync.Mutex
	targets  map[string]*target
	runCtx   context.Context // set while Run runs
	closing  bool
	wg       sync.WaitGroup
	seq      uint64
	inflight map[uint64]*batchStat
}

// target is one target's state. idx and the fields above mu are owned by
// the target's worker goroutine.
type target struct {
	Target
	idx     []*Index
	ctx     context.Context
	cancel  context.CancelFunc
	wake    chan struct{}
	backoff time.Duration
	runner  *onSyncRunner // nil without an on-sync command

	mu      sync.Mutex
	hints   []map[string]struct{}
	rescan  []bool
	seqHi   uint64 // highest batch merged into hints
	synced  bool   // initial sync done: idx is valid
	dirty   bool   // a batch failed: compare the whole tree next time
	lastErr string // the last reported error, to report each once

	// held is, per mapping, the held set last reported (see Engine.hold).
	held map[int]string
}

// New returns an engine that reaches targets through exec.
func New(exec Executor, cfg Config, opts ...Option) *Engine {
	if cfg.Initial == "" {
		cfg.Initial = InitialUpload
	}
	if cfg.Quiet <= 0 {
		cfg.Quiet = DefaultQuiet
	}
	if cfg.Cap <= 0 {
		cfg.Cap = DefaultCap
	}
	if cfg.Parallelism <= 0 {
		cfg.Parallelism = 8
	}
	if cfg.ExecTimeout <= 0 {
		cfg.ExecTimeout = DefaultExecTimeout
	}
	if cfg.OnSyncTimeout <= 0 {
		cfg.OnSyncTimeout = DefaultOnSyncTimeout
	}
	e := &Engine{
		cfg: cfg, clk: clock.RealClock{}, rep: &lockedReporter{}, retry: DefaultRetry,
		log:     slog.New(slog.DiscardHandler),
		targets: map[string]*target{}, inflight: map[uint64]*batchStat{},
	}
	for _, o := range opts {
		o(e)
	}
	if sc, ok := exec.(StreamCapable); ok && sc.PersistentStreams() && !cfg.DryRun {
		e.streams = newStreams(exec, e.clk, cfg.ExecTimeout) // stream.go
		exec = e.streams
	}
	e.exec = &boundedExecutor{Executor: exec, sem: make(chan struct{}, cfg.Parallelism), clk: e.clk,
		limit: limit{d: cfg.ExecTimeout, idle: true}}
	// On-sync commands get slots of their own: one that holds its exec open
	// until its timeout must not hold up file transfers.
	e.onSyncExec = &boundedExecutor{Executor: exec, sem: make(chan struct{}, cfg.Parallelism), clk: e.clk,
		limit: limit{d: cfg.OnSyncTimeout}}
	for i, m := range cfg.Mappings {
		var match Matcher
		if i < len(cfg.Matchers) {
			match = cfg.Matchers[i]
		}
		mm, err := newMapping(m, match)
		if err != nil {
			e.initErr = errors.Join(e.initErr, err)
			continue
		}
		mm.allowMassDelete = cfg.AllowMassDelete
		e.maps = append(e.maps, mm)
	}
	return e
}

// AddTarget starts syncing t. A known target with a new ContainerID is synced
// from scratch (a restarted container lost what was synced). Safe for
// concurrent use, before or during Run.
func (e *Engine) AddTarget(t Target) {
	e.mu.Lock()
	if old, ok := e.targets[t.String()]; ok {
		if old.ContainerID == t.ContainerID {
			e.mu.Unlock()
			return
		}
		e.dropLocked(old)
	}
	tg := &target{Target: t, wake: make(chan struct{}, 1), hints: e.emptyHints(), rescan: make([]bool, len(e.maps))}
	e.targets[t.String()] = tg
	if e.runCtx != nil && !e.closing {
		e.startLocked(tg)
	}
	e.mu.Unlock()
	e.rep.Report(TargetAdded{Target: t, Transport: e.streams.intended()})
}

// RemoveTarget stops syncing t; an exec in flight is cancelled. Safe for
// concurrent use.
func (e *Engine) RemoveTarget(t Target) {
	e.mu.Lock()
	tg, ok := e.targets[t.String()]
	if ok {
		e.dropLocked(tg)
	}
	e.mu.Unlock()
	if ok {
		e.rep.Report(TargetRemoved{Target: tg.Target})
	}
}

func (e *Engine) dropLocked(tg *target) {
	delete(e.targets, tg.String())
	e.streams.close(tg.Target) // stream.go
	if tg.cancel != nil {
		tg.cancel()
	}
	for seq := range e.inflight {
		e.doneLocked(seq, tg.String(), unitResult{})
	}
}

func (e *Engine) startLocked(tg *target) {
	tg.ctx, tg.cancel = context.WithCancel(e.runCtx)
	tg.runner = e.startOnSync(tg.ctx, tg, &e.wg)
	e.wg.Add(1)
	go e.work(tg)
	tg.signal()
}

func (e *Engine) emptyHints() []map[string]struct{} {
	h := make([]map[string]struct{}, len(e.maps))
	for i := range h {
		h[i] = map[string]struct{}{}
	}
	return h
}

func (tg *target) signal() {
	select {
	case tg.wake <- struct{}{}:
	default:
	}
}

// Run syncs until ctx is done (it returns ctx.Err()) or changes is closed (it
// returns nil once every target has applied what was pending, and run or timed
// out the on-sync command). Targets added before Run get their initial sync
// first.
func (e *Engine) Run(ctx context.Context, changes <-chan Change) error {
	if e.initErr != nil {
		return e.initErr
	}
	e.mu.Lock()
	if e.runCtx != nil {
		e.mu.Unlock()
		return errors.New("sync engine: Run called twice")
	}
	e.runCtx = ctx
	for _, tg := range e.targets {
		e.startLocked(tg)
	}
	e.mu.Unlock()

	for b := range coalesceWith(ctx, e.clk, e.cfg.Quiet, e.cfg.Cap, changes, e.adaptiveQuiet()) { // coalesce_adaptive.go
		e.dispatch(b)
	}
	e.mu.Lock()
	e.closing = true
	for _, tg := range e.targets {
		tg.signal()
	}
	e.mu.Unlock()
	e.wg.Wait()
	e.streams.closeAll(streamCloseGrace) // stream.go
	return ctx.Err()
}

// batchStat collects a batch's outcome until every target it went to is done.
type batchStat struct {
	first   time.Time
	waiting map[string]bool
	targets int
	out     Batch
}

// dispatch hands a batch to every target and starts waiting for the ready
// ones (targets still in their initial sync get the hints but are not waited for).
func (e *Engine) dispatch(b *batch) {
	hints, rescan := e.route(b)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	st := &batchStat{first: b.first, waiting: map[string]bool{}}
	for key, tg := range e.targets {
		tg.mu.Lock()
		for i := range e.maps {
			for rel := range hints[i] {
				tg.hints[i][rel] = struct{}{}
			}
			tg.rescan[i] = tg.rescan[i] || rescan[i]
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

// route splits a batch's paths by mapping, as rels.
func (e *Engine) route(b *batch) ([]map[string]struct{}, []bool) {
	hints, rescan := e.emptyHints(), make([]bool, len(e.maps))
	for p := range b.paths {
		matched := false
		for i, m := range e.maps {
			if rel, ok := relTo(m.root, p); ok {
				hints[i][rel], matched = struct{}{}, true
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
			rescan[i] = rescan[i] || under || over
		}
	}
	return hints, rescan
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
		select {
		case <-tg.ctx.Done():
		case <-tg.wake:
		case <-retryC:
		}
		if timer != nil {
			timer.Stop()
		}
		if tg.ctx.Err() != nil {
			return
		}
		e.mu.Lock()
		closing := e.closing
		e.mu.Unlock()
		e.process(tg)
		if closing {
			return
		}
	}
}

// process does whatever tg has pending: its initial sync, a re-sync after a
// failure, or the merged hints of the batches since the last call.
func (e *Engine) process(tg *target) {
	tg.mu.Lock()
	hints, rescan, seq := tg.hints, tg.rescan, tg.seqHi
	tg.hints, tg.rescan = e.emptyHints(), make([]bool, len(e.maps))
	synced, dirty := tg.synced, tg.dirty
	tg.mu.Unlock()

	var (
		r       unitResult
		initial InitialSync
	)
	if !synced {
		initial, r.err = e.initialSync(tg.ctx, tg)
	} else {
		r = e.syncBatch(tg, hints, rescan, dirty)
	}
	if tg.ctx.Err() != nil {
		return // removed or shutting down: nothing to report
	}
	if r.err != nil {
		tg.backoff = min(max(2*tg.backoff, retryAfter), maxRetryAfter)
	} else {
		tg.backoff = 0
	}
	tg.mu.Lock()
	switch {
	case r.err == nil:
		tg.synced, tg.dirty, tg.lastErr = true, false, ""
	case synced:
		tg.dirty = true
	}
	tg.mu.Unlock()
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
	for _, s := range seqs {
		e.doneLocked(s, tg.String(), r)
	}
}

// syncBatch plans and applies the hinted paths of every mapping; with dirty
// (an earlier batch failed) or rescan, the whole tree is compared.
func (e *Engine) syncBatch(tg *target, hints []map[string]struct{}, rescan []bool, dirty bool) unitResult {
	var (
		r       unitResult
		changed []string
	)
	for i, m := range e.maps {
		if len(hints[i]) == 0 && !rescan[i] && !dirty {
			continue
		}
		rels := make([]string, 0, len(hints[i]))
		for rel := range hints[i] {
			rels = append(rels, rel)
		}
		slices.Sort(rels)
		p, err := plan(m, tg.idx[i], rels, rescan[i] || dirty)
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
		res, err := e.applyPlan(tg.ctx, e.exec, tg.Target, m, p)
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

// initialSync compares each mapping with the container and sends the
// difference, then replaces tg's index. Callers report the outcome (after
// recording it, so events never run ahead of the state).
func (e *Engine) initialSync(ctx context.Context, tg *target) (InitialSync, error) {
	start := e.clk.Now()
	ev := InitialSync{Target: tg.Target}
	e.streams.warm(ctx, tg.Target) // stream.go: open it while listing
	idxs := make([]*Index, len(e.maps))
	var changed []string
	err := func() error {
		for i, m := range e.maps {
			local, warns, err := localTree(m)
			if err != nil {
				return err
			}
			e.warn(tg, warns)
			if e.cfg.Initial == InitialNone {
				idxs[i] = NewIndex()
				for rel, le := range local.entries {
					idxs[i].Put(rel, le)
				}
				continue
			}
			var l *listing
			lex := e.exec.within(listLimit(e.cfg.ExecTimeout, treeBytes(local.entries)))
			err = e.retry.do(ctx, e.clk, func() (err error) {
				l, err = listRemote(ctx, lex, tg.Target, m)
				return err
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				e.log.Info("listing failed; sending everything", "target", tg.String(), "remote", m.Remote, "err", err)
				l = nil
			}
			p, idx, err := planInitial(m, local, l, e.cfg.Initial)
			if err != nil {
				return err
			}
			guardInitial(m, p, idx, l)
			e.hold(tg, i, p.Held)
			if !p.Empty() || l == nil || !l.exists {
				pe := &progressExecutor{Executor: e.exec, clk: e.clk, start: start, report: func(p Progress) { e.rep.Report(p) },
					base: Progress{Target: tg.Target, Files: len(p.Copies), TotalBytes: planBytes(p)}}
				res, err := e.applyPlan(ctx, pe, tg.Target, m, p)
				if err != nil {
					return err
				}
				idx.apply(p, res.archiveResult)
				e.warn(tg, res.warnings)
				e.requeue(tg, i, res.raced)
				e.requeue(tg, i, res.forgetReplaced(idx))
				ev.Files += res.files
				ev.Deleted += res.deleted
				ev.Bytes += res.bytes
				changed = append(changed, remotePaths(m, p)...)
			}
			idxs[i] = idx
		}
		return nil
	}()
	if err == nil {
		tg.idx = idxs
		e.onSync(tg, changed)
		ev.Transport = e.streams.transport(ctx, tg.Target) // stream.go
	}
	if ctx.Err() != nil {
		return ev, ctx.Err()
	}
	ev.Duration = e.clk.Since(start)
	return ev, err
}

// applyPlan applies p in t with retries, or reports it under DryRun.
func (e *Engine) applyPlan(ctx context.Context, ex Executor, t Target, m *mapping, p *Plan) (applyResult, error) {
	if e.cfg.DryRun {
		ev := DryRun{Target: t}
		for _, c := range p.Copies {
			ev.Copy = append(ev.Copy, path.Join(string(m.remoteDir()), c.Name))
		}
		for _, d := range p.Deletes {
			ev.Delete = append(ev.Delete, path.Join(string(m.remoteDir()), m.remoteName(d)))
		}
		if len(ev.Copy)+len(ev.Delete) > 0 {
			e.rep.Report(ev)
		}
		return applyResult{deleted: len(p.Deletes), archiveResult: archiveResult{files: len(p.Copies)}}, nil
	}
	var (
		res      applyResult
		replaced []string
	)
	err := e.retry.do(ctx, e.clk, func() (err error) {
		res, err = apply(ctx, ex, t, m, p)
		replaced = append(replaced, res.replaced...) // failed attempts' too
		return err
	})
	res.replaced = replaced
	return res, err
}

// requeue hints files that changed while being archived for another pass.
func (e *Engine) requeue(tg *target, i int, raced map[string]struct{}) {
	if len(raced) == 0 {
		return
	}
	tg.mu.Lock()
	for rel := range raced {
		tg.hints[i][rel] = struct{}{}
	}
	tg.mu.Unlock()
	tg.signal()
}

// onSync hands the changed remote paths to tg's on-sync runner, if any.
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
		var se *SyncError
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

// Once runs the initial sync of every current target, in parallel (execs are
// bounded by Parallelism), and reports whether all of them converged (with
// nothing held, see Held). It returns once the on-sync runs the initial syncs
// started have finished or timed out; their outcome is reported, not part of
// the result. It is for one-shot use (--once); don't combine it with Run.
func (e *Engine) Once(ctx context.Context) (bool, error) {
	if e.initErr != nil {
		return false, e.initErr
	}
	e.mu.Lock()
	tgs := make([]*target, 0, len(e.targets))
	for _, tg := range e.targets {
		tgs = append(tgs, tg)
	}
	e.mu.Unlock()
	var (
		wg sync.WaitGroup
		mu sync.Mutex
		ok = true
	)
	for _, tg := range tgs {
		wg.Go(func() {
			tg.ctx = ctx
			tg.runner = e.startOnSync(ctx, tg, &wg)
			defer tg.runner.close()
			ev, err := e.initialSync(ctx, tg)
			if err != nil {
				mu.Lock()
				ok = false
				mu.Unlock()
				e.reportErr(tg, err, true)
				return
			}
			e.rep.Report(ev)
			if tg.holding() { // held deletes: the container differs, and said why
				mu.Lock()
				ok = false
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	e.streams.closeAll(streamCloseGrace) // stream.go
	return ok && ctx.Err() == nil, ctx.Err()
}

// boundedExecutor limits concurrent execs across all targets and bounds each
// one by its limit, which starts once the exec has its slot.
type boundedExecutor struct {
	Executor
	sem   chan struct{}
	clk   clock.Clock
	limit limit
}

// within returns b with another limit, sharing b's slots.
func (b *boundedExecutor) within(l limit) *boundedExecutor {
	c := *b
	c.limit = l
	return &c
}

func (b *boundedExecutor) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-b.sem }()
	return execWithin(ctx, b.clk, b.limit, b.Executor, t, argv, stdin, stdout, stderr)
}
