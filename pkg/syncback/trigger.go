package syncback

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// Trigger reports on the source's inotifywait trigger (see Runner.Trigger):
// Err nil once its watches are in place, remote.ErrNoInotifywait when the
// image has none, or why it stopped for good; passes then run at the
// interval alone.
type Trigger struct {
	Target filesync.Target
	Err    error
}

func (Trigger) syncBackEvent() {}

// triggerRetryMax bounds the wait before a trigger whose exec ended (its
// connection dropped) is started again.
const triggerRetryMax = 30 * time.Second

// watchDir is a directory mapping as the trigger watches it.
type watchDir struct {
	remote  string
	ignored func(rel string, isDir bool) bool
}

// trigRun is the trigger of one source container.
type trigRun struct {
	key    string
	cancel context.CancelFunc
}

// Trigger makes r watch the source for writes with inotifywait where its
// image has it, over execs of ex (which must not bound how long one runs),
// and run a pass as soon as a listed path changes: the interval's passes
// go on beside it. Call it before Run.
func (r *Runner) Trigger(ex remote.Executor) { r.trigEx = ex }

// kickPass asks Run for a pass now; kicks while one is pending merge.
func (r *Runner) kickPass() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// startTrigger starts the source's trigger once a pass has found its
// mappings (so its initial sync converged), unless one ran for it already.
func (r *Runner) startTrigger(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.trigEx == nil || r.source == nil {
		return
	}
	src := *r.source
	key := src.String() + "@" + src.ContainerID
	st := r.states[key]
	if st == nil || st.dirs == nil || st.triggered || r.trig != nil && r.trig.key == key {
		return
	}
	st.triggered = true
	r.stopTriggerLocked()
	tctx, cancel := context.WithCancel(ctx)
	r.trig = &trigRun{key: key, cancel: cancel}
	starts := r.globs.Starts()
	var once sync.Once
	up := func() { once.Do(func() { r.report(Trigger{Target: src}) }) }
	for _, d := range st.dirs {
		go r.watch(tctx, src, d, starts, up)
	}
}

// stopTriggerLocked stops the running trigger, if any.
func (r *Runner) stopTriggerLocked() {
	if r.trig != nil {
		r.trig.cancel()
		r.trig = nil
	}
}

// watch runs the trigger of one mapping of src until ctx ends. An exec that
// ended after its watches were in place (a dropped connection) starts
// again after a wait; one that never got there (no inotifywait, no watch
// left under the user's inotify limit) is reported and not tried again.
// up is called once its watches are in place.
func (r *Runner) watch(ctx context.Context, src filesync.Target, d watchDir, starts []string, up func()) {
	wait := time.Second
	for {
		ready := make(chan struct{})
		err := remote.Watch(ctx, r.trigEx, src, d.remote, starts, func() {
			close(ready)
			up()
			r.kickPass() // what was written before the watches were in place
		}, func(ev remote.WatchEvent) {
			if r.wants(d, ev) {
				r.kickPass()
			}
		})
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ready:
		default:
			r.report(Trigger{Target: src, Err: err})
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-r.clk.After(wait):
		}
		wait = min(2*wait, triggerRetryMax)
	}
}

// wants reports whether ev calls for a pass: a listed, unignored file, or
// any directory (one made or moved in may hold listed files whose own
// events came before its watch did).
func (r *Runner) wants(d watchDir, ev remote.WatchEvent) bool {
	rel := strings.TrimPrefix(ev.Name, "./")
	if rel == "." || rel == "" {
		return false
	}
	if d.ignored != nil && d.ignored(rel, ev.IsDir) {
		return false
	}
	return ev.IsDir || r.globs.Match(rel, false)
}
