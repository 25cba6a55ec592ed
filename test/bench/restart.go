//go:build bench

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/livesync-dev/kubectl-livesync/pkg/image/registrytest"
	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// restartServer is a static HTTP server that answers its version on :8080; -check exits 0 (the
// launcher runs it only once all of it arrived).
const restartServer = `package main

import (
	"fmt"
	"net/http"
	"os"
)

var version = "dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-check" {
		return
	}
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, version) })
	_ = http.ListenAndServe(":8080", nil)
}
`

// restartLauncher waits until the synced server runs, then becomes it.
const restartLauncher = `until /app/server -check 2>/dev/null; do sleep 0.2; done; exec /app/server`

// reloadCounter counts the HUPs it handled in /tmp/reloaded, replaced by a rename. $$ is the
// kubelet's escape of $.
const reloadCounter = `n=0; trap 'n=$$((n+1)); echo $$n >/tmp/r.tmp; mv /tmp/r.tmp /tmp/reloaded' HUP; while :; do sleep 1 & wait $$!; done`

// measureRestart is the target table of issue 26: a rebuilt Go server binary saved with
// --restart process until the new version answers, against the same binary appended to the
// image, pushed and pinned by refresh (a rollout), and against the transfer alone (a save of a
// file of its size); and signal:HUP to a process that handles it until it reloaded, against
// the exec floor. Every round runs each measurement once, in an order that rotates.
func (b *bench) measureRestart(ctx context.Context) error {
	src := filepath.Join(b.tmp, "restart-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module server\n\ngo 1.21\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(restartServer), 0o644); err != nil {
		return err
	}
	rounds := max(b.reps, 5)
	bins := make([][]byte, rounds+1)
	for i := range bins {
		var err error
		if bins[i], err = buildServer(ctx, src, fmt.Sprintf("v%d", i)); err != nil {
			return err
		}
	}
	b.logf("server binary: %.1f MiB", mib(int64(len(bins[0]))))

	// The baseline: the binary in the image, pinned by refresh.
	repo := b.c.registry + "/livesync-bench-restart"
	if _, err := registrytest.AppendFile(ctx, b.c.image, repo+":dev", "/app/server", bins[0]); err != nil {
		return err
	}
	if err := b.c.deployCommand(ctx, "rb", repo+":dev", []string{"/app/server"}); err != nil {
		return err
	}
	if err := b.c.deployCommand(ctx, "rs", b.c.image, []string{"/bin/sh", "-c", restartLauncher}); err != nil {
		return err
	}
	if err := b.c.deployCommand(ctx, "rsig", b.c.image, []string{"/bin/sh", "-c", reloadCounter}); err != nil {
		return err
	}
	if _, err := b.c.targets(ctx, "rb", 1); err != nil {
		return err
	}

	// --restart process: the supervisor rolls out, the initial sync brings v0 and restarts.
	local := filepath.Join(b.tmp, "restart")
	if err := os.MkdirAll(local, 0o755); err != nil {
		return err
	}
	staging := filepath.Join(b.tmp, "restart-staging")
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return err
	}
	saveAtomic := func(rel string, data []byte) error {
		tmp := filepath.Join(staging, rel)
		if err := os.WriteFile(tmp, data, 0o755); err != nil {
			return err
		}
		return os.Rename(tmp, filepath.Join(local, rel))
	}
	if err := saveAtomic("server", bins[0]); err != nil {
		return err
	}
	s := b.newSession().Args("deploy/rs", "--restart", "process", "--timeout", "3m").Map(local, "/app").Timeout(3 * time.Minute).Start()
	defer s.Stop()
	s.WaitCount("restarted", 1)
	ts, err := b.c.targets(ctx, "rs", 1)
	if err != nil {
		return err
	}
	ip, err := b.c.podIP(ctx, ts[0].Pod)
	if err != nil {
		return err
	}
	if _, err := answers(ctx, ip, "v0", time.Now()); err != nil {
		return err
	}
	if err := b.c.uploadProbe(ctx, ts[0], b.probeBin); err != nil {
		return err
	}
	p := b.c.startProbe(ctx, ts[0])
	defer p.close()
	restarts := func() int { return s.Count("restarted") }

	var procs, transfers, rollouts []time.Duration
	cur := "v0" // the version the --restart process server runs
	for i := 1; i <= rounds; i++ {
		v := fmt.Sprintf("v%d", i)
		var got [3]time.Duration
		for k := range 3 {
			switch j := (i + k) % 3; j {
			case 0: // --restart process
				n := restarts()
				start := time.Now()
				if err := saveAtomic("server", bins[i]); err != nil {
					return err
				}
				if got[j], err = answers(ctx, ip, v, start); err != nil {
					return err
				}
				cur = v
				s.WaitCount("restarted", n+1)
			case 1: // the transfer alone
				n := restarts()
				blob := content(uint64(i)*7907, len(bins[i]))
				if err := p.arm([]expect{{path: "/app/blob.bin", data: blob}}); err != nil {
					return err
				}
				start := time.Now()
				if err := saveAtomic("blob.bin", blob); err != nil {
					return err
				}
				at, err := p.arrival(time.Minute)
				if err != nil {
					return err
				}
				got[j] = at.Sub(start)
				// The blob restarts the server too: let it answer again before what follows.
				s.WaitCount("restarted", n+1)
				if _, err := answers(ctx, ip, cur, time.Now()); err != nil {
					return err
				}
			case 2: // the rollout baseline
				start := time.Now()
				if _, err := registrytest.AppendFile(ctx, b.c.image, repo+":dev", "/app/server", bins[i]); err != nil {
					return err
				}
				out, err := exec.CommandContext(ctx, b.c.binary, "--kubeconfig", b.c.kubeconfig, "-n", b.c.ns, "refresh", "deploy/rb", "--timeout", "3m").CombinedOutput()
				if err != nil {
					return fmt.Errorf("refresh: %w: %s", err, out)
				}
				rts, err := b.c.targets(ctx, "rb", 1)
				if err != nil {
					return err
				}
				rip, err := b.c.podIP(ctx, rts[0].Pod)
				if err != nil {
					return err
				}
				if got[j], err = answers(ctx, rip, v, start); err != nil {
					return err
				}
			}
		}
		procs, transfers, rollouts = append(procs, got[0]), append(transfers, got[1]), append(rollouts, got[2])
	}
	b.logf("--restart process ms: %s", fmtDurations(procs))
	b.logf("transfer alone ms: %s", fmtDurations(transfers))
	b.logf("image + refresh rollout ms: %s", fmtDurations(rollouts))
	if rc, err := b.c.restartCount(ctx, ts[0].Pod); err != nil || rc != 0 {
		return fmt.Errorf("the --restart process container restarted %d times (%v): the figures are not of an in-place restart", rc, err)
	}
	s.Stop()
	p50, n := median(procs), fmt.Sprintf(" (n=%d, %.1f MiB)", len(procs), mib(int64(len(bins[0]))))
	b.res.pair("--restart process: save of a rebuilt static Go server → the new version answers, p50"+n, msec(p50), "ms",
		"the same binary appended to the image, pushed, pinned by `refresh` (rollout) → answers, p50", msec(median(rollouts))).
		target("≤ 0.25×", msec(p50) <= 0.25*msec(median(rollouts)))
	b.res.pair("--restart process: save of a rebuilt static Go server → the new version answers, p50"+n, msec(p50), "ms",
		"a save of a file of the binary's size → visible (the transfer alone), p50", msec(median(transfers))).
		target("≤ 1.3×", msec(p50) <= 1.3*msec(median(transfers)))
	return b.measureSignal(ctx)
}

// measureSignal pairs save → reloaded under --restart signal:HUP with the exec floor.
func (b *bench) measureSignal(ctx context.Context) error {
	local := filepath.Join(b.tmp, "signal")
	if err := os.MkdirAll(local, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(local, "conf"), []byte("0\n"), 0o644); err != nil {
		return err
	}
	ts, err := b.c.targets(ctx, "rsig", 1)
	if err != nil {
		return err
	}
	if err := b.c.uploadProbe(ctx, ts[0], b.probeBin); err != nil {
		return err
	}
	s := b.newSession().Args("deploy/rsig", "--restart", "signal:HUP").Map(local, "/app").Start()
	defer s.Stop()
	s.WaitCount("restarted", 1) // after the initial sync
	p := b.c.startProbe(ctx, ts[0])
	defer p.close()
	var reloads, floors []time.Duration
	n := max(b.edits/3, 10)
	for i := range n {
		r, f, err := alternate(i, func() (time.Duration, error) {
			return saveReloaded(s, p, local, i+2)
		}, func() (time.Duration, error) { return b.c.floor(ctx, ts[0]) })
		if err != nil {
			return fmt.Errorf("signal round %d: %w", i, err)
		}
		reloads, floors = append(reloads, r), append(floors, f)
	}
	b.logf("signal:HUP save → reloaded ms: %s", fmtDurations(reloads))
	b.logf("exec floor ms: %s", fmtDurations(floors))
	r50, f50 := median(reloads), median(floors)
	b.res.pair(fmt.Sprintf("--restart signal:HUP: save → a handling process reloaded, p50 (n=%d)", len(reloads)), msec(r50), "ms", "exec floor p50", msec(f50)).
		target("≤ 1.5×", msec(r50) <= 1.5*msec(f50))
	return nil
}

// saveReloaded saves conf (atomically) and times it to the moment the process counted its
// want-th HUP.
func saveReloaded(s *sessiontest.Session, p *probe, local string, want int) (time.Duration, error) {
	if err := p.arm([]expect{{path: "/tmp/reloaded", data: fmt.Appendf(nil, "%d\n", want)}}); err != nil {
		return 0, err
	}
	tmp := filepath.Join(filepath.Dir(local), "conf.tmp")
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d\n", want), 0o644); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := os.Rename(tmp, filepath.Join(local, "conf")); err != nil {
		return 0, err
	}
	at, err := p.arrival(time.Minute)
	if err != nil {
		return 0, err
	}
	s.WaitCount("restarted", want)
	return at.Sub(start), nil
}

// buildServer compiles restartServer at version as a static linux binary and returns it.
func buildServer(ctx context.Context, src, version string) ([]byte, error) {
	out := filepath.Join(src, "server-"+version)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the server: %w: %s", err, b)
	}
	return os.ReadFile(out)
}

// answers polls http://ip:8080/ from this machine until it answers want, and returns the time
// since start.
func answers(ctx context.Context, ip, want string, start time.Time) (time.Duration, error) {
	client := &http.Client{Timeout: 200 * time.Millisecond}
	deadline := time.Now().Add(3 * time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ip+":8080/", nil)
		if err != nil {
			return 0, err
		}
		if resp, err := client.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if last = strings.TrimSpace(string(b)); last == want {
				return time.Since(start), nil
			}
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		time.Sleep(2 * time.Millisecond)
	}
	return 0, fmt.Errorf("the server at %s never answered %s (last %q)", ip, want, last)
}

// deployCommand creates a one-replica Deployment of img running command.
func (c *cluster) deployCommand(ctx context.Context, name, img string, command []string) error {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers:                    []corev1.Container{{Name: "app", Image: img, ImagePullPolicy: corev1.PullIfNotPresent, Command: command}},
			}},
		},
	}
	if _, err := c.client.AppsV1().Deployments(c.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating deployment %q: %w", name, err)
	}
	return nil
}

func (c *cluster) podIP(ctx context.Context, pod string) (string, error) {
	p, err := c.client.CoreV1().Pods(c.ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if p.Status.PodIP == "" {
		return "", fmt.Errorf("pod %s has no IP", pod)
	}
	return p.Status.PodIP, nil
}

func (c *cluster) restartCount(ctx context.Context, pod string) (int32, error) {
	p, err := c.client.CoreV1().Pods(c.ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == "app" {
			return st.RestartCount, nil
		}
	}
	return 0, fmt.Errorf("pod %s has no status for container app", pod)
}
