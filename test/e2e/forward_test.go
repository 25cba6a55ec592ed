//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// webScript is PID 1 of the forward tests' pods: busybox httpd serving /www (where livesync
// syncs) on 8080, and a numbered line every 200ms, so that a lost or repeated log line shows
// as a gap or a repeat in the numbers. TERM (kill 1, or the pod's end) makes it say bye and
// exit 1, as a crash would.
const webScript = `trap 'echo "bye $HOSTNAME"; exit 1' TERM
echo "start $HOSTNAME"
mkdir -p /www
httpd -p 8080 -h /www
i=0
while :; do echo "tick $HOSTNAME $i"; i=$((i+1)); sleep 0.2 & wait $!; done`

// webDeployment runs webScript in deploy/web: Ready unless /tmp/unready exists, its port 8080
// named http.
func webDeployment(t *testing.T, ns string) { webDeploymentNamed(t, ns, "web") }

func webDeploymentNamed(t *testing.T, ns, name string) {
	t.Helper()
	repo := "forward-" + ns
	pushImage(t, repo, "dev", "app")
	deploymentSpec(t, ns, name, image(repo, "dev"), func(s *corev1.PodSpec) {
		c := &s.Containers[0]
		c.Command = []string{"/bin/sh", "-c", webScript}
		c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		c.ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "test ! -f /tmp/unready"}}},
			PeriodSeconds: 1, FailureThreshold: 1,
		}
	})
}

// forwardAddr waits for the forward's listening event and returns its address.
func forwardAddr(s *sessiontest.Session) string {
	ev := s.WaitMatch("forward listening", func(ev sessiontest.Event) bool {
		return ev.Type == "forward" && ev.State == "listening"
	})
	return ev.Forward.Address
}

// get fetches path through addr; "" when there is no answer.
func get(addr, path string) string {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// served waits until the forward answers want for path.
func served(t *testing.T, addr, path, want string) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	waitFor(t, fmt.Sprintf("%s%s to serve %q (last %q)", addr, path, want, last), 2*time.Minute, func() (bool, error) {
		last = get(addr, path)
		return last == want, nil
	})
	return time.Since(start)
}

// after waits for an event printed after the first since events that matches, and returns it.
func after(t *testing.T, s *sessiontest.Session, since int, what string, match func(sessiontest.Event) bool) sessiontest.Event {
	t.Helper()
	var found sessiontest.Event
	waitFor(t, what, 2*time.Minute, func() (bool, error) {
		for _, ev := range s.Events()[since:] {
			if match(ev) {
				found = ev
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// serving waits for the forward to serve a pod other than not, said after the first since
// events, and returns it.
func serving(t *testing.T, s *sessiontest.Session, since int, not string) string {
	t.Helper()
	return after(t, s, since, "forward serving a pod other than "+not, func(ev sessiontest.Event) bool {
		return ev.Type == "forward" && ev.State == "serving" && ev.Pod != not
	}).Pod
}

// logLine waits for a log event of pod with text.
func logLine(s *sessiontest.Session, pod, text string) sessiontest.Event {
	return s.WaitMatch(fmt.Sprintf("log line %q of %s", text, pod), func(ev sessiontest.Event) bool {
		return ev.Type == "log" && ev.Target != nil && ev.Target.Pod == pod && ev.Message == text
	})
}

// logLines waits until pod printed text n times.
func logLines(t *testing.T, s *sessiontest.Session, pod, text string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d log lines %q of %s", n, text, pod), 2*time.Minute, func() (bool, error) {
		c := 0
		for _, ev := range s.Events() {
			if ev.Type == "log" && ev.Target != nil && ev.Target.Pod == pod && ev.Message == text {
				c++
			}
		}
		return c >= n, nil
	})
}

// checkLogNumbers checks that each pod's tick lines came without a gap or a repeat within each
// run of its container (a "start" line begins a new one), and that no line was printed twice
// except a restarted container's.
func checkLogNumbers(t *testing.T, evs []sessiontest.Event) int {
	t.Helper()
	next := map[string]int{}
	n := 0
	for _, ev := range evs {
		if ev.Type != "log" || ev.Target == nil {
			continue
		}
		pod := ev.Target.Pod
		if ev.Target.Container != "app" {
			t.Errorf("log line of container %q", ev.Target.Container)
		}
		switch f := strings.Fields(ev.Message); {
		case len(f) == 2 && f[0] == "start":
			next[pod] = 0
		case len(f) == 3 && f[0] == "tick":
			if f[1] != pod {
				t.Errorf("line %q printed as pod %s's", ev.Message, pod)
			}
			i, _ := strconv.Atoi(f[2])
			if want, ok := next[pod]; ok && i != want {
				t.Errorf("pod %s: tick %d after tick %d: lines lost or repeated", pod, i, want-1)
			}
			next[pod] = i + 1
			n++
		}
	}
	return n
}

// TestForwardFollowsTheWorkload: one session with --forward 0:http and --logs. A save is
// served through the forward; after a rollout restart, a forced pod delete and kill 1 in the
// container, the forward serves the save from the live, synced pod within seconds and the new
// pod's (or container's) lines appear from their first, named by their pod; while the pod is not
// Ready, connections wait and nothing is dialled; at Ctrl-C the port is free.
func TestForwardFollowsTheWorkload(t *testing.T) {
	ns := namespace(t)
	webDeployment(t, ns)
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")
	s := newSession(t, ns).Args("deploy/web", "--forward", "0:http", "--logs").Map(local, "/www").Timeout(3 * time.Minute).Start()
	defer s.Stop()
	addr := forwardAddr(s)
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("forward listens on %q, want 127.0.0.1 and a picked port", addr)
	}
	s.WaitSynced()
	p1 := serving(t, s, 0, "")
	served(t, addr, "/index.html", "v1")
	s.Edit("index.html", "v2")
	served(t, addr, "/index.html", "v2")
	// The pod ran before the session: its last lines, then the new ones.
	s.WaitMatch("a tick line of "+p1, func(ev sessiontest.Event) bool {
		return ev.Type == "log" && ev.Target != nil && ev.Target.Pod == p1 && strings.HasPrefix(ev.Message, "tick "+p1)
	})

	// kubectl rollout restart: a new pod; the old one's end is in the logs once.
	mark := len(s.Events())
	r := run(t, e.kubectl, "--kubeconfig", e.kubeconfig, "-n", ns, "rollout", "restart", "deploy/web")
	if r.code != 0 {
		t.Fatalf("rollout restart: %s", r)
	}
	p2 := serving(t, s, mark, p1)
	took := served(t, addr, "/index.html", "v2")
	t.Logf("rollout restart: %s serves the save %s after the forward switched", p2, took.Round(time.Millisecond))
	logLine(s, p2, "start "+p2)
	logLine(s, p1, "bye "+p1)

	// A forced delete.
	zero := int64(0)
	mark = len(s.Events())
	if err := e.client.CoreV1().Pods(ns).Delete(context.Background(), p2, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	p3 := serving(t, s, mark, p2)
	served(t, addr, "/index.html", "v2")
	logLine(s, p3, "start "+p3)

	// kill 1: the container restarts in the same pod, without the synced file until the
	// initial sync put it back; the forward waits for that sync.
	mark = len(s.Events())
	// The exec may end with its container (137: killed with it, as containerd 2 does when
	// the container's init exits first); the events below say whether the kill landed.
	if r := kexec(t, ns, p3, "kill", "1"); r.code != 0 && r.code != 137 {
		t.Fatalf("kill 1: %s", r)
	}
	after(t, s, mark, "forward lost "+p3, func(ev sessiontest.Event) bool {
		return ev.Type == "forward" && ev.State == "lost" && ev.Pod == p3
	})
	after(t, s, mark, "forward serving "+p3+" again", func(ev sessiontest.Event) bool {
		return ev.Type == "forward" && ev.State == "serving" && ev.Pod == p3
	})
	served(t, addr, "/index.html", "v2")
	logLines(t, s, p3, "start "+p3, 2) // the restarted container's, from its first line
	logLine(s, p3, "bye "+p3)

	// Not Ready: connections wait, and nothing is dialled until the pod is Ready again.
	mark = len(s.Events())
	if r := kexec(t, ns, p3, "touch", "/tmp/unready"); r.code != 0 {
		t.Fatalf("touch /tmp/unready: %s", r)
	}
	lost := after(t, s, mark, "forward lost "+p3+": not ready", func(ev sessiontest.Event) bool {
		return ev.Type == "forward" && ev.State == "lost" && ev.Pod == p3 && ev.Reason == "not-ready"
	})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			c := http.Client{Timeout: time.Second}
			if resp, err := c.Get("http://" + addr + "/index.html"); err == nil {
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	mark = len(s.Events())
	if r := kexec(t, ns, p3, "rm", "/tmp/unready"); r.code != 0 {
		t.Fatalf("rm /tmp/unready: %s", r)
	}
	again := after(t, s, mark, "forward serving "+p3+" once Ready", func(ev sessiontest.Event) bool {
		return ev.Type == "forward" && ev.State == "serving" && ev.Pod == p3
	})
	served(t, addr, "/index.html", "v2")
	if d := again.Dials - lost.Dials; d != 0 {
		t.Errorf("%d dials while the pod was not Ready and 20 connections waited, want none", d)
	}
	for _, ev := range s.Events() {
		if ev.Type == "forward" && ev.State == "error" {
			t.Errorf("forward error: %s", ev.Error)
		}
	}

	s.Stop()
	if ticks := checkLogNumbers(t, s.Events()); ticks < 20 {
		t.Errorf("only %d tick lines", ticks)
	}
	// Pods came and went under open streams: nothing from client-go's logs on the terminal.
	if klogLine.MatchString(s.Stderr()) {
		t.Errorf("klog lines on stderr:\n%s", s.Stderr())
	}
	portFree(t, addr)
}

// klogLine matches a klog error or warning line (E1204 18:42:25.123456 ...).
var klogLine = regexp.MustCompile(`(?m)^[EW]\d{4} \d\d:\d\d:\d\d`)

// portFree fails unless addr can be listened on.
func portFree(t *testing.T, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the forward's port is not free after the session: %v", err)
	}
	l.Close()
}

// TestForwardPortFreedAfterSIGKILL: a session killed with SIGKILL while a connection is open
// leaves its port free; a forward on a busy port fails the session in one line, before it
// changes anything.
func TestForwardPortFreedAfterSIGKILL(t *testing.T) {
	ns := namespace(t)
	webDeployment(t, ns)
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")
	s := newSession(t, ns).Args("deploy/web", "--forward", "0:8080").Map(local, "/www").Start()
	addr := forwardAddr(s)
	s.WaitSynced()
	served(t, addr, "/index.html", "v1")
	open, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	s.Kill()
	portFree(t, addr)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	r := livesync(t, "-n", ns, "deploy/web", local+":/www", "--forward", fmt.Sprintf("%d:8080", busy), "--restart", "process")
	want := fmt.Sprintf("--forward %d:8080: listen tcp 127.0.0.1:%d: bind: address already in use: pick another LOCAL port, or 0 for a free one", busy, busy)
	if r.code == 0 || !strings.Contains(r.stderr, want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Fatalf("busy port: %s\nwant one line with %s", r, want)
	}
	if c := getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0].Command; strings.Contains(strings.Join(c, " "), "livesync-supervisor") {
		t.Fatalf("the workload changed before the forward failed: %q", c)
	}
}

// TestLogsWithRestartProcess: with --restart process the supervisor's child is the app, and
// its output is the container's: each save's restart shows the new process's first line.
func TestLogsWithRestartProcess(t *testing.T) {
	ns := namespace(t)
	webDeployment(t, ns)
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")
	s := newSession(t, ns).Args("deploy/web", "--restart", "process", "--logs", "--forward", "0:http").Map(local, "/www").Timeout(3 * time.Minute).Start()
	defer s.Stop()
	addr := forwardAddr(s)
	s.WaitSynced()
	p := onePod(t, ns, "web").Name
	serving(t, s, 0, "")
	served(t, addr, "/index.html", "v1")
	s.Edit("index.html", "v2")
	s.WaitCount("restarted", 2)
	served(t, addr, "/index.html", "v2")
	// The supervised process printed start at least twice: at the first start and after
	// the save's restart; the container did not restart.
	logLines(t, s, p, "start "+p, 2)
	if n := restartCount(t, ns, p); n != 0 {
		t.Errorf("the container restarted %d times", n)
	}
}

// TestForwardLivesyncYAML: two entries of livesync.yaml, each with forward: and logs: true,
// run in one session: each forward listens on its own port and serves its own workload's synced
// pod; each log line is named by its entry and pod.
func TestForwardLivesyncYAML(t *testing.T) {
	ns := namespace(t)
	webDeploymentNamed(t, ns, "api")
	webDeploymentNamed(t, ns, "web")
	checkout := t.TempDir()
	write(t, filepath.Join(checkout, "api", "index.html"), "api v1")
	write(t, filepath.Join(checkout, "web", "index.html"), "web v1")
	write(t, filepath.Join(checkout, "livesync.yaml"), `apiVersion: livesync.dev/v1alpha1
kind: LiveSync
syncs:
- name: api
  workload: deploy/api
  mappings: [./api:/www]
  forward: ["0:http"]
  logs: true
- name: web
  workload: deploy/web
  mappings: [./web:/www]
  forward: ["127.0.0.1:0:8080"]
  logs: true
`)
	s := newSession(t, ns).Dir(checkout).Timeout(3 * time.Minute).Start()
	defer s.Stop()
	addrs := map[string]string{}
	for _, entry := range []string{"api", "web"} {
		ev := s.WaitMatch("entry "+entry+"'s forward listening", func(ev sessiontest.Event) bool {
			return ev.Type == "forward" && ev.State == "listening" && ev.Entry == entry
		})
		addrs[entry] = ev.Forward.Address
		pod := s.WaitMatch("entry "+entry+"'s forward serving", func(ev sessiontest.Event) bool {
			return ev.Type == "forward" && ev.State == "serving" && ev.Entry == entry
		}).Pod
		if !strings.HasPrefix(pod, entry+"-") {
			t.Errorf("entry %s forwards to pod %s", entry, pod)
		}
		served(t, addrs[entry], "/index.html", entry+" v1")
		s.WaitMatch("entry "+entry+"'s log lines", func(ev sessiontest.Event) bool {
			return ev.Type == "log" && ev.Entry == entry && ev.Target != nil && ev.Target.Pod == pod && strings.HasPrefix(ev.Message, "tick "+pod)
		})
	}
	if addrs["api"] == addrs["web"] {
		t.Fatalf("both entries listen on %s", addrs["api"])
	}
	write(t, filepath.Join(checkout, "api", "index.html"), "api v2")
	served(t, addrs["api"], "/index.html", "api v2")
	s.Stop()
	for _, ev := range s.Events() {
		if ev.Type == "log" && (ev.Target == nil || !strings.HasPrefix(ev.Target.Pod, ev.Entry+"-")) {
			t.Errorf("log line of entry %q from another workload: %+v", ev.Entry, ev.Target)
		}
	}
	for _, a := range addrs {
		portFree(t, a)
	}
}

// TestForwardAndLogsForbidden: as a user whose Role lacks pods/portforward and pods/log, the
// session still syncs, and says once each, in one line, which rule to add.
func TestForwardAndLogsForbidden(t *testing.T) {
	ns := namespace(t)
	webDeployment(t, ns)
	role := documentedRole(t)
	role.Name = "no-forward-no-logs"
	rules := role.Rules[:0]
	for _, r := range role.Rules {
		if !slices.Contains(r.Resources, "pods/portforward") && !slices.Contains(r.Resources, "pods/log") {
			rules = append(rules, r)
		}
	}
	role.Rules = rules
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")
	s := sessiontest.NewSession(t, e.binary).Kubeconfig(roleKubeconfig(t, ns, role)).Namespace(ns).
		Args("deploy/web", "--forward", "0:http", "--logs").Map(local, "/www").Start()
	defer s.Stop()
	addr := forwardAddr(s)
	s.WaitSynced()
	serving(t, s, 0, "")
	for range 5 {
		if got := get(addr, "/index.html"); got != "" {
			t.Fatalf("served %q without pods/portforward", got)
		}
	}
	forbidden := func(ev sessiontest.Event, rule string) bool {
		return ev.Error != "" && strings.Contains(ev.Error, rule)
	}
	const pf, lg = `grant the RBAC verb "create" on "pods/portforward"`, `grant the RBAC verb "get" on "pods/log"`
	s.WaitMatch("the pods/portforward error", func(ev sessiontest.Event) bool { return ev.Type == "forward" && forbidden(ev, pf) })
	s.WaitMatch("the pods/log error", func(ev sessiontest.Event) bool { return ev.Type == "error" && forbidden(ev, lg) })
	s.Drain()
	s.Edit("index.html", "v2")
	s.WaitFor("batch")
	s.Stop()
	counts := map[string]int{}
	for _, ev := range s.Events() {
		for _, rule := range []string{pf, lg} {
			if forbidden(ev, rule) {
				counts[rule]++
				if strings.Contains(ev.Error, "\n") {
					t.Errorf("not one line: %q", ev.Error)
				}
			}
		}
	}
	if counts[pf] != 1 || counts[lg] != 1 {
		t.Errorf("said %d and %d times, want once each: %v", counts[pf], counts[lg], counts)
	}
}
