package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// HelperMode is --helper: when a target is synced through a helper container.
type HelperMode string

const (
	// HelperAuto uses a helper only for a container without sh or tar.
	HelperAuto HelperMode = "auto"
	// HelperEphemeral always uses one: also for a non-root container whose
	// remote directory its user can't write.
	HelperEphemeral HelperMode = "ephemeral"
	// HelperNever execs into the container itself, as before.
	HelperNever HelperMode = "never"
)

// ParseHelperMode parses --helper.
func ParseHelperMode(s string) (HelperMode, error) {
	switch m := HelperMode(s); m {
	case HelperAuto, HelperEphemeral, HelperNever:
		return m, nil
	}
	return "", fmt.Errorf("invalid --helper %q: use auto, ephemeral or never", s)
}

// HelperExecutor is the Executor of a session: it execs into each target
// itself or, per Mode, through a helper container (Helpers) that shares the
// target's process namespace and reaches its files through /proc/PID/root
// (remote.HelperArgv). The choice is made once per container instance
// (ContainerID), at its first exec.
type HelperExecutor struct {
	// Pods execs into containers: a *PodExecutor.
	Pods interface {
		remote.Executor
		remote.StreamCapable
	}
	Helpers *Helpers
	Mode    HelperMode
	// Reporter, if set, hears of each target synced through a helper
	// (filesync.HelperUsed).
	Reporter filesync.Reporter

	mu     sync.Mutex
	routes map[remote.Target]*route
	// tools caches lacksTar's answer by the container's imageID: a restarted
	// container, or another replica, runs the same image.
	tools map[string]bool
}

// route is how one target is reached: itself (helper nil) or a helper.
type route struct {
	ready  chan struct{}
	err    error
	helper *Helper
	at     remote.HelperRoute
}

// PersistentStreams: a helper's stream is an exec like any other.
func (x *HelperExecutor) PersistentStreams() bool { return x.Pods.PersistentStreams() }

// Exec runs argv in t, or in t's helper with argv made to work on t's files.
//
// An exec through the helper that finds t's process gone or replaced
// (remote.HelperMovedStatus) drops the route, so that the next one
// probes t again. Without stdin that happens at once and argv runs again,
// once; an exec with stdin returns a transient error instead: what it
// consumed of stdin is lost, and the engine sends the batch again.
func (x *HelperExecutor) Exec(ctx context.Context, t remote.Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if x.Mode == HelperNever || x.Mode == "" {
		return x.Pods.Exec(ctx, t, argv, stdin, stdout, stderr)
	}
	for try := 1; ; try++ {
		r, err := x.route(ctx, t)
		if err != nil {
			return err
		}
		if r.helper == nil {
			return x.Pods.Exec(ctx, t, argv, stdin, stdout, stderr)
		}
		gate := &movedGate{w: stderr}
		err = x.Pods.Exec(ctx, helperTarget(t, r.helper), remote.HelperArgv(argv, r.at), stdin, stdout, gate)
		moved := gate.end(err)
		var ee remote.ExitError
		switch {
		case moved:
			x.forget(t, r)
			if stdin == nil && try == 1 {
				continue
			}
			return &movedError{t: t, helper: r.helper.Name, pid: r.at.PID}
		case err != nil && !errors.As(err, &ee) && ctx.Err() == nil:
			// The helper may be gone (its target restarted, or it was
			// killed): the next exec finds or adds a live one.
			x.forget(t, r)
		}
		return err
	}
}

// movedError is an exec's through a helper whose target process was gone or
// replaced. It is no ExitError, so that filesync retries it (IsTransient),
// by which time the route is probed anew.
type movedError struct {
	t      remote.Target
	helper string
	pid    int
}

func (e *movedError) Error() string {
	return fmt.Sprintf("the process of container %q (pid %d) that helper %q reached in pod %q is gone or replaced; finding it again", e.t.Container, e.pid, e.helper, e.t.Pod)
}

// movedGate passes an exec's stderr on, but holds back what starts with
// remote.HelperMovedMarker: the script's check came first, wrote only
// that, and the exec runs again or fails with its own error. end says
// whether the exec failed that way, and passes on what was held otherwise.
// Writes come from one goroutine at a time, and end after the exec.
type movedGate struct {
	w    io.Writer
	head []byte // the start of stderr, while it may be the marker
	pass bool   // it isn't: everything goes through
}

func (g *movedGate) Write(p []byte) (int, error) {
	if g.pass {
		return g.w.Write(p)
	}
	const m = remote.HelperMovedMarker
	if len(g.head) < 4<<10 {
		g.head = append(g.head, p...)
	}
	if n := min(len(g.head), len(m)); string(g.head[:n]) == m[:n] {
		return len(p), nil
	}
	g.pass = true
	if _, err := g.w.Write(g.head); err != nil {
		return 0, err
	}
	g.head = nil
	return len(p), nil
}

func (g *movedGate) end(err error) bool {
	var ee remote.ExitError
	if !g.pass && errors.As(err, &ee) && ee.ExitStatus() == remote.HelperMovedStatus && strings.HasPrefix(string(g.head), remote.HelperMovedMarker) {
		return true
	}
	if !g.pass && len(g.head) > 0 {
		_, _ = g.w.Write(g.head)
	}
	return false
}

// Owner is whose the files extracted in t must be: the target's user, when
// a root helper writes them.
func (x *HelperExecutor) Owner(t remote.Target) *remote.Owner {
	x.mu.Lock()
	r := x.routes[t]
	x.mu.Unlock()
	if r == nil {
		return nil
	}
	select {
	case <-r.ready:
		if r.err == nil {
			return r.at.Owner
		}
	default:
	}
	return nil
}

func helperTarget(t remote.Target, h *Helper) remote.Target {
	t.Container, t.ContainerID = h.Name, ""
	return t
}

// route returns how t is reached, deciding it at the first call; calls
// meanwhile wait for that decision. A decision that failed transiently is
// made again next time; one that can't succeed is kept.
func (x *HelperExecutor) route(ctx context.Context, t remote.Target) (*route, error) {
	x.mu.Lock()
	if x.routes == nil {
		x.routes = map[remote.Target]*route{}
	}
	r := x.routes[t]
	if r != nil {
		x.mu.Unlock()
		select {
		case <-r.ready:
			return r, r.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r = &route{ready: make(chan struct{})}
	x.routes[t] = r
	x.mu.Unlock()
	r.err = x.decide(ctx, t, r)
	transient := r.err != nil && transientAPI(r.err)
	if r.err != nil && !transient {
		r.err = remote.HelperError(r.err)
	}
	close(r.ready)
	if transient {
		// A deterministic failure stays with this container: deciding again
		// at every retry would add one more helper each time (one that can't
		// pull its image, say). A new container is decided afresh.
		x.forget(t, r)
	}
	return r, r.err
}

func (x *HelperExecutor) forget(t remote.Target, r *route) {
	x.mu.Lock()
	if x.routes[t] == r {
		delete(x.routes, t)
	}
	x.mu.Unlock()
}

// decide fills r: direct, unless Mode or a container without sh or tar asks
// for a helper.
func (x *HelperExecutor) decide(ctx context.Context, t remote.Target, r *route) error {
	why := "--helper ephemeral"
	if x.Mode == HelperAuto {
		need, err := x.lacksTar(ctx, t)
		if err != nil || !need {
			return err
		}
		why = "no sh or tar"
	}
	h, err := x.Helpers.Ensure(ctx, t.Namespace, t.Pod, t.Container, t.ContainerID)
	if err != nil {
		return err
	}
	if h.DryRun {
		x.report(t, h, why, nil, nil)
		return fmt.Errorf("dry run: container %q of pod %q would be synced through a new helper container, which a dry run does not add", t.Container, t.Pod)
	}
	p, err := x.probe(ctx, t, h)
	if err != nil {
		return err
	}
	if !p.Reachable && h.Profile == HelperSameUser && h.UID != nil && int(*h.UID) == p.UID && (h.GID == nil || int(*h.GID) != p.GID) {
		// The gid was a guess (runAsUser without runAsGroup): the target's
		// status says which, and only the same uid and gid get in.
		if h, err = x.Helpers.EnsureGroup(ctx, t.Namespace, t.Pod, t.Container, t.ContainerID, int64(p.GID)); err != nil {
			return err
		}
		if p, err = x.probe(ctx, t, h); err != nil {
			return err
		}
	}
	if !p.Reachable {
		return unreachable(t, h, p)
	}
	r.helper, r.at = h, remote.HelperRoute{PID: p.PID, Start: p.Start}
	if h.Profile == HelperRootPtrace && p.UID != 0 {
		r.at.Owner = &remote.Owner{UID: p.UID, GID: p.GID}
	}
	x.report(t, h, why, &p, r.at.Owner)
	return nil
}

func (x *HelperExecutor) report(t remote.Target, h *Helper, why string, p *remote.ProbeResult, owner *remote.Owner) {
	if x.Reporter == nil {
		return
	}
	ev := filesync.HelperUsed{Target: t, Name: h.Name, Image: x.Helpers.Image, Profile: string(h.Profile), Level: h.Level,
		Reused: h.Reused, DryRun: h.DryRun, Why: why, Owner: owner != nil}
	if p != nil {
		ev.UID, ev.GID = p.UID, p.GID
	}
	x.Reporter.Report(ev)
}

// unreachable says why a helper can't open the target's files: the kernel
// lets a process read another's /proc/PID/root only as the same uid and gid,
// or with CAP_SYS_PTRACE.
func unreachable(t remote.Target, h *Helper, p remote.ProbeResult) error {
	as := "root without CAP_SYS_PTRACE"
	if h.UID != nil && *h.UID != 0 {
		as = fmt.Sprintf("uid %d", *h.UID)
		if h.GID != nil {
			as += fmt.Sprintf(" gid %d", *h.GID)
		}
	}
	if h.Level != "" {
		as += fmt.Sprintf(", as PodSecurity %q admits", h.Level)
	}
	return fmt.Errorf("helper %q can't reach the files of container %q in pod %q: it runs as %s, and the container as uid %d gid %d; set securityContext.runAsUser: %d and runAsGroup: %d on container %q so the helper can run as that user, or use a namespace at PodSecurity level privileged",
		h.Name, t.Container, t.Pod, as, p.UID, p.GID, p.UID, p.GID, t.Container)
}

// lacksTar says whether t has no sh or no tar: one exec of `sh -c 'command -v tar'` per
// image (by the imageID the pod's status gives for t; every time where it gives none).
func (x *HelperExecutor) lacksTar(ctx context.Context, t remote.Target) (bool, error) {
	imageID := ""
	if p, err := x.Helpers.Client.CoreV1().Pods(t.Namespace).Get(ctx, t.Pod, metav1.GetOptions{}); err == nil {
		if st := ContainerStatus(p, t.Container, false); st != nil && st.ContainerID == t.ContainerID {
			imageID = st.ImageID
		}
	}
	x.mu.Lock()
	lacks, known := x.tools[imageID]
	x.mu.Unlock()
	if known && imageID != "" {
		return lacks, nil
	}
	lacks, err := x.execLacksTar(ctx, t)
	if err == nil && imageID != "" {
		x.mu.Lock()
		if x.tools == nil {
			x.tools = map[string]bool{}
		}
		x.tools[imageID] = lacks
		x.mu.Unlock()
	}
	return lacks, err
}

func (x *HelperExecutor) execLacksTar(ctx context.Context, t remote.Target) (bool, error) {
	var errb bytes.Buffer
	err := x.Pods.Exec(ctx, t, []string{"sh", "-c", "command -v tar >/dev/null 2>&1 || exit 127"}, nil, io.Discard, &errb)
	var ee remote.ExitError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &ee) && (ee.ExitStatus() == 127 || ee.ExitStatus() == 126),
		strings.Contains(err.Error(), "executable file not found"), strings.Contains(err.Error(), "no such file or directory"):
		return true, nil
	}
	// The first exec into the container: RBAC or an admission policy refusing it is said
	// here as everywhere else (and as `check` says it).
	return false, remote.Classify(err, t, "checking the container", "", errb.String())
}

// probe finds t's process from helper h and whether h may reach its files.
func (x *HelperExecutor) probe(ctx context.Context, t remote.Target, h *Helper) (remote.ProbeResult, error) {
	var out, errb bytes.Buffer
	if err := x.Pods.Exec(ctx, helperTarget(t, h), remote.HelperProbe(t.ContainerID), nil, &out, &errb); err != nil {
		return remote.ProbeResult{}, fmt.Errorf("probing container %q of pod %q from helper %q: %w: %s", t.Container, t.Pod, h.Name, err, strings.TrimSpace(errb.String()))
	}
	p, err := remote.ParseHelperProbe(out.String())
	if err != nil {
		return p, fmt.Errorf("helper %q in pod %q: %w", h.Name, t.Pod, err)
	}
	return p, nil
}

// transientAPI says whether err, from adding or probing a helper, may pass: the apiserver or
// the connection failed, the target is not running (yet), or an exec was cut.
func transientAPI(err error) bool {
	var ee remote.ExitError
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrTargetNotRunning):
		return true
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return true
	case errors.As(err, &ne), errors.As(err, &ee):
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset")
}
