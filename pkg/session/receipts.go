package session

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/livesync-dev/kubectl-livesync/pkg/control"
	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/logs"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/restart"
)

// want is what a wait expects one replica to hold at one path: the local bytes (by content
// hash) or link target when the wait was asked, or nothing for a path that is gone locally.
type want struct {
	mapping int
	rel     string
	local   string
	typ     planner.EntryType
	sum     [32]byte
	size    int64
	mtime   time.Time
	link    string
	absent  bool
}

// receipt is what one replica confirmed against a wait's wants: the first path it lacks ("" when
// none), and the generations of its confirmed index when it looked.
type receipt struct {
	missing string
	gens    []uint64
}

// ledger reads what a replica's container confirmed; engineLedger reads the engine's index
// between batches, tests use a fake. ErrNotSynced: the replica is not synced (yet).
type ledger interface {
	check(ctx context.Context, t filesync.Target, wants []want) (receipt, error)
}

// engineLedger asks the engine, on the target's worker, so that no batch is half applied.
type engineLedger struct{ e *filesync.Engine }

func (l engineLedger) check(ctx context.Context, t filesync.Target, wants []want) (receipt, error) {
	var r receipt
	err := l.e.Visit(ctx, t, func(v *filesync.Visit) error {
		for i := range v.Mappings() {
			r.gens = append(r.gens, v.Generation(i))
		}
		for _, w := range wants {
			e, ok, known := v.Entry(w.mapping, w.rel)
			if !holds(w, e, ok, known) {
				r.missing = w.local
				return nil
			}
		}
		return nil
	})
	return r, err
}

// holds reports whether a confirmed entry is what w wants. The engine records the sha256 of the
// bytes it sent; an entry confirmed from a listing without one is compared by size and mtime,
// the engine's own rule for "unchanged".
func holds(w want, e planner.Entry, ok, known bool) bool {
	if w.absent {
		return !ok
	}
	if !ok || !known || e.Type != w.typ {
		return false
	}
	switch w.typ {
	case planner.TypeSymlink:
		return e.Link == w.link
	case planner.TypeFile:
		if e.Sum != nil {
			return *e.Sum == w.sum
		}
		return e.Size == w.size && e.MTime.Equal(w.mtime)
	}
	return true
}

// podReader reads a replica's pod for --for=ready.
type podReader func(ctx context.Context, namespace, name string) (*corev1.Pod, error)

// logReader returns the last lines a container wrote: those of its run before this one when
// previous.
type logReader func(ctx context.Context, namespace, pod, container string, previous bool) string

// receipts answers the control socket's requests for one session: what it syncs, and waits for
// the local bytes to be confirmed (and restarted, and Ready) in every replica.
type receipts struct {
	ledger ledger
	pods   podReader
	logs   logReader
	// incarnation reads which incarnation of a container runs (remote.Incarnation); nil: a
	// restart is taken as survived once it ended.
	incarnation func(ctx context.Context, t filesync.Target) (string, error)
	targets     func() []filesync.Target
	maps        []planner.Mapping
	match       []planner.Matcher
	restart     restart.Mode
	clk         clock.WithTicker
	status      control.Status // the fixed part

	mu    sync.Mutex
	state map[string]*targetState // by Target.String()
	// following: the session follows its containers' output (--logs), kept in lines (the
	// last maxLogLines) with when each came; lastSync is when a batch or initial sync last
	// applied.
	following bool
	lines     []heardLine
	lastSync  time.Time
	dropped   int // lines since lastSync no longer in lines
	// podsRead are the pods read last, by namespace/name (see pod).
	podsRead map[string]podRead
	// down are replicas whose container stopped running (the engine removed them), by
	// Target.String(), until a new container of theirs runs or their pod goes: a replica that
	// crashed is still one a wait waits for.
	down map[string]filesync.Target
	wake chan struct{} // closed and replaced on every event that may change an answer
}

// targetState is what the session's events said about one replica.
type targetState struct {
	containerID string
	problem     string
	// restarts counts --restart runs that ended; doneGens are the index generations the last
	// successful one saw when it started: a replica whose index is still at them runs its bytes.
	restarts int
	last     time.Time
	doneGens []uint64
	running  bool
	// incarnation is the container's before its first restart (see remote.Incarnation);
	// alive the restart count a probe last found it unchanged at, died why a probe did not.
	incarnation string
	alive       int
	died        string
}

func newReceipts(l ledger, pods podReader, targets func() []filesync.Target, cfg Config, match []planner.Matcher, clk clock.WithTicker) *receipts {
	if clk == nil {
		clk = clock.RealClock{}
	}
	r := &receipts{ledger: l, pods: pods, targets: targets, maps: cfg.Sync.Mappings, match: match, restart: cfg.Restart, clk: clk,
		state: map[string]*targetState{}, down: map[string]filesync.Target{}, podsRead: map[string]podRead{}, wake: make(chan struct{})}
	for _, m := range cfg.Sync.Mappings {
		r.status.Mappings = append(r.status.Mappings, control.Mapping{Local: string(m.Local), Remote: string(m.Remote)})
	}
	if cfg.Restart.Kind != restart.None {
		r.status.Restart = cfg.Restart.String()
	}
	return r
}

// of returns t's state, a fresh one for a new container of the same pod.
func (r *receipts) of(t filesync.Target) *targetState {
	s := r.state[t.String()]
	if s == nil || s.containerID != t.ContainerID {
		s = &targetState{containerID: t.ContainerID}
		r.state[t.String()] = s
	}
	return s
}

// changed wakes every wait: something it looks at may have changed.
func (r *receipts) changed() {
	close(r.wake)
	r.wake = make(chan struct{})
}

// observe keeps what the engine's events say about each replica, and passes them on.
func (r *receipts) observe(rep filesync.Reporter) filesync.Reporter {
	return filesync.ReporterFunc(func(ev filesync.Event) {
		rep.Report(ev)
		r.mu.Lock()
		defer r.mu.Unlock()
		switch e := ev.(type) {
		case filesync.Held:
			r.of(e.Target).problem = fmt.Sprintf("deletes held back (%d entries, e.g. %s): %s", e.Deleted, strings.Join(e.Examples, ", "), e.Reason)
		case filesync.Error:
			r.of(e.Target).problem = oneLine(e.Err.Error())
		case filesync.Recovered:
			r.of(e.Target).problem = ""
		case filesync.InitialSync:
			if e.Err != nil {
				r.of(e.Target).problem = "its initial sync failed: " + oneLine(e.Err.Error())
			} else {
				r.of(e.Target).problem = ""
				r.lastSync, r.dropped = r.clk.Now(), 0
			}
		case filesync.Batch:
			// From when its first change was seen: the batch is reported once every replica
			// applied it, and a replica that applied it first may have restarted and written
			// since.
			r.lastSync, r.dropped = r.clk.Now().Add(-e.Latency), 0
		case filesync.Restarting:
			p := fmt.Sprintf("the container keeps restarting (%d times in %s)", e.Restarts, e.Window)
			if e.ExitCode != nil {
				p += fmt.Sprintf(", last exit code %d", *e.ExitCode)
			}
			r.of(e.Target).problem = p
		case filesync.TargetAdded:
			delete(r.down, e.Target.String())
		case filesync.TargetRemoved:
			delete(r.state, e.Target.String())
			r.down[e.Target.String()] = e.Target
		}
		r.changed()
	})
}

// afterSync wraps the --restart hook: before it restarts, it notes what the replica's index
// holds, so that a wait knows which bytes that restart put into the running app.
func (r *receipts) afterSync(hook func(context.Context, filesync.Target)) func(context.Context, filesync.Target) {
	return func(ctx context.Context, t filesync.Target) {
		rc, err := r.ledger.check(ctx, t, nil)
		r.mu.Lock()
		s := r.of(t)
		s.running = true
		known := s.incarnation != ""
		r.mu.Unlock()
		if !known && r.incarnation != nil {
			// Once per container: a wait later finds out whether the app survived its restarts
			// by asking again (see survived).
			if inc, err := r.incarnation(ctx, t); err == nil {
				r.mu.Lock()
				r.of(t).incarnation = inc
				r.mu.Unlock()
			}
		}
		hook(ctx, t)
		r.mu.Lock()
		s = r.of(t)
		s.running = false
		if err == nil && !strings.HasPrefix(s.problem, "restart failed") {
			s.restarts++
			s.last = r.clk.Now()
			s.doneGens = rc.gens
			s.died = ""
		}
		r.changed()
		r.mu.Unlock()
	}
}

// maxLogLines bounds the lines a session keeps for a client that asks what its containers
// wrote since the last sync.
const maxLogLines = 1000

// heardLine is a line a container wrote, and when the session got it.
type heardLine struct {
	line control.LogLine
	at   time.Time
}

// logged keeps the lines the containers write (--logs), and passes them on.
func (r *receipts) logged(report func(logs.Line)) func(logs.Line) {
	r.mu.Lock()
	r.following = true
	r.mu.Unlock()
	return func(l logs.Line) {
		report(l)
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.lines) == maxLogLines {
			for _, h := range r.lines[:maxLogLines/10] {
				if !h.at.Before(r.lastSync) {
					r.dropped++
				}
			}
			r.lines = slices.Delete(r.lines, 0, maxLogLines/10)
		}
		r.lines = append(r.lines, heardLine{control.LogLine{Namespace: l.Namespace, Pod: l.Pod, Container: l.Container, Time: l.Time, Text: l.Text}, r.clk.Now()})
	}
}

// Logs returns the lines the containers wrote since the last sync: what the new bytes did.
// Lines are taken by when the session got them, not by their containers' clocks.
func (r *receipts) Logs(context.Context) control.Logs {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := control.Logs{Following: r.following, LastSync: r.lastSync, Lines: []control.LogLine{}}
	i := slices.IndexFunc(r.lines, func(h heardLine) bool { return !h.at.Before(r.lastSync) })
	if i < 0 {
		return out
	}
	for _, h := range r.lines[i:] {
		out.Lines = append(out.Lines, h.line)
	}
	out.Dropped = r.dropped
	return out
}

// restarted keeps what each restart reported: a failed one is the replica's problem until one
// succeeds.
func (r *receipts) restarted(report func(restart.Event)) func(restart.Event) {
	return func(ev restart.Event) {
		report(ev)
		r.mu.Lock()
		s := r.of(ev.Target)
		switch {
		case ev.Err != nil:
			s.problem = "restart failed: " + oneLine(ev.Err.Error())
		case strings.HasPrefix(s.problem, "restart failed"):
			s.problem = ""
		}
		r.mu.Unlock()
	}
}

// Status says what the session syncs and how each replica is.
func (r *receipts) Status(ctx context.Context) control.Status {
	st := r.status
	st.Mappings = slices.Clone(st.Mappings)
	for _, t := range r.sortedTargets() {
		_, err := r.ledger.check(ctx, t, nil)
		r.mu.Lock()
		s := r.of(t)
		st.Targets = append(st.Targets, control.Target{Pod: t.Pod, Container: t.Container, ContainerID: t.ContainerID,
			Synced: err == nil, Problem: s.problem, Restarts: s.restarts, LastRestart: s.last})
		r.mu.Unlock()
	}
	return st
}

func (r *receipts) sortedTargets() []filesync.Target {
	ts := r.targets()
	slices.SortFunc(ts, func(a, b filesync.Target) int { return strings.Compare(a.String(), b.String()) })
	return ts
}

// pollEvery bounds how long a wait goes without looking again when no event woke it: a pod
// turning Ready is not an engine event.
const pollEvery = 250 * time.Millisecond

// Wait answers once every replica holds the local bytes of req.Paths as they are now (and, as
// req.For says, restarted them and is Ready), or when req.Timeout has passed with what each
// replica still lacks.
func (r *receipts) Wait(ctx context.Context, req control.WaitRequest) control.WaitResult {
	start := r.clk.Now()
	res := control.WaitResult{For: req.For, Name: r.status.Name, Workload: r.status.Workload, Namespace: r.status.Namespace}
	switch req.For {
	case control.ForSynced, control.ForReady:
	case control.ForRestarted:
		if r.restart.Kind == restart.None {
			res.Message = "this session restarts nothing (no --restart): wait --for=synced or --for=ready"
			return res
		}
	default:
		res.Message = fmt.Sprintf("unknown --for %q: use synced, restarted or ready", req.For)
		return res
	}
	wants, err := r.wants(req.Paths)
	if err != nil {
		res.Message = err.Error()
		return res
	}
	res.Files = len(wants)
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	tick := r.clk.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		r.mu.Lock()
		wake := r.wake
		r.mu.Unlock()
		res.Targets, res.Message = r.check(ctx, req.For, wants, res.Targets)
		res.OK = res.Message == "" && !slices.ContainsFunc(res.Targets, func(t control.TargetWait) bool { return !t.OK })
		res.DurationMs = r.clk.Since(start).Milliseconds()
		if res.OK {
			return res
		}
		select {
		case <-ctx.Done():
			r.explain(ctx, res.Targets)
			return res
		case <-wake:
		case <-tick.C():
		}
	}
}

// check looks once at every replica.
func (r *receipts) check(ctx context.Context, kind string, wants []want, prev []control.TargetWait) ([]control.TargetWait, string) {
	ts := r.sortedTargets()
	down := r.stillDown(ctx, ts)
	if len(ts) == 0 && len(down) == 0 {
		return nil, "no replica to sync into yet"
	}
	out := make([]control.TargetWait, len(ts), len(ts)+len(down))
	// Each replica on its own: one whose container hangs an exec does not hold up the others'
	// answers.
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Go(func() {
			out[i] = control.TargetWait{Namespace: t.Namespace, Pod: t.Pod, Container: t.Container}
			out[i].Missing = r.checkOne(ctx, kind, t, wants)
			out[i].OK = out[i].Missing == ""
		})
	}
	wg.Wait()
	for _, t := range down {
		out = append(out, control.TargetWait{Namespace: t.Namespace, Pod: t.Pod, Container: t.Container, Missing: t.why})
	}
	if ctx.Err() != nil {
		// The wait's time ran out while it looked: what a replica said before says more than
		// "context deadline exceeded".
		for i, tw := range out {
			if j := slices.IndexFunc(prev, func(p control.TargetWait) bool {
				return p.Namespace == tw.Namespace && p.Pod == tw.Pod && p.Container == tw.Container
			}); j >= 0 && !tw.OK {
				out[i] = prev[j]
			}
		}
	}
	return out, ""
}

// downTarget is a replica whose container does not run, and why.
type downTarget struct {
	filesync.Target
	why string
}

// stillDown returns the replicas whose container stopped and whose pod is still there, with the
// container's state; a pod that is gone or going (a rollout, a scale-down) is forgotten.
func (r *receipts) stillDown(ctx context.Context, live []filesync.Target) []downTarget {
	r.mu.Lock()
	var down []filesync.Target
	for k, t := range r.down {
		if slices.ContainsFunc(live, func(l filesync.Target) bool { return l.String() == k }) {
			delete(r.down, k)
			continue
		}
		down = append(down, t)
	}
	r.mu.Unlock()
	if r.pods == nil {
		return nil
	}
	slices.SortFunc(down, func(a, b filesync.Target) int { return strings.Compare(a.String(), b.String()) })
	var out []downTarget
	for _, t := range down {
		pod, err := r.pod(ctx, t.Namespace, t.Pod)
		if apierrors.IsNotFound(err) || err == nil && (pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
			r.mu.Lock()
			delete(r.down, t.String())
			r.mu.Unlock()
			continue
		}
		why := "its container is not running"
		if err != nil {
			why += " (reading the pod: " + oneLine(err.Error()) + ")"
		}
		if err == nil {
			for _, cs := range pod.Status.ContainerStatuses {
				if cs.Name == t.Container {
					why += ": " + containerState(cs)
				}
			}
		}
		out = append(out, downTarget{t, why})
	}
	return out
}

func (r *receipts) checkOne(ctx context.Context, kind string, t filesync.Target, wants []want) string {
	rc, err := r.ledger.check(ctx, t, wants)
	r.mu.Lock()
	s := *r.of(t)
	r.mu.Unlock()
	why := func(what string) string {
		if s.problem != "" {
			return what + ": " + s.problem
		}
		return what
	}
	switch {
	case errors.Is(err, filesync.ErrNotSynced):
		return why("not synced yet (its initial sync has not converged, or it holds deletes back)")
	case err != nil:
		return why("could not look: " + oneLine(err.Error()))
	case rc.missing != "":
		return why(fmt.Sprintf("does not hold the local bytes of %s yet", rc.missing))
	}
	if kind == control.ForSynced {
		return ""
	}
	if r.restart.Kind != restart.None && (s.running || !slices.Equal(s.doneGens, rc.gens)) {
		return why(fmt.Sprintf("holds the bytes, but --restart %s has not run since they landed", r.restart))
	}
	if r.restart.Kind != restart.None {
		if miss := r.survived(ctx, t, s); miss != "" {
			return miss
		}
	}
	if kind == control.ForReady {
		return r.ready(ctx, t)
	}
	return ""
}

// aliveAfter is how long after a restart a wait looks again at the container, to see that the
// app survived it: an app that exits on reload (a bad config, a crash on the new code) ends its
// container at once, and the kubelet's status would say so only later.
const aliveAfter = time.Second

// probeWithin bounds that look: an exec into a container that is going away can hang, and
// one that did not answer in time is asked again on the wait's next look.
const probeWithin = 5 * time.Second

// survived says why t's app may not have survived its last restart, "" when it did: the same
// container incarnation runs aliveAfter after the restart ended as before it began. Each
// restart is asked about once.
func (r *receipts) survived(ctx context.Context, t filesync.Target, s targetState) string {
	if r.incarnation == nil || s.incarnation == "" || s.restarts == 0 || s.alive == s.restarts {
		return ""
	}
	if s.died != "" {
		return s.died
	}
	if d := r.clk.Since(s.last); d < aliveAfter {
		return fmt.Sprintf("restarted %s ago; looking whether the app survived it", d.Round(time.Millisecond))
	}
	pctx, cancel := context.WithTimeout(ctx, probeWithin)
	inc, err := r.incarnation(pctx, t)
	cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.of(t)
	switch {
	case err != nil && pctx.Err() != nil:
		return "could not look whether the app survived --restart: " + oneLine(err.Error())
	case err != nil:
		cur.died = "the container did not survive --restart: " + oneLine(err.Error())
	case inc != "" && inc != s.incarnation:
		cur.died = "the container did not survive --restart: it ended after the restart, and another runs in its place"
	default:
		if cur.restarts == s.restarts {
			cur.alive = s.restarts
		}
		return ""
	}
	return cur.died
}

// podRead is a pod as read at a time; a failed read keeps the pod read before it.
type podRead struct {
	at  time.Time
	pod *corev1.Pod
	err error
}

// podFresh is how long a wait uses a pod it read: waits look every pollEvery, at every replica,
// and the session's client shares its request rate with the tracker.
const podFresh = time.Second

// pod reads a replica's pod at most once per podFresh; when a read fails (the client's rate
// limit near the wait's deadline, a hiccup), the pod read before answers, if there is one.
func (r *receipts) pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	key := namespace + "/" + name
	r.mu.Lock()
	last, ok := r.podsRead[key]
	r.mu.Unlock()
	if ok && r.clk.Since(last.at) < podFresh {
		return last.pod, last.err
	}
	pod, err := r.pods(ctx, namespace, name)
	if err != nil && !apierrors.IsNotFound(err) && ok && last.err == nil {
		return last.pod, nil
	}
	r.mu.Lock()
	r.podsRead[key] = podRead{at: r.clk.Now(), pod: pod, err: err}
	r.mu.Unlock()
	return pod, err
}

// ready says why t's pod or container is not Ready, "" when both are.
func (r *receipts) ready(ctx context.Context, t filesync.Target) string {
	if r.pods == nil {
		return ""
	}
	pod, err := r.pod(ctx, t.Namespace, t.Pod)
	if err != nil {
		return "reading the pod: " + oneLine(err.Error())
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != t.Container {
			continue
		}
		if !cs.Ready {
			return "container not Ready: " + containerState(cs)
		}
		if t.ContainerID != "" && cs.ContainerID != "" && cs.ContainerID != t.ContainerID {
			return "the container was replaced: " + containerState(cs)
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
			return "pod not Ready: " + strings.TrimSpace(c.Reason+" "+c.Message)
		}
	}
	return ""
}

// explainWithin bounds what explain reads after the wait's own time is up.
const explainWithin = 5 * time.Second

// explain adds, to each replica a wait gave up on, how its container runs when it is not
// simply running (it exited, with its status, and the last lines it wrote): a replica that
// crashed on the new bytes is named with why, not only with what it lacks.
func (r *receipts) explain(ctx context.Context, tws []control.TargetWait) {
	if r.pods == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), explainWithin)
	defer cancel()
	for i, tw := range tws {
		if tw.OK {
			continue
		}
		pod, err := r.pods(ctx, tw.Namespace, tw.Pod)
		if err != nil {
			continue
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name != tw.Container || cs.State.Running != nil && cs.RestartCount == 0 {
				continue
			}
			if st := containerState(cs); !strings.Contains(tw.Missing, st) {
				tws[i].Missing += "; the container: " + st
			}
			if r.logs != nil {
				if lines := r.logs(ctx, tw.Namespace, tw.Pod, tw.Container, cs.State.Terminated == nil); lines != "" {
					// Quoted: the app's own words, newlines and all, kept apart from the line's.
					tws[i].Missing += fmt.Sprintf("; its last lines: %q", lines)
				}
			}
		}
	}
}

// containerState says how a container runs or why not, with the exit status of its last run.
func containerState(cs corev1.ContainerStatus) string {
	var parts []string
	switch st := cs.State; {
	case st.Waiting != nil:
		parts = append(parts, "waiting ("+st.Waiting.Reason+")")
	case st.Terminated != nil:
		parts = append(parts, fmt.Sprintf("exited with status %d (%s)", st.Terminated.ExitCode, st.Terminated.Reason))
	case st.Running != nil:
		parts = append(parts, "running")
	}
	if lt := cs.LastTerminationState.Terminated; lt != nil {
		parts = append(parts, fmt.Sprintf("last run exited with status %d (%s)", lt.ExitCode, lt.Reason))
	}
	if cs.RestartCount > 0 {
		parts = append(parts, fmt.Sprintf("%d restarts", cs.RestartCount))
	}
	return strings.Join(parts, ", ")
}

// wants reads the local side now: each named path (every synced path when none is named),
// files by content hash, so the wait is for these bytes whatever happens later.
func (r *receipts) wants(paths []string) ([]want, error) {
	if len(paths) == 0 {
		for _, m := range r.maps {
			paths = append(paths, string(m.Local))
		}
	}
	var out []want
	for _, p := range paths {
		i, rel, ok := r.mappingOf(p)
		if !ok {
			return nil, fmt.Errorf("%s is not under any synced LOCAL of this session (%s)", p, r.locals())
		}
		ws, err := r.walk(i, rel, p)
		if err != nil {
			return nil, err
		}
		out = append(out, ws...)
	}
	return out, nil
}

func (r *receipts) locals() string {
	var s []string
	for _, m := range r.maps {
		s = append(s, string(m.Local))
	}
	return strings.Join(s, ", ")
}

// mappingOf finds the mapping p is under, and p's slash-separated path in it.
func (r *receipts) mappingOf(p string) (int, string, bool) {
	for i, m := range r.maps {
		rel, err := filepath.Rel(string(m.Local), p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		if rel == "." {
			rel = ""
		}
		return i, filepath.ToSlash(rel), true
	}
	return 0, "", false
}

func (r *receipts) ignored(i int, rel string, dir bool) bool {
	if i >= len(r.match) || r.match[i] == nil || rel == "" {
		return false
	}
	return r.match[i].Match(rel, dir)
}

// walk lists what p holds now: a file or link, or each file and link under a directory that
// the session syncs (ignored paths are left out), or nothing when p is gone.
func (r *receipts) walk(i int, rel, p string) ([]want, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return []want{{mapping: i, rel: rel, local: p, absent: true}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", p, err)
	}
	if !fi.IsDir() {
		w, ok, err := wantOf(i, rel, p, fi)
		if err != nil || !ok || r.ignored(i, rel, false) {
			return nil, err
		}
		return []want{w}, nil
	}
	var out []want
	err = filepath.WalkDir(p, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		sub, _ := filepath.Rel(p, name)
		srel := rel
		if sub != "." {
			srel = pathJoin(rel, filepath.ToSlash(sub))
		}
		if r.ignored(i, srel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		w, ok, err := wantOf(i, srel, name, fi)
		if ok {
			out = append(out, w)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", p, err)
	}
	return out, nil
}

func pathJoin(a, b string) string {
	if a == "" {
		return b
	}
	return a + "/" + b
}

// wantOf hashes a regular file, or reads a link; other types are never synced.
func wantOf(i int, rel, name string, fi fs.FileInfo) (want, bool, error) {
	w := want{mapping: i, rel: rel, local: name}
	switch {
	case fi.Mode().IsRegular():
		f, _, err := localtree.OpenRegular(name)
		if err != nil {
			return w, false, err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return w, false, fmt.Errorf("hashing %q: %w", name, err)
		}
		w.typ, w.size, w.mtime = planner.TypeFile, fi.Size(), fi.ModTime()
		copy(w.sum[:], h.Sum(nil))
		return w, true, nil
	case fi.Mode()&fs.ModeSymlink != 0:
		l, err := os.Readlink(name)
		if err != nil {
			return w, false, fmt.Errorf("reading link %q: %w", name, err)
		}
		w.typ, w.link = planner.TypeSymlink, l
		return w, true, nil
	}
	return w, false, nil
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// serveControl registers the session's control socket under the state directory and answers it
// until stop (or ctx ends); where the platform has none (Windows, for now) it does nothing.
func serveControl(ctx context.Context, cfg Config, rc *receipts, roots []string) (stop func(), err error) {
	if !control.Supported {
		return func() {}, nil
	}
	dir, _ := os.Getwd()
	rc.status.PID, rc.status.Started = os.Getpid(), rc.clk.Now()
	reg, err := control.Register(ctx, cfg.State.Dir, control.Info{PID: os.Getpid(), Name: cfg.Name, Dir: dir,
		Workload: rc.status.Workload, Namespace: rc.status.Namespace, Roots: roots})
	if err != nil {
		return nil, fmt.Errorf("%w: kubectl livesync wait cannot reach this session", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() {
		control.Serve(sctx, reg.Listener, rc)
		close(served)
	}()
	return func() {
		cancel()
		<-served
		_ = reg.Close()
	}, nil
}

// lastLines is how many of a crashed container's last lines a failed wait quotes.
const lastLines = 3

// logsOf reads a container's last lines with the session's client.
func logsOf(d Deps) logReader {
	if d.Client == nil {
		return nil
	}
	return func(ctx context.Context, namespace, pod, container string, previous bool) string {
		n := int64(lastLines)
		b, err := d.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous, TailLines: &n}).DoRaw(ctx)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
}

// podsOf reads pods with the session's client, for --for=ready.
func podsOf(d Deps) podReader {
	if d.Client == nil {
		return nil
	}
	return func(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
		return d.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	}
}
