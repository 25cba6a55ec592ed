// Package session runs one livesync session: it picks the containers, changes the image side
// first when asked (--pull-policy, --refresh, the supervisor of --restart process), then feeds watcher events through the sync
// engine into the containers the tracker finds, until ctx ends or one initial sync is done.
package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/forward"
	"github.com/livesync-dev/kubectl-livesync/pkg/logs"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/restart"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncback"
	"github.com/livesync-dev/kubectl-livesync/pkg/watch"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// Config is a session as the command line asked for it, validated.
type Config struct {
	// Sync configures the engine; Run fills its Matchers from Excludes and GitIgnore.
	Sync      filesync.Config
	Excludes  []string
	GitIgnore bool
	// Containers are the -c names; empty means the default container.
	Containers []string
	// PullPolicy, if set, is patched onto the workload before syncing.
	PullPolicy string
	// Refresh pins a moved tag before syncing; FollowTag keeps doing it every Interval.
	Refresh, FollowTag bool
	Interval           time.Duration
	// Once ends the session after the initial sync (so does Sync.DryRun).
	Once bool
	// Helper is --helper (auto, ephemeral or never) and HelperImage --helper-image: pkg/cmd
	// builds the session's Executor from them.
	Helper, HelperImage string
	// Restart restarts the app after each batch that changed something (--restart); with
	// restart.Process the workload first rolls out with the supervisor (Images.Supervise).
	Restart restart.Mode
	// SyncBack brings the listed paths back from the source replica (see
	// pkg/syncback); off when it lists none.
	SyncBack syncback.Config
	// Forward are the --forward ports kept forwarded to the workload's synced, Ready pods.
	Forward []forward.Spec
	// Logs follows the synced containers' output (--logs), as LogsConfig says.
	Logs       bool
	LogsConfig logs.Config
	// State is where the saved ancestor lives (see StateConfig); a live session's control
	// socket is registered under State.Dir too (see pkg/control).
	State StateConfig
	// Name is the livesync.yaml entry the session runs, "" for one from the command line:
	// `kubectl livesync wait` finds the session by it.
	Name string
}

// Deps are what a session talks to; pkg/cmd builds the real ones, tests fakes.
type Deps struct {
	// Resolve reads the workload; it is called again after a pull-policy patch and before
	// each --follow-tag refresh, since either changes it.
	Resolve func() (*workload.Workload, error)
	// Client is what the tracker watches pods with.
	Client   kubernetes.Interface
	Executor filesync.Executor
	// NewWatcher watches the local roots; nil means watch.New.
	NewWatcher func(roots []string, opts watch.Options) (watch.Watcher, error)
	Images     Images
	Reporter   Reporter
	// Notes receives kubectl's "Defaulted container" note.
	Notes io.Writer
	// Clock ticks --follow-tag; nil means the real clock.
	Clock clock.WithTicker
	// Releases carries the IDs (filesync.Held.ID) of held mass deletes the user let through
	// in the session; nil when nobody is asked (-o json, --once, not a terminal).
	Releases <-chan string
	// PortForward dials pods/portforward for Config.Forward; Logs opens pods/log for
	// Config.Logs.
	PortForward forward.Dialer
	Logs        logs.Opener
	// Cluster names the cluster for the saved state's key (see ClusterID).
	Cluster string
}

// Images changes the image side of a workload: its pull policy, and moved tags pinned to
// their new digests (waiting for the rollout either way).
type Images interface {
	SetPullPolicy(ctx context.Context, w *workload.Workload, containers []string, policy string) error
	// Refresh pins the moved tags of the containers; quiet leaves out "already current".
	Refresh(ctx context.Context, w *workload.Workload, containers []string, quiet bool) error
	// Supervise rolls the workload out with its containers' commands under livesync's
	// supervisor (--restart process); under --dry-run it shows the patch instead.
	Supervise(ctx context.Context, w *workload.Workload, containers []string) error
}

// Reporter tells the user what the session does: the engine's and the tracker's events,
// and the session's own.
type Reporter interface {
	filesync.Reporter
	// Refreshed reports a line of what --refresh or --follow-tag did.
	Refreshed(line string)
	// Restarted reports a restart of the app in a container (--restart), or why none.
	Restarted(ev restart.Event)
	// Warn reports a problem that does not end the session.
	Warn(err error)
	// Watching says the initial syncs are under way and the roots are watched.
	Watching(roots []string)
	// Summary says what the session did, when it ends.
	Summary()
	// Forward reports a change of a --forward's state.
	Forward(ev forward.Event)
	// Log prints a line a synced container wrote (--logs), whole.
	Log(line logs.Line)
}

// Run changes the image side if asked, then syncs until ctx ends (Ctrl-C, which is not an
// error) or, with Once or DryRun, once: then an error says why not every container converged.
func Run(ctx context.Context, cfg Config, d Deps) error {
	w, err := d.Resolve()
	if err != nil {
		return err
	}
	containers, err := chooseContainers(w, cfg.Containers, d.Notes)
	if err != nil {
		return err
	}
	live := !cfg.Once && !cfg.Sync.DryRun
	var fw *forward.Forwarder
	if live && len(cfg.Forward) > 0 {
		// Bound before anything changes the workload: a busy port fails the session first.
		fw = &forward.Forwarder{Specs: cfg.Forward, Namespace: w.Namespace, Dialer: d.PortForward, Report: d.Reporter.Forward}
		if err := fw.Listen(); err != nil {
			return err
		}
		fctx, stop := context.WithCancel(ctx)
		served := make(chan struct{})
		go func() {
			fw.Serve(fctx)
			close(served)
		}()
		defer func() {
			stop()
			<-served // the ports are released when Run returns
		}()
	}
	// reverted says another writer undid the session's pull policy or pin: the session then
	// writes no more image fields (no refresh, no --follow-tag), and syncs files all the same.
	reverted := func(flag string, err error) bool {
		if !errors.Is(err, workload.ErrReverted) {
			return false
		}
		d.Reporter.Refreshed(fmt.Sprintf("%s stops: %v; files keep syncing", flag, err))
		cfg.Refresh, cfg.FollowTag = false, false
		return true
	}
	if cfg.PullPolicy != "" {
		if err := d.Images.SetPullPolicy(ctx, w, containers, cfg.PullPolicy); err != nil && !reverted("--pull-policy", err) {
			return err
		}
		// The refresh's patch needs the new resourceVersion.
		if w, err = d.Resolve(); err != nil {
			return err
		}
	}
	if cfg.Refresh {
		if err := d.Images.Refresh(ctx, w, containers, false); err != nil && !reverted("--refresh", err) {
			return err
		}
	}
	if cfg.Restart.Kind == restart.Process {
		if cfg.Refresh || cfg.PullPolicy != "" {
			// The refresh's rollout (or a writer reverting it) changed the workload: the patch
			// needs its new resourceVersion.
			if w, err = d.Resolve(); err != nil {
				return err
			}
		}
		if err := d.Images.Supervise(ctx, w, containers); err != nil {
			return err
		}
	}

	roots, matchers, err := newMatchers(cfg)
	if err != nil {
		return err
	}
	sc := cfg.Sync
	sc.Matchers = matchers
	sink := &countingSink{live: map[string]filesync.Target{}}
	var rc *receipts
	if live {
		rc = newReceipts(nil, podsOf(d), sink.targets, cfg, matchers, d.Clock)
		rc.logs = logsOf(d)
		rc.incarnation = func(ctx context.Context, t filesync.Target) (string, error) {
			return remote.Incarnation(ctx, d.Executor, t)
		}
	}
	if cfg.Restart.Kind != restart.None {
		r := &restart.Restarter{Exec: d.Executor, Mode: cfg.Restart, Report: d.Reporter.Restarted}
		sc.AfterSync = r.AfterSync
		if rc != nil {
			r.Report = rc.restarted(r.Report)
			sc.AfterSync = rc.afterSync(r.AfterSync)
		}
	}
	back, opts, err := newSyncBack(cfg, d)
	if err != nil {
		return err
	}
	tctx, stopTracking := context.WithCancel(ctx)
	defer stopTracking()
	incs := &incarnations{ctx: tctx, ex: d.Executor, got: map[string]string{}}
	keep := newKeeper(cfg, d, w, containers, incs.of)
	if keep != nil && back != nil {
		keep.conflicts = back
	}
	if keep != nil {
		opts = append(opts, filesync.WithAncestry(keep))
		kctx, stopKeeping := context.WithCancel(context.WithoutCancel(ctx))
		kept := make(chan struct{})
		go func() { keep.run(kctx); close(kept) }()
		defer func() { stopKeeping(); <-kept }() // the last save, after the engine's
	}
	nodes := newNodeWatch(tctx, d.Client, d.Reporter)
	defer func() { stopTracking(); nodes.wait() }()
	rep := syncedReporter(engineReporter(nodes, back), fw)
	if rc != nil {
		rep = rc.observe(rep)
	}
	engine := filesync.New(d.Executor, sc, append(opts, filesync.WithReporter(rep))...)
	sink.Sink = engine
	if rc != nil {
		rc.ledger = engineLedger{engine}
		rc.status.Workload, rc.status.Namespace, rc.status.Name = w.Ref(), w.Namespace, cfg.Name
	}
	tsink := syncBackSink(tctx, back, cfg, d, engine, sink, incs.of)
	if keep != nil {
		tsink = &stateSink{Sink: tsink, k: keep}
	}
	tracker := &workload.Tracker{Client: d.Client, Workload: w, Containers: containers, Sink: tsink, Reporter: d.Reporter, Pods: []workload.PodObserver{nodes}}
	var follower *logs.Follower
	if live && cfg.Logs {
		report := d.Reporter.Log
		if rc != nil {
			report = rc.logged(report)
		}
		follower = &logs.Follower{Config: cfg.LogsConfig, Namespace: w.Namespace, Open: d.Logs, Report: report, Warn: d.Reporter.Warn}
		follower.Start(tctx)
		tracker.Pods = append(tracker.Pods, follower)
	}
	if fw != nil {
		tracker.Pods = append(tracker.Pods, fw)
	}
	synced := make(chan struct{})
	go tracker.Run(tctx, synced)
	select {
	case <-synced:
	case <-ctx.Done():
		return nil
	}
	if follower != nil {
		follower.Listed()
	}
	if fw != nil {
		fw.Listed()
	}

	if cfg.Once || cfg.Sync.DryRun {
		ok, err := engine.Once(ctx)
		if ok && err == nil && back != nil {
			// One pass after the initial sync converged; its failure is reported.
			_ = back.Pass(ctx)
		}
		d.Reporter.Summary()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("not every container of %s converged; see the errors above", w.Ref())
		}
		if sink.count() == 0 {
			if len(containers) == 0 {
				return fmt.Errorf("%s has no running pod to sync into", w.Ref())
			}
			return fmt.Errorf("%s has no running pod with container %q to sync into", w.Ref(), strings.Join(containers, ", "))
		}
		return nil
	}

	newWatcher := d.NewWatcher
	if newWatcher == nil {
		newWatcher = watch.New
	}
	watcher, err := newWatcher(roots, watch.Options{Skip: skipper(roots, matchers)})
	if err != nil {
		return err
	}
	defer func() { _ = watcher.Close() }()
	changes := make(chan coalesce.Change, 1024)
	go pump(ctx, watcher, roots, matchers, changes, d.Reporter)
	if cfg.FollowTag {
		go followTag(ctx, cfg.Interval, containers, d)
	}
	if d.Releases != nil {
		go release(ctx, engine, d.Releases, d.Reporter)
	}
	if rc != nil && cfg.State.Dir != "" {
		stop, err := serveControl(ctx, cfg, rc, roots)
		if err != nil {
			d.Reporter.Warn(err)
		} else {
			defer stop()
		}
	}
	d.Reporter.Watching(roots)
	if back != nil {
		go back.Run(tctx)
	}
	err = engine.Run(ctx, changes)
	if follower != nil {
		// No log line after the summary.
		stopTracking()
		follower.Wait()
	}
	d.Reporter.Summary()
	if ctx.Err() != nil {
		return nil // Ctrl-C is how a session ends
	}
	return err
}

// syncedReporter tells fw about each initial sync that converged: that container's pod may
// serve the forwards once it is Ready.
func syncedReporter(rep filesync.Reporter, fw *forward.Forwarder) filesync.Reporter {
	if fw == nil {
		return rep
	}
	return filesync.ReporterFunc(func(ev filesync.Event) {
		rep.Report(ev)
		if e, ok := ev.(filesync.InitialSync); ok && e.Err == nil {
			fw.Synced(e.Target.ContainerID)
		}
	})
}

// release lets through each held mass delete the user answered yes to, until ctx ends.
func release(ctx context.Context, engine *filesync.Engine, ids <-chan string, r Reporter) {
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-ids:
			if engine.Release(id) == 0 {
				r.Warn(errors.New("no container holds those deletes any more: a change under them decided them again"))
			}
		}
	}
}

// followTag pins each new push of the tag; the tracker then sees the new pods and the
// engine gives them their initial sync. A failed poll is reported and the next one tries.
// Following stops for good, said once, when another writer reverted a pin or owns the
// workload and re-applies it (Flux, Argo CD): each new push would be one more rollout the
// owner undoes, a loop against it. Files keep syncing.
func followTag(ctx context.Context, interval time.Duration, containers []string, d Deps) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	workload.Follow(ctx, d.Clock, interval, func(ctx context.Context) error {
		w, err := d.Resolve()
		if err != nil {
			return err
		}
		err = d.Images.Refresh(ctx, w, containers, true)
		if errors.Is(err, workload.ErrReverted) || errors.Is(err, workload.ErrReconciled) {
			d.Reporter.Refreshed(fmt.Sprintf("--follow-tag stops pinning: %v; files keep syncing", err))
			stop()
			return nil
		}
		return err
	}, func(err error) {
		d.Reporter.Refreshed(fmt.Sprintf("warning: following the tag: %v", err))
	})
}

// chooseContainers picks the containers to sync into: each one named with -c, checked against
// the workload, or else the default one, the way kubectl exec picks it (with its "Defaulted
// container" note). Each becomes a target of its own in every pod. Pods picked by -l alone
// may differ, or not exist yet: the tracker then says which lack a named container, and
// picks each pod's default container when none was named and no pod ran at the start.
func chooseContainers(w *workload.Workload, names []string, notes io.Writer) ([]string, error) {
	if w.Kind == workload.KindSelected && (len(names) > 0 || len(w.Spec.Containers) == 0) {
		return slices.Compact(slices.Clone(names)), nil
	}
	if len(names) == 0 {
		c, err := w.SyncContainer("", notes)
		if err != nil {
			return nil, err
		}
		return []string{c}, nil
	}
	var out []string
	for _, n := range names {
		if slices.Contains(out, n) {
			continue
		}
		c, err := w.SyncContainer(n, notes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// countingSink counts the containers the tracker hands the engine: a --once session with
// none synced nothing, which is an error.
type countingSink struct {
	workload.Sink
	mu   sync.Mutex
	live map[string]filesync.Target
}

func (s *countingSink) AddTarget(t filesync.Target) {
	s.mu.Lock()
	s.live[t.String()] = t
	s.mu.Unlock()
	s.Sink.AddTarget(t)
}

func (s *countingSink) RemoveTarget(t filesync.Target) {
	s.mu.Lock()
	delete(s.live, t.String())
	s.mu.Unlock()
	s.Sink.RemoveTarget(t)
}

// targets returns the containers the engine syncs into now.
func (s *countingSink) targets() []filesync.Target {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]filesync.Target, 0, len(s.live))
	for _, t := range s.live {
		out = append(out, t)
	}
	return out
}

func (s *countingSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}
