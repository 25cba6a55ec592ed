package filesync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// OnSync reports one run of the on-sync command in a target.
type OnSync struct {
	Target Target
	// ExitCode is the command's exit status when it ran to its end (Err is
	// nil), else -1.
	ExitCode int
	// Err says why the command did not run to its end: it timed out
	// (errors.Is remote.ErrTimeout), or the exec failed.
	Err      error
	Duration time.Duration
	// Output is the tail of stdout and stderr together, at most
	// onSyncOutputMax bytes, cut at a line start when possible.
	Output string
}

func (OnSync) event() {}

// onSyncOutputMax bounds the output an OnSync event carries.
const onSyncOutputMax = 4 << 10

// maxChangedEnv bounds $LIVESYNC_CHANGED; beyond it the command gets the
// mapped remote roots instead of the paths.
const maxChangedEnv = 32 << 10

// onSyncRunner runs the on-sync command (or Config.AfterSync) in one target,
// off the sync path: the target's worker submits the changed paths of each
// applied batch and moves on. While a run is in progress, further
// submissions coalesce into a single follow-up run with the union of their
// paths, so runs never queue up and a slow or hanging command never holds up
// a batch.
type onSyncRunner struct {
	e    *Engine
	t    Target
	ctx  context.Context // cancelled when the target is removed or the engine stops
	wake chan struct{}
	done chan struct{} // closed when loop returns
	do   func(paths []string)

	mu      sync.Mutex
	pending bool                // a run is due
	paths   map[string]struct{} // its changed paths; nil once they overflowed
	size    int                 // bytes of paths joined by newlines
	closed  bool                // no more submissions: run what is due, then stop
}

// runners are a target's two after-sync runners, each nil when unused: the
// on-sync command's, and Config.AfterSync's, which only batches that changed
// something wake.
type runners struct{ cmd, hook *onSyncRunner }

func (rs runners) submit(changed []string) {
	rs.cmd.submit(changed)
	if len(changed) > 0 {
		rs.hook.submit(changed)
	}
}

func (rs runners) close() {
	rs.cmd.close()
	rs.hook.close()
}

// startOnSync starts tg's runners under ctx, counted in wg; none in a dry
// run.
func (e *Engine) startOnSync(ctx context.Context, tg *target, wg *sync.WaitGroup) runners {
	var rs runners
	if e.cfg.DryRun {
		return rs
	}
	start := func(do func(r *onSyncRunner, paths []string)) *onSyncRunner {
		r := &onSyncRunner{e: e, t: tg.Target, ctx: ctx, wake: make(chan struct{}, 1), done: make(chan struct{}),
			paths: map[string]struct{}{}}
		r.do = func(paths []string) { do(r, paths) }
		wg.Go(r.loop)
		return r
	}
	if e.cfg.OnSync != "" {
		rs.cmd = start((*onSyncRunner).run)
	}
	if hook := e.cfg.AfterSync; hook != nil {
		rs.hook = start(func(r *onSyncRunner, _ []string) { hook(r.ctx, r.t) })
	}
	return rs
}

// submit asks for a run with these changed remote paths; it never blocks.
func (r *onSyncRunner) submit(changed []string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.pending = true
	for _, p := range changed {
		if r.paths == nil {
			break
		}
		if _, ok := r.paths[p]; !ok {
			r.paths[p] = struct{}{}
			r.size += len(p) + 1
		}
		if r.size > maxChangedEnv+1 {
			r.paths = nil // the roots will do; stop collecting
		}
	}
	r.mu.Unlock()
	r.signal()
}

// close lets the runner finish what is due and stop.
func (r *onSyncRunner) close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.signal()
}

func (r *onSyncRunner) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *onSyncRunner) loop() {
	defer close(r.done)
	for {
		if r.ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		due, closed := r.pending, r.closed
		var paths []string
		if due {
			if r.paths != nil {
				paths = slices.Sorted(maps.Keys(r.paths))
			}
			r.pending, r.paths, r.size = false, map[string]struct{}{}, 0
		}
		r.mu.Unlock()
		switch {
		case due:
			r.do(paths)
			continue
		case closed:
			return
		}
		select {
		case <-r.ctx.Done():
			return
		case <-r.wake:
		}
	}
}

// run runs the command once and reports it; paths nil means they overflowed.
func (r *onSyncRunner) run(paths []string) {
	e := r.e
	list := strings.Join(paths, "\n")
	if paths == nil {
		var dirs []string
		for _, m := range e.maps {
			dirs = append(dirs, string(m.Remote))
		}
		list = strings.Join(dirs, "\n")
	}
	start := e.clk.Now()
	out, err := remote.RunOnSync(r.ctx, e.onSyncExec, r.t, list, e.cfg.OnSync, onSyncOutputMax)
	if r.ctx.Err() != nil {
		return // removed or shutting down: nothing to report
	}
	ev := OnSync{Target: r.t, ExitCode: -1, Duration: e.clk.Since(start), Output: out}
	var ee remote.ExitError
	switch {
	case err == nil:
		ev.ExitCode = 0
	case errors.Is(err, remote.ErrTimeout):
		ev.Err = fmt.Errorf("on-sync command %w and was left running in the container, with any background process it started; "+
			"a background process that keeps the command's output open holds it until the timeout: redirect its output, e.g. 'node app.js >/tmp/app.log 2>&1 &'", err)
	case errors.As(err, &ee):
		ev.ExitCode = ee.ExitStatus()
	default:
		ev.Err = fmt.Errorf("running the on-sync command: %w", err)
	}
	e.rep.Report(ev)
}
