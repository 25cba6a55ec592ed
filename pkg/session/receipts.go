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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/livesync-dev/kubectl-livesync/pkg/control"
	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/restart"
)

// want is what a wait expects one replica to hold at one path: the local bytes (by content
// hash) or link target when the wait was asked, or nothing for a path that is gone locally.
type want struct {
	mapping int
	rel     string
	local   string
	typ     filesync.EntryType
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
func holds(w want, e filesync.Entry, ok, known bool) bool {
	if w.absent {
		return !ok
	}
	if !ok || !known || e.Type != w.typ {
		return false
	}
	switch w.typ {
	case filesync.TypeSymlink:
		return e.Link == w.link
	case filesync.TypeFile:
		if e.Sum != nil {
			return *e.Sum == w.sum
		}
		return e.Size == w.size && e.MTime.Equal(w.mtime)
	}
	return true
}

// podReader reads a replica's pod for --for=ready.
type podReader func(ctx context.Context, namespace, name string) (*corev1.Pod, error)

// logReader returns the last lines a container wrote, joined in one line: those of its run
// before this one when previous.
type logReader func(ctx context.Context, namespace, pod, container string, previous bool) string

// receipts answers the control socket's requests for one session: what it syncs, and waits for
// the local bytes to be confirmed (and restarted, and Ready) in every replica.
type receipts struct {
	ledger  ledger
	pods    podReader
	logs    logReader
	targets func() []filesync.Target
	maps    []filesync.Mapping
	match   []filesync.Matcher
	restart restart.Mode
	clk     clock.WithTicker
	status  control.Status // the fixed part

	mu    sync.Mutex
	state map[string]*targetState // by Target.String()
	wake  chan struct{}           // closed and replaced on every event that may change an answer
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
}

func newReceipts(l ledger, pods podReader, targets func() []filesync.Target, cfg Config, match []filesync.Matcher, clk clock.WithTicker) *receipts {
	if clk == nil {
		clk = clock.RealClock{}
	}
	r := &receipts{ledger: l, pods: pods, targets: targets, maps: cfg.Sync.Mappings, match: match, restart: cfg.Restart, clk: clk,
		state: map[string]*targetState{}, wake: make(chan struct{})}
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
			}
		case filesync.Restarting:
			p := fmt.Sprintf("the container keeps restarting (%d times in %s)", e.Restarts, e.Window)
			if e.ExitCode != nil {
				p += fmt.Sprintf(", last exit code %d", *e.ExitCode)
			}
			r.of(e.Target).problem = p
		case filesync.TargetRemoved:
			delete(r.state, e.Target.String())
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
		r.of(t).running = true
		r.mu.Unlock()
		hook(ctx, t)
		r.mu.Lock()
		s := r.of(t)
		s.running = false
		if err == nil && !strings.HasPrefix(s.problem, "restart failed") {
			s.restarts++
			s.last = r.clk.Now()
			s.doneGens = rc.gens
		}
		r.changed()
		r.mu.Unlock()
	}
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
		res.Targets, res.Message = r.check(ctx, req.For, wants)
		res.OK = res.Message == "" && !slices.ContainsFunc(res.Targets, func(t control.TargetWait) bool { return !t.OK })
		res.Duration = r.clk.Since(start)
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
func (r *receipts) check(ctx context.Context, kind string, wants []want) ([]control.TargetWait, string) {
	ts := r.sortedTargets()
	if len(ts) == 0 {
		return nil, "no replica to sync into yet"
	}
	out := make([]control.TargetWait, 0, len(ts))
	for _, t := range ts {
		tw := control.TargetWait{Namespace: t.Namespace, Pod: t.Pod, Container: t.Container}
		tw.Missing = r.checkOne(ctx, kind, t, wants)
		tw.OK = tw.Missing == ""
		out = append(out, tw)
	}
	return out, ""
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
	if kind == control.ForReady {
		return r.ready(ctx, t)
	}
	return ""
}

// ready says why t's pod or container is not Ready, "" when both are.
func (r *receipts) ready(ctx context.Context, t filesync.Target) string {
	if r.pods == nil {
		return ""
	}
	pod, err := r.pods(ctx, t.Namespace, t.Pod)
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
					tws[i].Missing += "; its last lines: " + lines
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
		w.typ, w.size, w.mtime = filesync.TypeFile, fi.Size(), fi.ModTime()
		copy(w.sum[:], h.Sum(nil))
		return w, true, nil
	case fi.Mode()&fs.ModeSymlink != 0:
		l, err := os.Readlink(name)
		if err != nil {
			return w, false, fmt.Errorf("reading link %q: %w", name, err)
		}
		w.typ, w.link = filesync.TypeSymlink, l
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
		return strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " | ")), " ")
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
