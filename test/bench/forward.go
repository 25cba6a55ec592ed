//go:build bench

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// fwdServer is PID 1 of the forward bench's pods: busybox httpd on 8080 serving /www, where
// livesync syncs index.html, and where the pod writes its name as pod.txt (an upload initial
// sync leaves it).
const fwdServer = `trap 'exit 0' TERM; mkdir -p /www; cat /etc/hostname >/www/pod.txt; httpd -p 8080 -h /www; while :; do sleep 1 & wait $$!; done`

// measureForward pairs --forward with kubectl port-forward: request latency to the same pod,
// interleaved (p50, p95); and the gap in service across rollouts (the old pod's last answer to
// the new, synced pod's first), against kubectl port-forward restarted in a loop the moment it
// exits, as a user would by hand (a loop is the best such a user can do).
func (b *bench) measureForward(ctx context.Context) error {
	labels := map[string]string{"app": "fwd"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "fwd", Namespace: b.c.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{{Name: "app", Image: b.c.image, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"/bin/sh", "-c", fwdServer},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
						PeriodSeconds: 1,
					}}},
			}},
		},
	}
	if _, err := b.c.client.AppsV1().Deployments(b.c.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating deployment fwd: %w", err)
	}
	ts, err := b.c.targets(ctx, "fwd", 1)
	if err != nil {
		return err
	}
	local := filepath.Join(b.tmp, "fwd")
	if err := os.MkdirAll(local, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(local, "index.html"), []byte("v1\n"), 0o644); err != nil {
		return err
	}
	s := b.newSession().Args("deploy/fwd", "--forward", "0:8080").Map(local, "/www").Timeout(3 * time.Minute).Start()
	defer s.Stop()
	ours := s.WaitMatch("forward listening", func(ev sessiontest.Event) bool { return ev.Type == "forward" && ev.State == "listening" }).Forward.Address
	s.WaitMatch("forward serving", func(ev sessiontest.Event) bool { return ev.Type == "forward" && ev.State == "serving" })

	// kubectl port-forward to the pod the forward serves.
	kpf, theirs, err := b.kubectlPortForward(ctx, "pod/"+ts[0].Pod, "0:8080")
	if err != nil {
		return err
	}
	defer kpf.stop()
	for _, addr := range []string{ours, theirs} {
		if got, err := fetch(addr, "/index.html", 10*time.Second); err != nil || got != "v1" {
			return fmt.Errorf("no answer through %s: %q, %v", addr, got, err)
		}
	}

	// Latency: a static file, a new connection per request (httpd closes each), interleaved.
	n := max(b.edits*5, 200)
	var mine, kubectl []time.Duration
	for i := range n {
		a, k, err := alternate(i, func() (time.Duration, error) { return timedWho(ours) }, func() (time.Duration, error) { return timedWho(theirs) })
		if err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		mine, kubectl = append(mine, a), append(kubectl, k)
	}
	kpf.stop()
	m50, k50, m95, k95 := percentile(mine, 50), percentile(kubectl, 50), percentile(mine, 95), percentile(kubectl, 95)
	b.logf("--forward request ms p50 %.2f p95 %.2f; kubectl port-forward p50 %.2f p95 %.2f (n=%d each)", msec(m50), msec(m95), msec(k50), msec(k95), n)
	b.res.pair(fmt.Sprintf("--forward: HTTP request (new connection) through the forward, p50 (n=%d)", n), msec(m50), "ms",
		"kubectl port-forward to the same pod, p50", msec(k50)).target("≤ 1.1×", msec(m50) <= 1.1*msec(k50))
	b.res.pair(fmt.Sprintf("--forward: HTTP request (new connection) through the forward, p95 (n=%d)", n), msec(m95), "ms",
		"kubectl port-forward to the same pod, p95", msec(k95)).target("≤ 1.1×", msec(m95) <= 1.1*msec(k95))

	// The gap across rollouts: both pollers run through the same rollouts.
	loopAddr, err := freePort()
	if err != nil {
		return err
	}
	loop := b.portForwardLoop(ctx, "deploy/fwd", loopAddr)
	defer loop.stop()
	if err := poll(ctx, time.Minute, func() (bool, error) {
		got, _ := fetch(loopAddr, "/index.html", 5*time.Second)
		return got == "v1", nil
	}); err != nil {
		return fmt.Errorf("the kubectl port-forward loop does not answer: %w", err)
	}
	rounds := max(b.reps, 3)
	var gapsMine, gapsLoop []time.Duration
	for r := range rounds {
		old, err := b.c.targets(ctx, "fwd", 1)
		if err != nil {
			return err
		}
		// Ours waits for a pod up to 30 s by itself; the loop's requests fail fast, and three
		// failures in a row restart kubectl port-forward (it does not always exit when its pod
		// goes: the connection can outlive the pod).
		pm, pl := startPoller(ours, 35*time.Second, nil), startPoller(loopAddr, 2*time.Second, loop.kick)
		if err := b.rolloutRestart(ctx, "fwd", r); err != nil {
			return err
		}
		gm, err := pm.gap(old[0].Pod, 3*time.Minute)
		if err != nil {
			return fmt.Errorf("--forward, rollout %d: %w", r, err)
		}
		gl, err := pl.gap(old[0].Pod, 3*time.Minute)
		if err != nil {
			return fmt.Errorf("kubectl port-forward loop, rollout %d: %w", r, err)
		}
		pm.stop()
		pl.stop()
		gapsMine, gapsLoop = append(gapsMine, gm), append(gapsLoop, gl)
		// The next rollout starts from a settled workload.
		if _, err := b.c.targets(ctx, "fwd", 1); err != nil {
			return err
		}
	}
	b.logf("--forward gap across a rollout ms: %s", fmtDurations(gapsMine))
	b.logf("kubectl port-forward restarted in a loop, gap ms: %s (%d restarts)", fmtDurations(gapsLoop), loop.restarts())
	g50, l50 := median(gapsMine), median(gapsLoop)
	b.res.pair(fmt.Sprintf("--forward: service gap across a rollout restart (old pod's last answer → new synced pod's first), p50 (n=%d)", rounds), msec(g50), "ms",
		"kubectl port-forward deploy/… restarted in a loop the moment it exits, p50", msec(l50)).target("≤ 1×", g50 <= l50)
	return nil
}

// timedWho times one answer through addr.
func timedWho(addr string) (time.Duration, error) {
	start := time.Now()
	if got, err := fetch(addr, "/index.html", 10*time.Second); err != nil || got != "v1" {
		return 0, fmt.Errorf("%q, %v", got, err)
	}
	return time.Since(start), nil
}

var fetchClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// who asks through addr which pod answers, and whether it serves the synced index.html: the
// pod's name, or "" (with no error) when it answered without the synced file.
func who(addr string, timeout time.Duration) (string, error) {
	pod, err := fetch(addr, "/pod.txt", timeout)
	if err != nil {
		return "", err
	}
	if got, err := fetch(addr, "/index.html", timeout); err != nil || got != "v1" {
		return "", err
	}
	return pod, nil
}

// fetch GETs path through addr.
func fetch(addr, path string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := fetchClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return strings.TrimSpace(string(body)), nil
}

// poller asks through addr every 20 ms and records who answered when.
type poller struct {
	mu      sync.Mutex
	answers []answer
	done    chan struct{}
	wg      sync.WaitGroup
}

type answer struct {
	at  time.Time
	pod string
}

// startPoller polls addr, each request bounded by timeout; after 3 failures in a row it calls
// onFail, if set (a user who sees the page fail and restarts the port-forward).
func startPoller(addr string, timeout time.Duration, onFail func()) *poller {
	p := &poller{done: make(chan struct{})}
	p.wg.Go(func() {
		fails := 0
		for {
			select {
			case <-p.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			got, err := who(addr, timeout)
			if err != nil {
				if fails++; fails >= 3 && onFail != nil {
					onFail()
					fails = 0
				}
				continue
			}
			fails = 0
			if got != "" {
				p.mu.Lock()
				p.answers = append(p.answers, answer{time.Now(), got})
				p.mu.Unlock()
			}
		}
	})
	return p
}

func (p *poller) stop() {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	p.wg.Wait()
}

// gap waits for an answer from a pod other than old and returns the time from old's last
// answer to it.
func (p *poller) gap(old string, timeout time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		var last, first time.Time
		for _, a := range p.answers {
			if a.pod == old {
				last = a.at
			} else if first.IsZero() {
				first = a.at
			}
		}
		p.mu.Unlock()
		if !first.IsZero() {
			if last.IsZero() {
				return 0, fmt.Errorf("no answer from %s before the new pod's", old)
			}
			return max(first.Sub(last), 0), nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, fmt.Errorf("no answer from a new pod within %s", timeout)
}

// rolloutRestart is kubectl rollout restart.
func (b *bench) rolloutRestart(ctx context.Context, name string, round int) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"livesync-bench/restart":"%d-%d"}}}}}`, round, time.Now().UnixNano())
	out, err := exec.CommandContext(ctx, b.c.kubectl, "--kubeconfig", b.c.kubeconfig, "-n", b.c.ns, "patch", "deploy/"+name, "-p", patch).CombinedOutput()
	if err != nil {
		return fmt.Errorf("restarting deploy/%s: %w: %s", name, err, out)
	}
	return nil
}

// kpf is one kubectl port-forward process.
type kpf struct {
	cmd  *exec.Cmd
	once sync.Once
}

func (k *kpf) stop() {
	k.once.Do(func() {
		_ = k.cmd.Process.Kill()
		_ = k.cmd.Wait()
	})
}

var forwardingRE = regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+) ->`)

// kubectlPortForward starts kubectl port-forward ref ports and returns its local address.
func (b *bench) kubectlPortForward(ctx context.Context, ref, ports string) (*kpf, string, error) {
	cmd := exec.CommandContext(ctx, b.c.kubectl, "--kubeconfig", b.c.kubeconfig, "-n", b.c.ns, "port-forward", "--address", "127.0.0.1", ref, ports)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	k := &kpf{cmd: cmd}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := forwardingRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case a := <-addr:
		return k, a, nil
	case <-time.After(30 * time.Second):
		k.stop()
		return nil, "", fmt.Errorf("kubectl port-forward %s %s printed no address", ref, ports)
	}
}

// pfLoop restarts kubectl port-forward on one local port the moment it exits.
type pfLoop struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	n      int
	cur    *exec.Cmd
	since  time.Time // cur's start
}

// kick kills the running kubectl port-forward, unless it started within the last 3 s (it may
// not listen yet: a user gives it that long too); the loop starts the next.
func (l *pfLoop) kick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil && l.cur.Process != nil && time.Since(l.since) > 3*time.Second {
		_ = l.cur.Process.Kill()
	}
}

func (b *bench) portForwardLoop(ctx context.Context, ref, addr string) *pfLoop {
	ctx, cancel := context.WithCancel(ctx)
	l := &pfLoop{cancel: cancel, done: make(chan struct{})}
	_, port, _ := net.SplitHostPort(addr)
	go func() {
		defer close(l.done)
		for ctx.Err() == nil {
			cmd := exec.CommandContext(ctx, b.c.kubectl, "--kubeconfig", b.c.kubeconfig, "-n", b.c.ns, "port-forward", "--address", "127.0.0.1", ref, port+":8080")
			if err := cmd.Start(); err == nil {
				l.mu.Lock()
				l.cur, l.since = cmd, time.Now()
				l.mu.Unlock()
				_ = cmd.Wait()
			}
			l.mu.Lock()
			l.n++
			l.cur = nil
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *pfLoop) restarts() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

func (l *pfLoop) stop() {
	l.cancel()
	<-l.done
}

// freePort returns a loopback address no one listens on now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), nil
}
