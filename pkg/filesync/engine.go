package filesync

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"k8s.io/utils/clock"
)

// Config is what to sync and how. Zero values mean the documented defaults.
type Config struct {
	Mappings []planner.Mapping
	// Matchers[i] says what to ignore under Mappings[i]; missing or nil
	// entries ignore nothing.
	Matchers []planner.Matcher
	// Initial is what a new container gets; default InitialUpload.
	Initial planner.InitialMode
	// Quiet and Cap bound batching: a batch is cut after Quiet without a
	// change, or Cap after its first change. Defaults coalesce.DefaultQuiet, coalesce.DefaultCap.
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
	// AfterSync, if set, is called for a target after each applied batch
	// that changed something there, and after its initial sync when that
	// did (--restart, see pkg/restart). It runs off the sync path like
	// OnSync, one call at a time per target: batches applied during a call
	// coalesce into one follow-up call. ctx ends when the target is removed
	// or the engine stops. Not called in a dry run.
	AfterSync func(ctx context.Context, t Target)
	// ExecTimeout bounds every exec that lists or copies files: one that
	// moves no byte on any stream for ExecTimeout is cancelled and fails with
	// remote.ErrTimeout, which is transient (retried, then the target is re-synced).
	// A transfer that keeps moving is never cut off. A listing also gets the
	// time to hash the local tree at a conservative rate, since it prints
	// nothing while hashing. Default DefaultExecTimeout.
	ExecTimeout time.Duration
	// DryRun lists (as DryRun events) what would be copied and deleted, and
	// changes nothing; the read-only listing of an initial sync still runs,
	// and so does a read-only check per mapping (Preflight) of how a real
	// run would sync it.
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

// WithRetry sets the retry policy for transient failures; default remote.DefaultRetry.
func WithRetry(p remote.RetryPolicy) Option { return func(e *Engine) { e.retry = p } }

// WithLogger sets a logger for paths that are dropped and other detail; by
// default nothing is logged.
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.log = l } }

// Engine syncs the mappings into every target: an initial sync per new
// target, then each batch of changes.
type Engine struct {
	exec    *remote.Bounded
	cfg     Config
	maps    []*planner.Resolved
	initErr error
	clk     clock.Clock
	rep     *lockedReporter
	retry   remote.RetryPolicy
	log     *slog.Logger

	onSyncExec *remote.Bounded // on-sync commands, with slots of their own
	streams    *remote.Streams // one exec stream per target; nil: an exec per batch
	owned      remote.Owned    // the executor, when it writes on behalf of another user
	streamable bool            // the executor keeps streams (a dry run has none, and says so)
	guard      UploadGuard     // nil without sync-back
	anc        Ancestry        // nil: no saved ancestors
	sigs       sigCache        // what was sent of large files, for deltas (see findPatches)
	left       leftovers       // what failed applies may have staged and left (see leftovers.go)

	mu       sync.Mutex
	targets  map[string]*target
	runCtx   context.Context // set while Run runs
	closing  bool
	wg       sync.WaitGroup
	seq      uint64
	inflight map[uint64]*batchStat
}

// New returns an engine that reaches targets through exec.
func New(exec Executor, cfg Config, opts ...Option) *Engine {
	if cfg.Initial == "" {
		cfg.Initial = planner.InitialUpload
	}
	if cfg.Quiet <= 0 {
		cfg.Quiet = coalesce.DefaultQuiet
	}
	if cfg.Cap <= 0 {
		cfg.Cap = coalesce.DefaultCap
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
		cfg: cfg, clk: clock.RealClock{}, rep: &lockedReporter{}, retry: remote.DefaultRetry,
		log:     slog.New(slog.DiscardHandler),
		targets: map[string]*target{}, inflight: map[uint64]*batchStat{},
	}
	for _, o := range opts {
		o(e)
	}
	e.owned, _ = exec.(remote.Owned)
	sc, ok := exec.(remote.StreamCapable)
	e.streamable = ok && sc.PersistentStreams()
	if e.streamable && !cfg.DryRun {
		e.streams = remote.NewStreams(exec, e.clk, cfg.ExecTimeout)
		exec = e.streams
	}
	e.exec = remote.NewBounded(exec, cfg.Parallelism, e.clk, remote.Limit{D: cfg.ExecTimeout, Idle: true})
	// On-sync commands get slots of their own: one that holds its exec open
	// until its timeout must not hold up file transfers.
	e.onSyncExec = remote.NewBounded(exec, cfg.Parallelism, e.clk, remote.Limit{D: cfg.OnSyncTimeout})
	for i, m := range cfg.Mappings {
		var match planner.Matcher
		if i < len(cfg.Matchers) {
			match = cfg.Matchers[i]
		}
		mm, err := planner.Resolve(m, match)
		if err != nil {
			e.initErr = errors.Join(e.initErr, err)
			continue
		}
		mm.AllowMassDelete = cfg.AllowMassDelete
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
	tg := &target{Target: t, wake: make(chan struct{}, 1), visits: make(chan func()), due: make([]pending, len(e.maps)), walkDeferred: make([]bool, len(e.maps))}
	e.targets[t.String()] = tg
	if e.runCtx != nil && !e.closing {
		e.startLocked(tg)
	}
	e.mu.Unlock()
	transport := e.streams.Intended()
	if e.cfg.DryRun && e.streamable {
		transport = TransportStream // what a real run would try
	}
	e.rep.Report(TargetAdded{Target: t, Transport: transport})
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
	e.streams.Close(tg.Target)
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

// Run syncs until ctx is done (it returns ctx.Err()) or changes is closed (it
// returns nil once every target has applied what was pending, and run or timed
// out the on-sync command). Targets added before Run get their initial sync
// first.
func (e *Engine) Run(ctx context.Context, changes <-chan coalesce.Change) error {
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

	batches, peeks := coalesce.Run(ctx, e.clk, e.coalesceOptions(), changes)
	for batches != nil {
		select {
		case b, ok := <-batches:
			if !ok {
				batches = nil
				continue
			}
			e.dispatch(b)
		case p, ok := <-peeks:
			if !ok {
				peeks = nil
				continue
			}
			e.dispatchPeek(p)
		}
	}
	e.mu.Lock()
	e.closing = true
	for _, tg := range e.targets {
		tg.signal()
	}
	e.mu.Unlock()
	e.wg.Wait()
	e.streams.CloseAll(remote.StreamCloseGrace)
	return ctx.Err()
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
	tgs := slices.Collect(maps.Values(e.targets))
	e.mu.Unlock()
	var (
		wg sync.WaitGroup
		ok atomic.Bool
	)
	ok.Store(true)
	for _, tg := range tgs {
		wg.Go(func() {
			tg.mu.Lock()
			tg.synced = false // each call syncs from scratch
			tg.mu.Unlock()
			tg.ctx = ctx
			tg.runner = e.startOnSync(ctx, tg, &wg)
			defer tg.runner.close()
			// One pass of the worker: the initial sync, reported as under
			// Run. Held deletes: the container differs, and said why.
			if e.process(tg) != nil || tg.holding() {
				ok.Store(false)
			}
			e.save(tg, true)
		})
	}
	wg.Wait()
	e.streams.CloseAll(remote.StreamCloseGrace)
	return ok.Load() && ctx.Err() == nil, ctx.Err()
}

// ownerOf is whose the files extracted in t must be; nil: the extracting
// user's, as tar -o leaves them.
func (e *Engine) ownerOf(t Target) *remote.Owner {
	if e.owned == nil {
		return nil
	}
	return e.owned.Owner(t)
}

// coalesceOptions cuts batches with the configured windows. An engine that
// keeps streams and runs with the default quiet window adapts the window to
// each batch and peeks into long ones; an exec per batch pays a floor per
// batch, and a window the user chose is kept. Through a stream a batch costs a
// few milliseconds, so under a long burst (a build writing thousands of files)
// the stream extracts what is written while the rest still comes, instead of
// waiting for the batch's cap.
func (e *Engine) coalesceOptions() coalesce.Options {
	o := coalesce.Options{Quiet: e.cfg.Quiet, Cap: e.cfg.Cap}
	if e.streams != nil && e.cfg.Quiet == coalesce.DefaultQuiet {
		o.Adaptive, o.PeekEvery = true, coalesce.PeekInterval
	}
	return o
}

// Default deadlines; see Config.ExecTimeout and Config.OnSyncTimeout.
const (
	DefaultExecTimeout   = 30 * time.Second
	DefaultOnSyncTimeout = 30 * time.Second
)
