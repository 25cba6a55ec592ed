package session

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncback"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// newSyncBack returns the session's sync-back runner, nil when no path is
// listed, and the engine's options for it (the runner guards uploads to the
// source, see syncback.Runner.Expect).
func newSyncBack(cfg Config, d Deps) (*syncback.Runner, []filesync.Option, error) {
	if len(cfg.SyncBack.Globs) == 0 {
		return nil, nil, nil
	}
	rep, _ := d.Reporter.(syncback.Reporter)
	r, err := syncback.New(cfg.SyncBack, rep, d.Clock)
	if err != nil {
		return nil, nil, err
	}
	return r, []filesync.Option{filesync.WithUploadGuard(r)}, nil
}

// syncBackSink makes engine r's host and returns the sink the tracker
// feeds: it tells r of every target, with its pod's creation time (the
// oldest pod is the source), before the engine hears of it, so
// target-added can name the source.
func syncBackSink(ctx context.Context, r *syncback.Runner, cfg Config, d Deps, engine *filesync.Engine, sink workload.Sink, inc func(filesync.Target) string) workload.Sink {
	if r == nil {
		return sink
	}
	r.Serve(engine)
	if cfg.SyncBack.Inotify {
		r.Trigger(d.Executor)
	}
	return &backSink{Sink: sink, r: r, client: d.Client, inc: inc, ctx: ctx}
}

type backSink struct {
	workload.Sink
	r      *syncback.Runner
	client kubernetes.Interface
	inc    func(filesync.Target) string
	ctx    context.Context
}

func (s *backSink) AddTarget(t filesync.Target) {
	s.r.Add(t, podCreated(s.ctx, s.client, t), s.inc(t))
	s.Sink.AddTarget(t)
}

func (s *backSink) RemoveTarget(t filesync.Target) {
	s.r.Remove(t)
	s.Sink.RemoveTarget(t)
}

// podCreated is when t's pod was created; now when that cannot be read
// (the pod then counts as the youngest).
func podCreated(ctx context.Context, c kubernetes.Interface, t filesync.Target) time.Time {
	if c == nil {
		return time.Now()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pod, err := c.CoreV1().Pods(t.Namespace).Get(ctx, t.Pod, metav1.GetOptions{})
	if err != nil {
		return time.Now()
	}
	return pod.CreationTimestamp.Time
}

// incarnation reads which incarnation of t's container runs now, before
// its initial sync; "" (sync-back refused from it) when that fails.
func incarnation(ctx context.Context, ex filesync.Executor, t filesync.Target) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // a helper may have to start first
	defer cancel()
	inc, err := remote.Incarnation(ctx, ex, t)
	if err != nil {
		return ""
	}
	return inc
}

// engineReporter is what the engine reports to: rep, and with sync-back
// the end of each on-sync run to r, whose next pass then lists everything,
// and each initial sync that converged, after which r's first pass runs.
func engineReporter(rep filesync.Reporter, r *syncback.Runner) filesync.Reporter {
	if r == nil {
		return rep
	}
	return filesync.ReporterFunc(func(ev filesync.Event) {
		switch e := ev.(type) {
		case filesync.OnSync:
			r.OnSyncRan(e.Target)
		case filesync.InitialSync:
			if e.Err == nil {
				r.Synced(e.Target)
			}
		}
		rep.Report(ev)
	})
}
