// Package logs follows the output of a workload's synced containers, not of one pod: one
// tail per pod and container, started and stopped by the tracker's pod events
// (pkg/workload), as stern's tail loop does. A tail reads with timestamps and remembers the
// last one it showed, so a stream that drops (a kubelet restart, an API server timeout, a
// rotated file) resumes where it was without repeating or losing a line, and a restarted
// container is read from its first line after what is left of the one before.
package logs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Config is --logs-tail and --logs-since: what of the containers already running when the
// session starts is shown. Containers that start later are shown from their first line.
type Config struct {
	// Tail is how many of their last lines are shown; negative means all.
	Tail int64
	// Since, if set, shows only lines younger than this.
	Since time.Duration
}

// DefaultTail is --logs-tail's default.
const DefaultTail = 10

// Line is one line a container wrote.
type Line struct {
	Namespace, Pod, Container string
	// Text is the line without its end.
	Text string
	// Time is the container runtime's timestamp of the line.
	Time time.Time
}

// Opener opens a pod's log stream (pods/log).
type Opener interface {
	Open(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error)
}

// ClientOpener is the API server's pods/log.
type ClientOpener struct{ Client kubernetes.Interface }

// Open implements Opener.
func (o ClientOpener) Open(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	return o.Client.CoreV1().Pods(namespace).GetLogs(pod, opts).Stream(ctx)
}

// Deadlines and back-off.
const (
	// OpenTimeout bounds opening a stream (the response's headers, not the stream's life).
	OpenTimeout = 30 * time.Second
	minBackoff  = time.Second
	maxBackoff  = 30 * time.Second
	// MaxLine is the longest line shown; the rest of a longer one is dropped.
	MaxLine = 64 << 10
)

// Follower follows the chosen containers of the pods it is told about.
type Follower struct {
	Config
	Namespace string
	Open      Opener
	// Report receives each line, whole; Warn each problem, once.
	Report func(Line)
	Warn   func(error)
	// Clock times back-offs; nil means the real clock.
	Clock clock.Clock

	mu     sync.Mutex
	ctx    context.Context
	tails  map[string]*tail // by pod/container
	listed bool
	warned map[string]bool
	wg     sync.WaitGroup
}

// Start makes the follower ready for pod events; its tails end with ctx.
func (f *Follower) Start(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Clock == nil {
		f.Clock = clock.RealClock{}
	}
	f.ctx, f.tails, f.warned = ctx, map[string]*tail{}, map[string]bool{}
}

// Listed says the first list of pods was observed: containers seen later started after the
// session did, and are shown from their first line.
func (f *Follower) Listed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listed = true
}

// Wait waits for the tails to end (after ctx did).
func (f *Follower) Wait() { f.wg.Wait() }

// ObservePod implements workload.PodObserver.
func (f *Follower) ObservePod(pod *corev1.Pod, containers []string, gone bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx == nil {
		return
	}
	for _, c := range containers {
		key := pod.Name + "/" + c
		t := f.tails[key]
		if gone {
			if t != nil {
				t.cancel()
				delete(f.tails, key)
			}
			continue
		}
		st := containerStatus(pod, c)
		if st == nil || (st.ContainerID == "" && st.LastTerminationState.Terminated == nil) {
			continue // not started yet
		}
		if t == nil {
			ctx, cancel := context.WithCancel(f.ctx)
			t = &tail{f: f, pod: pod.Name, container: c, cancel: cancel, kick: make(chan struct{}, 1),
				existing: !f.listed}
			f.tails[key] = t
			t.set(st)
			f.wg.Go(func() { t.run(ctx) })
			continue
		}
		t.set(st)
	}
}

// warn reports err once per message.
func (f *Follower) warn(err error) {
	f.mu.Lock()
	said := f.warned[err.Error()]
	f.warned[err.Error()] = true
	f.mu.Unlock()
	if !said && f.Warn != nil {
		f.Warn(err)
	}
}

// tail follows one container name of one pod, across its restarts.
type tail struct {
	f              *Follower
	pod, container string
	cancel         context.CancelFunc
	kick           chan struct{} // a status change
	existing       bool          // ran when the session started: show its last lines only

	mu      sync.Mutex
	id      string // the current containerID
	running bool

	// Under the run loop only: the last timestamp shown and how many lines carried it.
	last   time.Time
	atLast int
	read   string // the containerID the last stream was opened for
}

func (t *tail) set(st *corev1.ContainerStatus) {
	t.mu.Lock()
	t.id, t.running = st.ContainerID, st.State.Running != nil
	if t.id == "" && st.LastTerminationState.Terminated != nil {
		t.id = st.LastTerminationState.Terminated.ContainerID // waiting to restart
	}
	t.mu.Unlock()
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

func (t *tail) state() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.id, t.running
}

// run reads the container's lines until ctx ends (its pod went, or the session ended).
func (t *tail) run(ctx context.Context) {
	wait := time.Duration(0)
	for ctx.Err() == nil {
		id, running := t.state()
		if id == "" {
			if !t.sleep(ctx, 0) {
				return
			}
			continue
		}
		if t.read != "" && id != t.read {
			// A new container: first what is left of the one read until now (it may have
			// written after the stream dropped, or crashed while nothing was read).
			_, _ = t.stream(ctx, &corev1.PodLogOptions{Container: t.container, Previous: true, Timestamps: true})
		}
		opts := &corev1.PodLogOptions{Container: t.container, Follow: running, Timestamps: true}
		if t.read == "" && t.existing {
			if t.f.Tail >= 0 {
				opts.TailLines = &t.f.Tail
			}
			if t.f.Since > 0 {
				s := int64(t.f.Since.Seconds())
				opts.SinceSeconds = &s
			}
		}
		t.read = id
		got, err := t.stream(ctx, opts)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errForbidden) {
			return
		}
		id2, running2 := t.state()
		switch {
		case err == nil && !running2 && id2 == id, err == nil && !running:
			// The container stopped and all it wrote was read: wait for the next one.
			wait = 0
			if !t.sleep(ctx, 0) {
				return
			}
		default:
			// The stream dropped (or could not open) while the container runs: resume from
			// the last line shown, backing off while it keeps failing.
			if got {
				wait = 0
			}
			wait = min(max(2*wait, minBackoff), maxBackoff)
			if !t.sleep(ctx, wait) {
				return
			}
		}
	}
}

// sleep waits for a status change, or d when d > 0; false when ctx ended.
func (t *tail) sleep(ctx context.Context, d time.Duration) bool {
	var timeout <-chan time.Time
	if d > 0 {
		tm := t.f.Clock.NewTimer(d)
		defer tm.Stop()
		timeout = tm.C()
	}
	select {
	case <-ctx.Done():
		return false
	case <-t.kick:
		if d > 0 {
			// A change does not cut a back-off short: a pod that keeps changing
			// while its stream fails must not make a storm.
			select {
			case <-ctx.Done():
				return false
			case <-timeout:
			}
		}
	case <-timeout:
	}
	return true
}

var errForbidden = errors.New("forbidden")

// stream reads one stream of the container's log; it resumes after the last line shown.
// It says whether it read a line.
func (t *tail) stream(ctx context.Context, opts *corev1.PodLogOptions) (bool, error) {
	if !t.last.IsZero() {
		opts.TailLines, opts.SinceSeconds = nil, nil
		// sinceTime has a second's precision: lines of that second already shown are
		// skipped below.
		opts.SinceTime = &metav1.Time{Time: t.last}
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opened := make(chan struct{})
	go func() {
		tm := t.f.Clock.NewTimer(OpenTimeout)
		defer tm.Stop()
		select {
		case <-opened:
		case <-tm.C():
			cancel()
		case <-sctx.Done():
		}
	}()
	rc, err := t.f.Open.Open(sctx, t.f.Namespace, t.pod, opts)
	close(opened)
	if err != nil {
		if apierrors.IsForbidden(err) {
			t.f.warn(fmt.Errorf("not allowed to read the logs of the pods in namespace %q: grant the RBAC verb \"get\" on \"pods/log\" (see docs/rbac.yaml)", t.f.Namespace))
			return false, errForbidden
		}
		return false, err
	}
	defer func() { _ = rc.Close() }()
	return t.copy(rc)
}

// copy reports the lines of r that come after the last one shown.
func (t *tail) copy(r io.Reader) (bool, error) {
	br := bufio.NewReaderSize(r, 32<<10)
	// A resumed stream starts at the second of the last line shown: skip what is older, and
	// as many lines of the last one's timestamp as were shown with it.
	skipAt, skip, dup, got := t.last, t.atLast, 0, false
	for {
		raw, err := readLine(br)
		if raw != "" {
			ts, text, ok := split(raw)
			switch {
			case !ok && strings.HasPrefix(raw, kubeletGone):
				// The kubelet's own sentence for a container it removed (an old pod
				// of a rollout, going): not the app's output.
			case !ok:
				t.f.Report(Line{Namespace: t.f.Namespace, Pod: t.pod, Container: t.container, Text: raw})
				got = true
			case ts.Before(t.last):
			case ts.Equal(skipAt) && dup < skip:
				dup++
			default:
				if ts.Equal(t.last) {
					t.atLast++
				} else {
					t.last, t.atLast = ts, 1
				}
				t.f.Report(Line{Namespace: t.f.Namespace, Pod: t.pod, Container: t.container, Text: text, Time: ts})
				got = true
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			return got, err
		}
	}
}

// kubeletGone starts what the kubelet writes into a log stream, with no
// timestamp, for a container whose logs it no longer has.
const kubeletGone = "unable to retrieve container logs for "

// split cuts the runtime's RFC 3339 timestamp off a line read with timestamps=true.
func split(line string) (time.Time, string, bool) {
	stamp, text, ok := strings.Cut(line, " ")
	if !ok {
		stamp, text = line, ""
	}
	ts, err := time.Parse(time.RFC3339Nano, stamp)
	if err != nil {
		return time.Time{}, "", false
	}
	return ts, text, true
}

// readLine reads one line without its end, at most MaxLine bytes of it; a last line without
// an end is returned with io.EOF.
func readLine(br *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(b) < MaxLine {
			b = append(b, chunk[:min(len(chunk), MaxLine-len(b))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		s := strings.TrimRight(string(b), "\r\n")
		if err == nil {
			return s, nil
		}
		return s, err
	}
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}
