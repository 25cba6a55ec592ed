// Package forward keeps a local port forwarded to the workload, not to one pod: one listener
// per forward for the whole session, and each new connection goes through pods/portforward to
// the pod the tracker's events (pkg/workload) and the initial syncs make eligible (Ready, not
// terminating, synced). client-go's tools/portforward is the model for the streams; what it
// lacks is re-targeting, deadlines, and saying a change once.
package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/utils/clock"
)

// States of a forward, as its events say them.
const (
	Listening = "listening"
	Serving   = "serving"
	Waiting   = "waiting"
	Lost      = "lost"
	Failed    = "error"
	// Trying: the pod served failed (a dial, or its port with nothing sent back); new
	// connections go to Pod, which has not answered yet. Serving follows its first answer.
	Trying = "trying"
	// Unreachable: every Ready, synced pod failed so; new connections are closed at once until
	// a back-off ends or another pod can serve.
	Unreachable = "unreachable"
)

// Event is a change of a forward's state. Each is said once per change, never per connection.
type Event struct {
	Spec Spec
	// Addr is the address listened on, with the port picked for LOCAL 0.
	Addr  string
	State string
	// Pod is the pod served (serving), tried (trying), lost (lost), that failed (error) or
	// that failed last (unreachable).
	Pod string
	// Previous is the pod served before (serving, trying), and Reason why it left (Lost*).
	Previous string
	// Reason: waiting's Wait*; lost's Lost*.
	Reason string
	// Waiting is why no other pod took over (lost).
	Waiting string
	// Message is the error (error), or how Previous (trying) or Pod (unreachable) failed.
	Message string
	// Dials counts the pod connections the forwards of the session dialled so far.
	Dials int64
}

// Text is the event's reason or error, for a human.
func (e Event) Text() string {
	switch e.State {
	case Serving:
		if e.Previous != "" {
			return fmt.Sprintf("serving %s (was %s: %s)", e.Pod, e.Previous, ReasonText(e.Reason))
		}
		return "serving " + e.Pod
	case Waiting:
		return "waiting: " + ReasonText(e.Reason)
	case Lost:
		return fmt.Sprintf("lost %s (%s); waiting: %s", e.Pod, ReasonText(e.Reason), ReasonText(e.Waiting))
	case Failed:
		return "error: " + e.Message
	case Trying:
		if e.Previous != "" {
			return fmt.Sprintf("pod %s unreachable (%s); trying pod %s", e.Previous, e.Message, e.Pod)
		}
		return "trying pod " + e.Pod
	case Unreachable:
		return fmt.Sprintf("pod %s unreachable (%s); %s", e.Pod, e.Message, ReasonText(WaitUnreachable))
	}
	return e.State
}

// ReasonText is a Wait* or Lost* reason in words.
func ReasonText(r string) string {
	if t, ok := reasonText[r]; ok {
		return t
	}
	return r
}

// Dialer opens a port-forward connection to a pod; it returns by ctx's deadline.
type Dialer interface {
	Dial(ctx context.Context, namespace, pod string) (httpstream.Connection, error)
}

// Defaults of the Forwarder's deadlines.
const (
	// DefaultWaitTimeout: a connection that finds no eligible pod waits this long for one (a
	// rollout's gap) before it is closed.
	DefaultWaitTimeout = 30 * time.Second
	// DefaultDialTimeout bounds opening the connection to a pod.
	DefaultDialTimeout = 15 * time.Second
	// DefaultStreamTimeout bounds opening a stream on it, and waiting for its error stream
	// once the data stream ended.
	DefaultStreamTimeout = 10 * time.Second
	// minBackoff and maxBackoff bound how long a pod that failed stays unreachable: the wait
	// doubles from the first to the second while it keeps failing, and a success resets it.
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
	// maxTries bounds the pods one local connection is sent to when they fail to dial.
	maxTries = 3
)

// Forwarder runs the session's forwards of one workload.
type Forwarder struct {
	Specs     []Spec
	Namespace string
	Dialer    Dialer
	// Report is told each change of each forward.
	Report func(Event)
	// Deadlines; zero means the defaults.
	WaitTimeout, DialTimeout, StreamTimeout time.Duration
	// Clock times waits and back-offs; nil means the real clock.
	Clock clock.Clock

	mu        sync.Mutex
	listeners []net.Listener
	addrs     []string
	pods      map[string]*podInfo
	synced    map[string]bool // containerIDs whose initial sync finished
	listed    bool
	change    chan struct{} // closed when a spec's current pod changes
	conns     map[string]*podConn
	// backoff holds the pods whose last dial failed: unreachable for every forward, and not
	// dialled, until it ends.
	backoff map[string]backoff
	// refused holds, per forward, the pods whose port failed with nothing sent back:
	// unreachable for that forward only (another port of the pod may serve).
	refused  map[specPod]backoff
	errsSaid map[string]bool
	dials    atomic.Int64
	requests atomic.Int64
	ctx      context.Context

	// Per spec: the pod new connections go to ("" for none) and why there is none; said is
	// what was said last. trying is set when the spec's pod failed, until a connection to
	// its pod succeeds; bad is the pod that failed last, and how.
	current []string
	why     []string
	said    []Event
	trying  []bool
	bad     []failure
}

type backoff struct {
	until time.Time
	wait  time.Duration
	err   error
}

// next is b after one more failure at now.
func (b backoff) next(now time.Time, err error) backoff {
	b.wait = min(max(2*b.wait, minBackoff), maxBackoff)
	b.until, b.err = now.Add(b.wait), err
	return b
}

type specPod struct {
	spec int
	pod  string
}

type failure struct {
	pod string
	err error
}

// podConn is one port-forward connection to a pod, shared by the local connections to it.
type podConn struct {
	pod     string
	conn    httpstream.Connection
	ready   chan struct{} // closed once dialled
	err     error
	refs    int
	retired bool // no longer the target: closed when the last stream ends
	closed  bool
}

func (f *Forwarder) init() {
	if f.Clock == nil {
		f.Clock = clock.RealClock{}
	}
	if f.WaitTimeout == 0 {
		f.WaitTimeout = DefaultWaitTimeout
	}
	if f.DialTimeout == 0 {
		f.DialTimeout = DefaultDialTimeout
	}
	if f.StreamTimeout == 0 {
		f.StreamTimeout = DefaultStreamTimeout
	}
	f.pods, f.synced, f.conns, f.backoff, f.errsSaid = map[string]*podInfo{}, map[string]bool{}, map[string]*podConn{}, map[string]backoff{}, map[string]bool{}
	f.refused = map[specPod]backoff{}
	n := len(f.Specs)
	f.current, f.why, f.said, f.trying, f.bad = make([]string, n), make([]string, n), make([]Event, n), make([]bool, n), make([]failure, n)
	f.change = make(chan struct{})
}

// Listen binds every forward's local port, and reports each as listening. On error nothing
// stays bound.
func (f *Forwarder) Listen() error {
	f.init()
	for _, s := range f.Specs {
		l, err := net.Listen("tcp", net.JoinHostPort(s.ListenAddress(), strconv.Itoa(s.Local)))
		if err != nil {
			f.closeListeners()
			return fmt.Errorf("--forward %s: %w: pick another LOCAL port, or 0 for a free one", s, err)
		}
		f.listeners = append(f.listeners, l)
		f.addrs = append(f.addrs, l.Addr().String())
	}
	for i := range f.Specs {
		f.say(i, Event{State: Listening})
	}
	return nil
}

// Addrs are the bound addresses, one per spec, once Listen returned.
func (f *Forwarder) Addrs() []string { return f.addrs }

// Serve accepts connections until ctx ends, then releases the ports at once: the listeners
// close before any stream is waited for.
func (f *Forwarder) Serve(ctx context.Context) {
	f.mu.Lock()
	f.ctx = ctx
	f.mu.Unlock()
	var wg sync.WaitGroup
	for i, l := range f.listeners {
		wg.Go(func() { f.accept(ctx, i, l) })
	}
	<-ctx.Done()
	f.closeListeners()
	wg.Wait()
	f.mu.Lock()
	for _, pc := range f.conns {
		f.closeConn(pc)
	}
	f.mu.Unlock()
}

func (f *Forwarder) closeListeners() {
	for _, l := range f.listeners {
		_ = l.Close()
	}
}

func (f *Forwarder) accept(ctx context.Context, i int, l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors, say: wait a little rather than spin.
			select {
			case <-ctx.Done():
				return
			case <-f.Clock.After(100 * time.Millisecond):
			}
			continue
		}
		go f.handle(ctx, i, c)
	}
}

// ObservePod implements workload.PodObserver.
func (f *Forwarder) ObservePod(pod *corev1.Pod, containers []string, gone bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gone {
		delete(f.pods, pod.Name)
		delete(f.backoff, pod.Name)
		for i := range f.Specs {
			delete(f.refused, specPod{i, pod.Name})
			if f.bad[i].pod == pod.Name { // nothing left to say about it
				f.trying[i], f.bad[i] = false, failure{}
			}
		}
	} else {
		f.pods[pod.Name] = &podInfo{pod: pod, containers: containers}
	}
	f.recompute()
}

// Synced records that the container's initial sync finished: its pod may serve.
func (f *Forwarder) Synced(containerID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced[containerID] = true
	f.recompute()
}

// Listed says every pod of the first list was observed: waits can be judged.
func (f *Forwarder) Listed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listed = true
	f.recompute()
}

// recompute picks each spec's pod for new connections and says what changed; a back-off
// that ended makes its pod eligible again. Called with mu held.
func (f *Forwarder) recompute() {
	now := f.Clock.Now()
	olds := slices.Clone(f.current)
	for i := range f.Specs {
		old := f.current[i]
		next, why := choose(f.pods, f.synced, old, func(pod string) bool { return f.failed(i, pod, now) != nil })
		f.current[i], f.why[i] = next, why
		if !f.listed && next == "" {
			continue
		}
		f.say(i, f.state(i, old, next, why, now))
	}
	if slices.Equal(olds, f.current) {
		return
	}
	close(f.change)
	f.change = make(chan struct{})
	for _, old := range olds {
		if pc := f.conns[old]; pc != nil && !slices.Contains(f.current, old) {
			pc.retired = true
			if pc.refs == 0 {
				f.closeConn(pc)
			}
		}
	}
}

// state is what spec i's choice of next (over old) says. Called with mu held.
func (f *Forwarder) state(i int, old, next, why string, now time.Time) Event {
	switch {
	case next != "" && f.trying[i]:
		ev := Event{State: Trying, Pod: next}
		if b := f.bad[i]; b.pod != "" && b.pod != next {
			ev.Previous, ev.Reason, ev.Message = b.pod, LostUnreachable, b.err.Error()
		}
		return ev
	case next != "":
		ev := Event{State: Serving, Pod: next}
		if old != "" && old != next {
			ev.Previous, ev.Reason = old, lostWhy(f.pods[old], f.synced)
		}
		return ev
	case why == WaitUnreachable:
		// Name the pod that failed last if it is still out, else any that is.
		b := f.bad[i]
		if b.pod == "" || f.failed(i, b.pod, now) == nil {
			for _, name := range slices.Sorted(maps.Keys(f.pods)) {
				if err := f.failed(i, name, now); err != nil && judge(f.pods[name], f.synced) == eligible {
					b = failure{name, err}
					break
				}
			}
		}
		ev := Event{State: Unreachable, Pod: b.pod}
		if b.err != nil {
			ev.Message = b.err.Error()
		}
		return ev
	case old != "":
		return Event{State: Lost, Pod: old, Reason: lostWhy(f.pods[old], f.synced), Waiting: why}
	}
	return Event{State: Waiting, Reason: why}
}

// failed returns how pod last failed for spec i while that keeps it unreachable, else nil.
// Called with mu held.
func (f *Forwarder) failed(i int, pod string, now time.Time) error {
	if b, ok := f.backoff[pod]; ok && now.Before(b.until) {
		return b.err
	}
	if b, ok := f.refused[specPod{i, pod}]; ok && now.Before(b.until) {
		return b.err
	}
	return nil
}

// unreachable records that pod failed for spec i (i < 0: a dial, for every spec): each spec
// it served tries another. Called with mu held.
func (f *Forwarder) unreachable(i int, pod string, err error) {
	now := f.Clock.Now()
	if i < 0 {
		f.backoff[pod] = f.backoff[pod].next(now, err)
	} else {
		k := specPod{i, pod}
		f.refused[k] = f.refused[k].next(now, err)
	}
	for j, cur := range f.current {
		if cur == pod && (i < 0 || i == j) {
			f.trying[j], f.bad[j] = true, failure{pod, err}
		}
	}
	f.recompute()
}

// answered records that a connection of spec i to pod succeeded: its port's back-off ends,
// and a pod that was being tried serves.
func (f *Forwarder) answered(i int, pod string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.refused, specPod{i, pod})
	if f.trying[i] && f.current[i] == pod {
		f.trying[i], f.bad[i] = false, failure{}
		f.say(i, Event{State: Serving, Pod: pod})
	}
}

// say reports ev for spec i unless it says what was said last. Trying again the pod said
// unreachable, and its failing again alike, are no change.
func (f *Forwarder) say(i int, ev Event) {
	last := f.said[i]
	switch {
	case ev.State == Serving && last.State == Serving && last.Pod == ev.Pod,
		ev.State == Waiting && last.State == Waiting && last.Reason == ev.Reason,
		ev.State == Waiting && last.State == Lost && last.Waiting == ev.Reason,
		ev.State == Trying && (last.State == Trying || last.State == Unreachable) && last.Pod == ev.Pod,
		ev.State == Unreachable && last.State == Unreachable && last.Pod == ev.Pod && last.Message == ev.Message:
		return
	}
	f.said[i] = ev
	ev.Spec, ev.Dials = f.Specs[i], f.dials.Load()
	if i < len(f.addrs) {
		ev.Addr = f.addrs[i]
	}
	if f.Report != nil {
		f.Report(ev)
	}
}

// fail reports err about pod once per pod and message.
func (f *Forwarder) fail(i int, pod string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := pod + "\x00" + err.Error()
	if f.errsSaid[key] {
		return
	}
	f.errsSaid[key] = true
	ev := Event{State: Failed, Pod: pod, Message: err.Error(), Spec: f.Specs[i], Addr: f.addrs[i], Dials: f.dials.Load()}
	if f.Report != nil {
		f.Report(ev)
	}
}

// Dials is how many pod connections were dialled so far.
func (f *Forwarder) Dials() int64 { return f.dials.Load() }

// handle sends one local connection to spec i's current pod, waiting for one (up to
// WaitTimeout) while there is none; a connection whose pod connection turns out dead is sent
// on again, and one whose pod fails to dial goes to the pod tried next (nothing was read from
// it yet), up to maxTries pods.
func (f *Forwarder) handle(ctx context.Context, i int, local net.Conn) {
	defer func() { _ = local.Close() }()
	var lastPod string
	var lastErr error
	for range maxTries {
		pod, info, ok := f.target(ctx, i)
		if !ok {
			break
		}
		port, err := RemotePort(f.Specs[i], podPorts(info))
		if err != nil {
			f.fail(i, pod, fmt.Errorf("pod %q: %w", pod, err))
			return
		}
		pc, err := f.conn(ctx, pod)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			lastPod, lastErr = pod, err
			continue
		}
		lastErr = nil
		err = f.pipe(ctx, i, local, pc, port)
		f.release(pc)
		if !errors.Is(err, errDeadConn) {
			return
		}
		f.drop(pc)
	}
	if lastErr != nil && ctx.Err() == nil {
		f.fail(i, lastPod, lastErr)
	}
}

// target returns spec i's pod for a new connection, waiting up to WaitTimeout for one while
// none can serve; while every pod that could is unreachable, it returns false at once.
func (f *Forwarder) target(ctx context.Context, i int) (string, *podInfo, bool) {
	var timeout <-chan time.Time
	for {
		f.mu.Lock()
		f.recompute()
		cur, why, ch, info := f.current[i], f.why[i], f.change, f.pods[f.current[i]]
		f.mu.Unlock()
		if cur != "" {
			return cur, info, true
		}
		if why == WaitUnreachable {
			return "", nil, false
		}
		if timeout == nil {
			t := f.Clock.NewTimer(f.WaitTimeout)
			defer t.Stop()
			timeout = t.C()
		}
		select {
		case <-ch:
		case <-timeout:
			return "", nil, false
		case <-ctx.Done():
			return "", nil, false
		}
	}
}

// conn returns the pod's connection, dialling it if there is none: one dial at a time per
// pod, and after a failed one none before its back-off ends (no reconnect storm).
func (f *Forwarder) conn(ctx context.Context, pod string) (*podConn, error) {
	f.mu.Lock()
	pc := f.conns[pod]
	if pc == nil {
		if b, ok := f.backoff[pod]; ok && f.Clock.Now().Before(b.until) {
			f.mu.Unlock()
			return nil, b.err
		}
		pc = &podConn{pod: pod, ready: make(chan struct{})}
		f.conns[pod] = pc
		go f.dial(pc)
	}
	pc.refs++
	pc.retired = false // it serves the current pod again
	f.mu.Unlock()
	select {
	case <-pc.ready:
	case <-ctx.Done():
		f.release(pc)
		return nil, ctx.Err()
	}
	if pc.err != nil {
		f.release(pc)
		return nil, pc.err
	}
	return pc, nil
}

func (f *Forwarder) dial(pc *podConn) {
	f.mu.Lock()
	base := f.ctx
	f.mu.Unlock()
	if base == nil {
		base = context.Background()
	}
	f.dials.Add(1)
	ctx, cancel := context.WithTimeout(base, f.DialTimeout)
	conn, err := f.Dialer.Dial(ctx, f.Namespace, pc.pod)
	cancel()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		pc.err = dialError(err, f.Namespace, pc.pod)
		if f.conns[pc.pod] == pc {
			delete(f.conns, pc.pod)
		}
		close(pc.ready)
		f.unreachable(-1, pc.pod, pc.err)
		return
	}
	delete(f.backoff, pc.pod)
	pc.conn = conn
	close(pc.ready)
	go func() {
		<-conn.CloseChan()
		f.drop(pc)
	}()
}

// release ends a local connection's use of pc; a retired connection closes with its last.
func (f *Forwarder) release(pc *podConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pc.refs--
	if pc.refs == 0 && pc.retired && pc.conn != nil {
		f.closeConn(pc)
	}
}

// drop forgets a dead connection, so the next local connection dials again.
func (f *Forwarder) drop(pc *podConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeConn(pc)
}

// closeConn closes pc in the background: a close that hangs on a dead network must not hold
// anything up. Called with mu held.
func (f *Forwarder) closeConn(pc *podConn) {
	if f.conns[pc.pod] == pc {
		delete(f.conns, pc.pod)
	}
	if pc.closed || pc.conn == nil {
		return
	}
	pc.closed = true
	go func() { _ = pc.conn.Close() }()
}

// errDeadConn: the pod connection could not open a stream; another may.
var errDeadConn = errors.New("port-forward connection is gone")

// pipe copies between local and a new stream pair on pc to port, the way client-go's
// PortForwarder does, with deadlines on opening the streams and on the error stream.
func (f *Forwarder) pipe(ctx context.Context, i int, local net.Conn, pc *podConn, port int) error {
	id := f.requests.Add(1)
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(port))
	h.Set(corev1.PortForwardRequestIDHeader, strconv.FormatInt(id, 10))
	errStream, err := f.createStream(pc, h)
	if err != nil {
		return err
	}
	_ = errStream.Close() // nothing is written to it
	defer pc.conn.RemoveStreams(errStream)
	type result struct {
		msg []byte
		err error
	}
	errc := make(chan result, 1)
	go func() {
		msg, err := io.ReadAll(errStream)
		errc <- result{msg, err}
	}()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := f.createStream(pc, h)
	if err != nil {
		return err
	}
	defer pc.conn.RemoveStreams(data)

	remoteDone, localFailed := make(chan struct{}), make(chan struct{})
	back := &counter{w: local} // what the pod sent: anything proves it reachable on port
	go func() {
		_, _ = io.Copy(back, data)
		close(remoteDone)
	}()
	go func() {
		defer func() { _ = data.Close() }() // the remote side reads EOF
		if _, err := io.Copy(data, local); err != nil {
			close(localFailed)
		}
	}()
	select {
	case <-remoteDone:
	case <-localFailed:
	case <-ctx.Done():
		_ = local.Close()
	}
	// Reset before reading the error stream: unsent data would hold it up.
	_ = data.Reset()
	t := f.Clock.NewTimer(f.StreamTimeout)
	defer t.Stop()
	answered := false
	select {
	case r := <-errc:
		answered = back.n.Load() > 0
		switch {
		case r.err != nil:
			f.drop(pc)
		case len(r.msg) > 0:
			err := fmt.Errorf("pod %q port %d: %s", pc.pod, port, firstLine(string(r.msg)))
			f.fail(i, pc.pod, err)
			if !answered {
				// Nothing came back: the pod refused the connection (nothing listens, its
				// network is gone); the next goes to another pod.
				f.mu.Lock()
				f.unreachable(i, pc.pod, err)
				f.mu.Unlock()
			}
		default:
			answered = true // the pod's side of the stream ended cleanly
		}
	case <-t.C():
		f.drop(pc) // a connection that cannot end a stream is not trusted with the next
	}
	if answered {
		f.answered(i, pc.pod)
	}
	return nil
}

// counter counts what is written through it.
type counter struct {
	w io.Writer
	n atomic.Int64
}

func (c *counter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// createStream opens a stream within StreamTimeout; a connection that can't is closed.
func (f *Forwarder) createStream(pc *podConn, h http.Header) (httpstream.Stream, error) {
	type result struct {
		s   httpstream.Stream
		err error
	}
	done := make(chan result, 1)
	hc := h.Clone()
	go func() {
		s, err := pc.conn.CreateStream(hc)
		done <- result{s, err}
	}()
	t := f.Clock.NewTimer(f.StreamTimeout)
	defer t.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("%w: %w", errDeadConn, r.err)
		}
		return r.s, nil
	case <-t.C():
		f.drop(pc)
		go func() {
			if r := <-done; r.s != nil {
				_ = r.s.Reset()
			}
		}()
		return nil, fmt.Errorf("%w: opening a stream took over %s", errDeadConn, f.StreamTimeout)
	}
}

// dialError words a failed dial in one line; a refusal by RBAC names the rule to add.
func dialError(err error, namespace, pod string) error {
	if apierrors.IsForbidden(err) || strings.Contains(strings.ToLower(err.Error()), "forbidden") {
		return fmt.Errorf("not allowed to port-forward to pod %q in namespace %q: grant the RBAC verb \"create\" on \"pods/portforward\" (see docs/rbac.yaml)", pod, namespace)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("port-forward to pod %q: no connection within the deadline; will dial again on the next connection", pod)
	}
	return fmt.Errorf("port-forward to pod %q: %s", pod, firstLine(err.Error()))
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
