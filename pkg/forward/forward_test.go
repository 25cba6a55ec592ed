package forward

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/streaming/pkg/httpstream"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testwait"
)

// pod is a pod running container app (containerID id) created at second created.
func pod(name, id string, created int64, ready bool) *corev1.Pod {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Unix(created, 0)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", ContainerID: id, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		},
	}
}

func deleting(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	now := metav1.Now()
	p.DeletionTimestamp = &now
	return p
}

func TestChoose(t *testing.T) {
	app := []string{"app"}
	info := func(p *corev1.Pod) *podInfo { return &podInfo{pod: p, containers: app} }
	synced := map[string]bool{"a1": true, "b1": true, "c1": true}
	for _, tc := range []struct {
		name        string
		pods        []*corev1.Pod
		current     string
		unreachable map[string]bool
		want        string
		why         string
	}{
		{"none", nil, "", nil, "", WaitNoPod},
		{"not ready", []*corev1.Pod{pod("a", "a1", 1, false)}, "", nil, "", WaitNotReady},
		{"ready but unsynced", []*corev1.Pod{pod("a", "a2", 1, true), pod("b", "b1", 1, false)}, "", nil, "", WaitSyncing},
		{"terminating is never chosen", []*corev1.Pod{deleting(pod("a", "a1", 1, true))}, "", nil, "", WaitNoPod},
		{"newest eligible", []*corev1.Pod{pod("a", "a1", 1, true), pod("b", "b1", 2, true)}, "", nil, "b", ""},
		{"current stays while eligible", []*corev1.Pod{pod("a", "a1", 1, true), pod("b", "b1", 2, true)}, "a", nil, "a", ""},
		{"current left", []*corev1.Pod{deleting(pod("a", "a1", 1, true)), pod("b", "b1", 2, true), pod("c", "c1", 3, false)}, "a", nil, "b", ""},
		{"restarted container is unsynced", []*corev1.Pod{pod("a", "a9", 1, true)}, "a", nil, "", WaitSyncing},
		{"unreachable current is left", []*corev1.Pod{pod("a", "a1", 1, true), pod("b", "b1", 2, true)}, "b", map[string]bool{"b": true}, "a", ""},
		{"unreachable is never chosen", []*corev1.Pod{pod("a", "a1", 1, true), pod("b", "b1", 2, true)}, "", map[string]bool{"b": true}, "a", ""},
		{"none reachable", []*corev1.Pod{pod("a", "a1", 1, true), pod("b", "b2", 2, true)}, "a", map[string]bool{"a": true}, "", WaitUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := map[string]*podInfo{}
			for _, p := range tc.pods {
				pods[p.Name] = info(p)
			}
			got, why := choose(pods, synced, tc.current, func(pod string) bool { return tc.unreachable[pod] })
			if got != tc.want || why != tc.why {
				t.Fatalf("choose = %q, %q; want %q, %q", got, why, tc.want, tc.why)
			}
		})
	}
}

// recorder collects a forwarder's events.
type recorder struct {
	mu  sync.Mutex
	evs []string
	ch  chan string
}

func newRecorder() *recorder { return &recorder{ch: make(chan string, 100)} }

func (r *recorder) report(ev Event) {
	s := ev.State
	switch ev.State {
	case Serving:
		s += " " + ev.Pod
		if ev.Previous != "" {
			s += " was " + ev.Previous + " " + ev.Reason
		}
	case Waiting:
		s += " " + ev.Reason
	case Lost:
		s += " " + ev.Pod + " " + ev.Reason + " " + ev.Waiting
	case Failed:
		s += " " + ev.Message
	case Trying:
		s += " " + ev.Pod
		if ev.Previous != "" {
			s += " was " + ev.Previous + " " + ev.Reason
		}
	case Unreachable:
		s += " " + ev.Pod
	}
	r.mu.Lock()
	r.evs = append(r.evs, s)
	r.mu.Unlock()
	r.ch <- s
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.evs...)
}

func (r *recorder) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-r.ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("no event; got %q", r.all())
		return ""
	}
}

func TestEventsOncePerChange(t *testing.T) {
	rec := newRecorder()
	f := &Forwarder{Specs: []Spec{{Local: 0, Remote: "80"}}, Report: rec.report}
	if err := f.Listen(); err != nil {
		t.Fatal(err)
	}
	defer f.closeListeners()
	app := []string{"app"}
	f.ObservePod(pod("a", "a1", 1, false), app, false) // not listed yet: nothing judged
	f.Listed()
	f.ObservePod(pod("a", "a1", 1, false), app, false) // the same again
	f.ObservePod(pod("a", "a1", 1, true), app, false)
	f.ObservePod(pod("a", "a1", 1, true), app, false)
	f.Synced("a1")
	f.ObservePod(pod("b", "b1", 2, true), app, false) // another eligible pod: a keeps serving
	f.Synced("b1")
	f.ObservePod(pod("a", "a1", 1, true), app, true)   // a deleted: b takes over
	f.ObservePod(pod("b", "b2", 2, true), app, false)  // b's container restarted: unsynced
	f.ObservePod(pod("b", "b2", 2, false), app, false) // and not Ready
	f.ObservePod(pod("b", "b2", 2, true), app, false)
	f.Synced("b2")
	want := []string{
		"listening",
		"waiting not-ready",
		"waiting syncing",
		"serving a",
		"serving b was a deleted",
		"lost b restarted syncing",
		"waiting not-ready",
		"waiting syncing",
		"serving b",
	}
	if got := rec.all(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// fakeDialer connects to in-memory pods that answer each line with "POD PORT LINE".
type fakeDialer struct {
	mu    sync.Mutex
	dials []string
	conns []*fakeConn
	fail  error
	// down fails the dials of a pod (its node cut off); refused says, per pod and port, what
	// the error stream says instead of connecting (the pod's network gone).
	down    map[string]error
	refused map[string]string
}

func (d *fakeDialer) Dial(ctx context.Context, ns, pod string) (httpstream.Connection, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dials = append(d.dials, pod)
	if d.fail != nil {
		return nil, d.fail
	}
	if err := d.down[pod]; err != nil {
		return nil, err
	}
	c := &fakeConn{pod: pod, closed: make(chan bool), d: d}
	d.conns = append(d.conns, c)
	return c, nil
}

func (d *fakeDialer) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.dials)
}

// dialsOf counts the dials of pod.
func (d *fakeDialer) dialsOf(pod string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, p := range d.dials {
		if p == pod {
			n++
		}
	}
	return n
}

// cut makes pod unreachable (err != nil: its dials fail, its open connections end) or
// reachable again.
func (d *fakeDialer) cut(pod string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down == nil {
		d.down = map[string]error{}
	}
	d.down[pod] = err
	if err != nil {
		for _, c := range d.conns {
			if c.pod == pod {
				c.Close()
			}
		}
	}
}

func (d *fakeDialer) refuse(pod, port, msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.refused == nil {
		d.refused = map[string]string{}
	}
	d.refused[pod+" "+port] = msg
}

type fakeConn struct {
	pod    string
	once   sync.Once
	closed chan bool
	d      *fakeDialer
}

func (c *fakeConn) CreateStream(h http.Header) (httpstream.Stream, error) {
	select {
	case <-c.closed:
		return nil, errors.New("connection closed")
	default:
	}
	c.d.mu.Lock()
	refused := c.d.refused[c.pod+" "+h.Get(corev1.PortHeader)]
	c.d.mu.Unlock()
	if h.Get(corev1.StreamType) == corev1.StreamTypeError {
		if refused != "" {
			return &fakeStream{Conn: saying{strings.NewReader(refused)}, h: h}, nil
		}
		return &fakeStream{Conn: nopConn{}, h: h}, nil
	}
	local, remote := net.Pipe()
	go func() {
		defer remote.Close()
		if refused != "" {
			return
		}
		line, err := bufio.NewReader(remote).ReadString('\n')
		if err != nil {
			return
		}
		fmt.Fprintf(remote, "%s %s %s", c.pod, h.Get(corev1.PortHeader), line)
	}()
	return &fakeStream{Conn: local, h: h}, nil
}
func (c *fakeConn) Close() error                       { c.once.Do(func() { close(c.closed) }); return nil }
func (c *fakeConn) CloseChan() <-chan bool             { return c.closed }
func (c *fakeConn) SetIdleTimeout(time.Duration)       {}
func (c *fakeConn) RemoveStreams(...httpstream.Stream) {}

type fakeStream struct {
	net.Conn
	h http.Header
}

func (s *fakeStream) Reset() error         { return s.Close() }
func (s *fakeStream) Headers() http.Header { return s.h }
func (s *fakeStream) Identifier() uint32   { return 0 }

// nopConn is an error stream with nothing to say.
type nopConn struct{ net.Conn }

func (nopConn) Read([]byte) (int, error)  { return 0, io.EOF }
func (nopConn) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }
func (nopConn) Close() error              { return nil }

// saying is an error stream that says what its reader holds.
type saying struct{ r *strings.Reader }

func (s saying) Read(b []byte) (int, error)     { return s.r.Read(b) }
func (saying) Write([]byte) (int, error)        { return 0, io.ErrClosedPipe }
func (saying) Close() error                     { return nil }
func (saying) LocalAddr() net.Addr              { return nil }
func (saying) RemoteAddr() net.Addr             { return nil }
func (saying) SetDeadline(time.Time) error      { return nil }
func (saying) SetReadDeadline(time.Time) error  { return nil }
func (saying) SetWriteDeadline(time.Time) error { return nil }

// ask sends line through the forward at addr and returns the answer, or "" when the
// connection was closed without one.
func ask(t *testing.T, addr, line string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "%s\n", line)
	b, _ := io.ReadAll(c)
	return strings.TrimSpace(string(b))
}

func TestConnectionsFollowThePod(t *testing.T) {
	rec := newRecorder()
	d := &fakeDialer{}
	f := &Forwarder{Specs: []Spec{{Local: 0, Remote: "http"}}, Report: rec.report, Dialer: d}
	if err := f.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { f.Serve(ctx); close(served) }()
	addr := f.Addrs()[0]
	app := []string{"app"}
	f.Listed()

	// A connection made while no pod can serve waits for one, and nothing is dialled.
	answer := make(chan string)
	go func() { answer <- ask(t, addr, "early") }()
	f.ObservePod(pod("a", "a1", 1, true), app, false)
	for rec.next(t) != "waiting syncing" {
	}
	if n := d.count(); n != 0 {
		t.Fatalf("%d dials while no pod could serve", n)
	}
	f.Synced("a1")
	if got := <-answer; got != "a 8080 early" {
		t.Fatalf("answer %q", got)
	}
	for range 3 {
		if got := ask(t, addr, "again"); got != "a 8080 again" {
			t.Fatalf("answer %q", got)
		}
	}
	if n := d.count(); n != 1 {
		t.Fatalf("%d dials for four connections to one pod, want 1", n)
	}

	// A rollout: b comes, a goes; new connections go to b, a's connection is closed.
	f.ObservePod(pod("b", "b1", 2, true), app, false)
	f.Synced("b1")
	f.ObservePod(deleting(pod("a", "a1", 1, true)), app, false)
	if got := ask(t, addr, "later"); got != "b 8080 later" {
		t.Fatalf("answer %q", got)
	}
	d.mu.Lock()
	first := d.conns[0]
	d.mu.Unlock()
	// The close runs in the background once the last stream on it ends (closeConn): wait for
	// it rather than sample it.
	testwait.Result(t, first.closed, "closing the connection to the old pod")

	// The port is released when Serve ends.
	cancel()
	<-served
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port not released: %v", err)
	}
	l.Close()
}

func TestNoDialStormAfterFailure(t *testing.T) {
	rec := newRecorder()
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods/portforward"}, "a", errors.New("no"))
	d := &fakeDialer{fail: forbidden}
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	f := &Forwarder{Specs: []Spec{{Local: 0, Remote: "80"}}, Report: rec.report, Dialer: d, Clock: clk}
	if err := f.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Serve(ctx)
	f.Listed()
	f.ObservePod(pod("a", "a1", 1, true), []string{"app"}, false)
	f.Synced("a1")
	for range 10 {
		if got := ask(t, f.Addrs()[0], "x"); got != "" {
			t.Fatalf("answer %q", got)
		}
	}
	if n := d.count(); n != 1 {
		t.Fatalf("%d dials within the back-off, want 1", n)
	}
	var errs []string
	for _, e := range rec.all() {
		if strings.HasPrefix(e, Failed) {
			errs = append(errs, e)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], `grant the RBAC verb "create" on "pods/portforward"`) {
		t.Fatalf("errors said: %q", errs)
	}
	clk.Step(2 * time.Second) // the back-off ended: the next connection dials again
	ask(t, f.Addrs()[0], "x")
	if n := d.count(); n != 2 {
		t.Fatalf("%d dials after the back-off, want 2", n)
	}
}

func TestWaitingConnectionTimesOut(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	d := &fakeDialer{}
	f := &Forwarder{Specs: []Spec{{Local: 0, Remote: "80"}}, Dialer: d, Clock: clk, WaitTimeout: time.Minute}
	if err := f.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Serve(ctx)
	f.Listed()
	answer := make(chan string)
	go func() { answer <- ask(t, f.Addrs()[0], "x") }()
	for !clk.HasWaiters() {
		runtime.Gosched()
	}
	clk.Step(time.Minute)
	if got := <-answer; got != "" {
		t.Fatalf("answer %q", got)
	}
	if n := d.count(); n != 0 {
		t.Fatalf("%d dials", n)
	}
}

func TestListenBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	f := &Forwarder{Specs: []Spec{{Local: 0, Remote: "80"}, {Local: port, Remote: "81"}}}
	err = f.Listen()
	if err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "0 for a free one") {
		t.Fatalf("Listen = %v", err)
	}
	// The first forward's port was released again.
	if len(f.Addrs()) != 1 {
		t.Fatalf("addrs %v", f.Addrs())
	}
	l2, err := net.Listen("tcp", f.Addrs()[0])
	if err != nil {
		t.Fatalf("first port still bound: %v", err)
	}
	l2.Close()
}

// serve listens and serves f until the test ends.
func serve(t *testing.T, f *Forwarder) {
	t.Helper()
	if err := f.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { f.Serve(ctx); close(served) }()
	t.Cleanup(func() { cancel(); <-served })
}

// since returns the events said after the first n.
func (r *recorder) since(n int) []string { return r.all()[n:] }

// TestUnreachablePodIsLeft: a pod whose dials fail (its node cut off from the API server) is
// left for another Ready, synced pod, and the connection that found it so goes there; it is not
// dialled again before its back-off (1 s, doubling to 30 s, reset by a success) ends, nor while
// the pod that took over serves; the status line never says it serves while it can't. Before,
// every connection failed on it while the status line said "serving a".
func TestUnreachablePodIsLeft(t *testing.T) {
	rec := newRecorder()
	d := &fakeDialer{}
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	f := &Forwarder{Specs: []Spec{{Local: 0, Remote: "http"}}, Report: rec.report, Dialer: d, Clock: clk}
	serve(t, f)
	addr := f.Addrs()[0]
	app := []string{"app"}
	f.Listed()
	f.ObservePod(pod("a", "a1", 1, true), app, false)
	f.Synced("a1")
	f.ObservePod(pod("b", "b1", 2, true), app, false)
	f.Synced("b1")
	if got := ask(t, addr, "one"); got != "a 8080 one" {
		t.Fatalf("answer %q", got)
	}
	timeout := errors.New("error dialing backend: dial tcp 10.0.0.1:10250: i/o timeout")
	n := len(rec.all())
	d.cut("a", timeout)
	if got := ask(t, addr, "two"); got != "b 8080 two" {
		t.Fatalf("a connection while a is cut off: answer %q, events %q", got, rec.since(n))
	}
	if got, want := rec.since(n), []string{"trying b was a unreachable", "serving b"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events after a was cut off:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	dialsA := d.dialsOf("a")
	for range 3 {
		if got := ask(t, addr, "three"); got != "b 8080 three" {
			t.Fatalf("answer %q", got)
		}
	}
	clk.Step(time.Minute) // a's back-off is over, but b serves: connections stay on b
	if got := ask(t, addr, "four"); got != "b 8080 four" {
		t.Fatalf("answer %q", got)
	}
	if got := d.dialsOf("a"); got != dialsA {
		t.Fatalf("a dialled %d more times while b served", got-dialsA)
	}

	// b is cut off too: a is tried again (its back-off is over), fails, and there is no
	// reachable pod: connections are closed at once, and nothing is dialled within the
	// back-offs.
	n = len(rec.all())
	d.cut("b", timeout)
	if got := ask(t, addr, "five"); got != "" {
		t.Fatalf("answer %q with both pods cut off", got)
	}
	if got, want := rec.since(n), []string{"trying a was b unreachable", "unreachable a", `error port-forward to pod "a": ` + timeout.Error()}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events after b was cut off:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	dials := d.count()
	for range 3 {
		if got := ask(t, addr, "six"); got != "" {
			t.Fatalf("answer %q", got)
		}
	}
	if got := d.count(); got != dials {
		t.Fatalf("%d dials within the back-offs", got-dials)
	}
	// b failed once (1 s), a twice (2 s): after 1 s only b is tried.
	clk.Step(time.Second)
	ask(t, addr, "seven")
	if da, db := d.dialsOf("a")-dialsA, d.dialsOf("b"); da != 1 || db != 3 {
		t.Fatalf("after 1 s: a dialled %d times since it was left (want 1), b %d in all (want 3)", da, db)
	}
	// a is back; after 1 s more its back-off (2 s) is over, b's (now 2 s) is not.
	d.cut("a", nil)
	clk.Step(time.Second)
	n = len(rec.all())
	if got := ask(t, addr, "eight"); got != "a 8080 eight" {
		t.Fatalf("answer %q once a is back, events %q", got, rec.since(n))
	}
	if got := rec.since(n); len(got) == 0 || got[len(got)-1] != "serving a" {
		t.Fatalf("events once a answered: %q", got)
	}
	for _, e := range rec.all() {
		if strings.HasPrefix(e, Serving) && e != "serving a" && e != "serving b" {
			t.Fatalf("said %q", e)
		}
	}
	// A success reset a's back-off: cut off again, it is dialled again after 1 s, not 4 s.
	d.cut("a", timeout)
	ask(t, addr, "nine")
	da := d.dialsOf("a")
	clk.Step(time.Second)
	ask(t, addr, "ten")
	if got := d.dialsOf("a"); got != da+1 {
		t.Fatalf("a dialled %d times 1 s after its first failure since a success, want 1", got-da)
	}
}

// TestRefusedPortIsLeft: a pod whose pods/portforward answers but whose port refuses every
// connection (its network gone: the error stream says so, nothing comes back) is left for
// another Ready, synced pod by that forward only; a forward to another port of it keeps it.
func TestRefusedPortIsLeft(t *testing.T) {
	var mu sync.Mutex
	said := map[string][]string{}
	d := &fakeDialer{}
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	f := &Forwarder{Specs: []Spec{{Local: 0, Remote: "http"}, {Local: 0, Remote: "9090"}}, Dialer: d, Clock: clk,
		Report: func(ev Event) {
			mu.Lock()
			defer mu.Unlock()
			said[ev.Spec.Remote] = append(said[ev.Spec.Remote], ev.Text())
		}}
	serve(t, f)
	app := []string{"app"}
	f.Listed()
	f.ObservePod(pod("a", "a1", 1, true), app, false)
	f.Synced("a1")
	f.ObservePod(pod("b", "b1", 2, true), app, false)
	f.Synced("b1")
	d.refuse("a", "9090", "error forwarding port 9090 to pod a: failed to connect to localhost:9090 inside namespace: connection refused")
	if got := ask(t, f.Addrs()[1], "x"); got != "" {
		t.Fatalf("answer %q", got)
	}
	for range 2 {
		if got := ask(t, f.Addrs()[1], "y"); got != "b 9090 y" {
			mu.Lock()
			t.Fatalf("answer %q after a refused port 9090; said %q", got, said)
		}
		if got := ask(t, f.Addrs()[0], "z"); got != "a 8080 z" {
			t.Fatalf("answer %q on port http", got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	start := []string{"listening", "waiting: no running pod", "waiting: initial sync running", "serving a"}
	if strings.Join(said["http"], "\n") != strings.Join(start, "\n") {
		t.Errorf("forward to http said %q, want %q", said["http"], start)
	}
	want := append(start,
		`error: pod "a" port 9090: error forwarding port 9090 to pod a: failed to connect to localhost:9090 inside namespace: connection refused`,
		`pod a unreachable (pod "a" port 9090: error forwarding port 9090 to pod a: failed to connect to localhost:9090 inside namespace: connection refused); trying pod b`,
		"serving b")
	if strings.Join(said["9090"], "\n") != strings.Join(want, "\n") {
		t.Errorf("forward to 9090 said:\n%s\nwant:\n%s", strings.Join(said["9090"], "\n"), strings.Join(want, "\n"))
	}
}

func TestEventText(t *testing.T) {
	for _, tc := range []struct {
		ev   Event
		want string
	}{
		{Event{State: Trying, Pod: "b", Previous: "a", Reason: LostUnreachable, Message: "i/o timeout"}, "pod a unreachable (i/o timeout); trying pod b"},
		{Event{State: Trying, Pod: "a"}, "trying pod a"},
		{Event{State: Unreachable, Pod: "a", Message: "i/o timeout"}, "pod a unreachable (i/o timeout); no reachable pod"},
	} {
		if got := tc.ev.Text(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.ev, got, tc.want)
		}
	}
}
