package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeOpener answers each Open with the next scripted body; once they are used up, Open
// blocks until ctx ends (a quiet follow stream).
type fakeOpener struct {
	mu     sync.Mutex
	bodies []any // string bodies, or errors
	opts   []string
	calls  chan struct{}
}

func (o *fakeOpener) Open(ctx context.Context, ns, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	o.mu.Lock()
	desc := fmt.Sprintf("follow=%v previous=%v", opts.Follow, opts.Previous)
	if opts.TailLines != nil {
		desc += fmt.Sprintf(" tail=%d", *opts.TailLines)
	}
	if opts.SinceTime != nil {
		desc += " since=" + opts.SinceTime.UTC().Format(time.RFC3339)
	}
	o.opts = append(o.opts, desc)
	var next any
	if len(o.bodies) > 0 {
		next, o.bodies = o.bodies[0], o.bodies[1:]
	}
	o.mu.Unlock()
	o.calls <- struct{}{}
	switch b := next.(type) {
	case string:
		return io.NopCloser(strings.NewReader(b)), nil
	case error:
		return nil, b
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (o *fakeOpener) seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.opts...)
}

func ts(sec, nsec int) string {
	return time.Unix(int64(sec), int64(nsec)).UTC().Format(time.RFC3339Nano)
}

func running(name, id string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", ContainerID: id, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		}}},
	}
}

type lines struct {
	mu  sync.Mutex
	got []string
}

func (l *lines) add(line Line) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, line.Pod+"/"+line.Container+" "+line.Text)
}

func (l *lines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got...)
}

// waitCalls waits for n Opens, stepping clk over each back-off.
func waitCalls(t *testing.T, o *fakeOpener, clk *clocktesting.FakeClock, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for got := 0; got < n; {
		select {
		case <-o.calls:
			got++
		case <-deadline:
			t.Fatalf("%d opens, want %d: %q", got, n, o.seen())
		default:
			if clk.HasWaiters() {
				clk.Step(time.Minute)
			}
			runtime.Gosched()
		}
	}
}

func TestResumeWithoutRepeatOrLoss(t *testing.T) {
	// The first stream drops after line 3; lines 2 and 3 share a timestamp. The resumed
	// stream starts at the second of line 2 (sinceTime's precision) and repeats 1..3.
	o := &fakeOpener{calls: make(chan struct{}, 10), bodies: []any{
		ts(10, 100) + " one\n" + ts(10, 500) + " two\n" + ts(10, 500) + " three\n",
		ts(10, 100) + " one\n" + ts(10, 500) + " two\n" + ts(10, 500) + " three\n" + ts(10, 500) + " four\n" + ts(11, 0) + " five\n",
	}}
	var got lines
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	f := &Follower{Config: Config{Tail: 10}, Namespace: "ns", Open: o, Report: got.add, Clock: clk}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx)
	f.ObservePod(running("web-1", "c1"), []string{"app"}, false)
	f.Listed()
	waitCalls(t, o, clk, 3) // first stream, resumed stream, then a quiet follow
	cancel()
	f.Wait()
	want := []string{"web-1/app one", "web-1/app two", "web-1/app three", "web-1/app four", "web-1/app five"}
	if strings.Join(got.all(), "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got.all(), "\n"), strings.Join(want, "\n"))
	}
	opts := o.seen()
	if opts[0] != "follow=true previous=false tail=10" || opts[1] != "follow=true previous=false since=1970-01-01T00:00:11Z" && opts[1] != "follow=true previous=false since=1970-01-01T00:00:10Z" {
		t.Fatalf("options: %q", opts)
	}
}

func TestRestartedContainerFromFirstLine(t *testing.T) {
	o := &fakeOpener{calls: make(chan struct{}, 10), bodies: []any{
		ts(10, 0) + " old 1\n" + ts(11, 0) + " old 2\n",    // c1, until it crashed
		ts(11, 0) + " old 2\n" + ts(12, 0) + " old last\n", // previous: what c1 wrote after the drop
		ts(20, 0) + " new 1\n",                             // c2 from its first line
	}}
	var got lines
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	f := &Follower{Config: Config{Tail: 10}, Namespace: "ns", Open: o, Report: got.add, Clock: clk}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx)
	f.Listed()
	// A pod that starts after the session did: no tail.
	f.ObservePod(running("web-2", "c1"), []string{"app"}, false)
	waitCalls(t, o, clk, 1)
	f.ObservePod(running("web-2", "c2"), []string{"app"}, false)
	waitCalls(t, o, clk, 3)
	cancel()
	f.Wait()
	want := []string{"web-2/app old 1", "web-2/app old 2", "web-2/app old last", "web-2/app new 1"}
	if strings.Join(got.all(), "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s\nwant:\n%s\nopens: %q", strings.Join(got.all(), "\n"), strings.Join(want, "\n"), o.seen())
	}
	opts := o.seen()
	if opts[0] != "follow=true previous=false" || !strings.HasPrefix(opts[1], "follow=false previous=true since=") {
		t.Fatalf("options: %q", opts)
	}
}

// TestRemovedContainerIsNoLogLine: the kubelet answers for a container it
// removed (an old pod of a rollout, going) with its own sentence in the
// stream, "unable to retrieve container logs for containerd://…", with no
// timestamp: it is not the app's output and is not shown.
func TestRemovedContainerIsNoLogLine(t *testing.T) {
	o := &fakeOpener{calls: make(chan struct{}, 10), bodies: []any{
		ts(10, 0) + " old 1\n",
		"unable to retrieve container logs for containerd://c1",
		ts(20, 0) + " new 1\n",
	}}
	var got lines
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	f := &Follower{Config: Config{Tail: 10}, Namespace: "ns", Open: o, Report: got.add, Clock: clk}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx)
	f.Listed()
	f.ObservePod(running("web-2", "c1"), []string{"app"}, false)
	waitCalls(t, o, clk, 1)
	f.ObservePod(running("web-2", "c2"), []string{"app"}, false)
	waitCalls(t, o, clk, 3)
	cancel()
	f.Wait()
	want := []string{"web-2/app old 1", "web-2/app new 1"}
	if strings.Join(got.all(), "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got.all(), "\n"), strings.Join(want, "\n"))
	}
}

func TestForbiddenSaidOnceAndNotRetried(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods/log"}, "web-1", errors.New("no"))
	o := &fakeOpener{calls: make(chan struct{}, 10), bodies: []any{forbidden, forbidden}}
	var warns []string
	var mu sync.Mutex
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	f := &Follower{Namespace: "ns", Open: o, Report: func(Line) {}, Clock: clk,
		Warn: func(err error) { mu.Lock(); warns = append(warns, err.Error()); mu.Unlock() }}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx)
	f.ObservePod(running("web-1", "c1"), []string{"app"}, false)
	f.ObservePod(running("web-2", "c1"), []string{"app"}, false)
	waitCalls(t, o, clk, 2)
	f.Wait() // both tails ended by themselves
	cancel()
	if len(warns) != 1 || !strings.Contains(warns[0], `grant the RBAC verb "get" on "pods/log"`) {
		t.Fatalf("warnings: %q", warns)
	}
}

func TestReadLineBounded(t *testing.T) {
	long := strings.Repeat("x", MaxLine+100)
	o := &fakeOpener{calls: make(chan struct{}, 10), bodies: []any{ts(1, 0) + " " + long + "\n" + ts(2, 0) + " after\n"}}
	var got lines
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	f := &Follower{Namespace: "ns", Open: o, Report: got.add, Clock: clk}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx)
	f.ObservePod(running("p", "c1"), []string{"app"}, false)
	waitCalls(t, o, clk, 2)
	cancel()
	f.Wait()
	all := got.all()
	if len(all) != 2 || len(all[0]) > MaxLine+len("p/app ") || all[1] != "p/app after" {
		t.Fatalf("got %d lines, first %d bytes: %q", len(all), len(all[0]), all[len(all)-1])
	}
}
