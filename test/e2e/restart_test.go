//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// launcher is the command of a pod that runs a binary livesync delivers: it waits until the
// sync put all of it there (a file still being written does not run), then runs it.
const launcher = `until /app/server -check 2>/dev/null; do sleep 0.2; done; exec /app/server`

// serverSource is a static HTTP server that answers its version; version "bad" exits 3 at
// once, as a broken build would.
const serverSource = `package main

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
	if version == "bad" {
		fmt.Fprintln(os.Stderr, "bad build")
		os.Exit(3)
	}
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, version) })
	if err := http.ListenAndServe("127.0.0.1:8080", nil); err != nil {
		os.Exit(1)
	}
}
`

// goServer builds the server of version into dir/server, atomically (as a build that renames
// its output into place), from its source in src.
func goServer(t *testing.T, src, dir, version string) {
	t.Helper()
	tmp := filepath.Join(src, "out-"+version)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the server %s: %v\n%s", version, err, out)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "server")); err != nil {
		t.Fatal(err)
	}
}

// serverSrc writes the server's module into a temp dir.
func serverSrc(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	write(t, filepath.Join(src, "go.mod"), "module server\n\ngo 1.21\n")
	write(t, filepath.Join(src, "main.go"), serverSource)
	return src
}

// deploymentSpec creates a Deployment of one replica whose pod spec edit changes, and waits
// until it is available.
func deploymentSpec(t *testing.T, ns, name, img string, edit func(*corev1.PodSpec)) {
	t.Helper()
	spec := podSpec(img, corev1.PullIfNotPresent)
	if edit != nil {
		edit(&spec)
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor(name)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)}, Spec: spec},
		},
	}
	if _, err := e.client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment: %v", err)
	}
	waitDeploymentReady(t, ns, name)
}

// onePod returns the one running pod of app=name once the rollout settled.
func onePod(t *testing.T, ns, name string) corev1.Pod {
	t.Helper()
	settle(t, ns, name)
	pods := runningPods(t, ns, "app="+name)
	if len(pods) != 1 {
		t.Fatalf("%d running pods of %s, want 1", len(pods), name)
	}
	return pods[0]
}

// pid1 returns the command line of the container's PID 1, its arguments joined by spaces.
func pid1(t *testing.T, ns, pod string) string {
	t.Helper()
	r := kexec(t, ns, pod, "cat", "/proc/1/cmdline")
	if r.code != 0 {
		t.Fatalf("reading pid 1 of %s: %s", pod, r)
	}
	return strings.ReplaceAll(r.stdout, "\x00", " ")
}

// answers waits until the server in pod answers want.
func answers(t *testing.T, ns, pod, want string) {
	t.Helper()
	var last string
	waitFor(t, fmt.Sprintf("the server in %s to answer %s", pod, want), 2*time.Minute, func() (bool, error) {
		r := kexec(t, ns, pod, "wget", "-qO-", "http://127.0.0.1:8080/")
		last = strings.TrimSpace(r.stdout + r.stderr)
		return last == want, nil
	})
}

func restartCount(t *testing.T, ns, pod string) int32 {
	t.Helper()
	p, err := e.client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == "app" {
			return st.RestartCount
		}
	}
	t.Fatalf("pod %s has no status for container app", pod)
	return 0
}

func restartEvents(s *sessiontest.Session) []sessiontest.Event {
	var out []sessiontest.Event
	for _, ev := range s.Events() {
		if ev.Type == "restarted" {
			out = append(out, ev)
		}
	}
	return out
}

// TestRestartProcessGoBinary: a static Go server built here is synced as a binary into a pod
// whose command runs it, with --restart process. The supervisor rolls out once; after each of
// five saves the new version answers, the container never restarts and the other synced files
// stay; a bad build that exits 3 is reported at the next save, which starts the good one; Ctrl-C
// leaves the app running, and restore brings back the original command, which the new pod runs.
func TestRestartProcessGoBinary(t *testing.T) {
	ns := namespace(t)
	repo := "restart-" + ns
	pushImage(t, repo, "dev", "app")
	deploymentSpec(t, ns, "web", image(repo, "dev"), func(s *corev1.PodSpec) {
		s.Containers[0].Command = []string{"/bin/sh", "-c", launcher}
	})
	src, local := serverSrc(t), t.TempDir()
	write(t, filepath.Join(local, "static", "index.html"), "static")
	goServer(t, src, local, "v0")

	s := newSession(t, ns).Args("deploy/web", "--restart", "process", "--timeout", "3m").Map(local, "/app").Timeout(3 * time.Minute).Start()
	defer s.Stop()
	s.WaitSynced()
	if c := getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0].Command; !slices.Contains(c, "livesync-supervisor") || c[len(c)-1] != launcher {
		t.Fatalf("template command after --restart process: %q", c)
	}
	pod := onePod(t, ns, "web").Name
	s.WaitCount("restarted", 1)
	answers(t, ns, pod, "v0")
	if cmd := pid1(t, ns, pod); !strings.Contains(cmd, "livesync-supervisor") {
		t.Fatalf("pid 1 is not the supervisor: %s", cmd)
	}

	for i := 1; i <= 5; i++ {
		v := fmt.Sprintf("v%d", i)
		goServer(t, src, local, v)
		answers(t, ns, pod, v)
	}
	goServer(t, src, local, "bad")
	n := len(restartEvents(s))
	s.WaitCount("restarted", n+1)
	goServer(t, src, local, "v6")
	answers(t, ns, pod, "v6")
	evs := restartEvents(s)
	crashed := false
	for _, ev := range evs {
		if ev.Error != "" {
			t.Errorf("restart failed: %s", ev.Line)
		}
		if ev.Mode != "process" || ev.ExitCode == nil || ev.Target == nil || ev.Target.Pod != pod {
			t.Errorf("restarted event without mode, exit code or this pod: %s", ev.Line)
		}
		// The bad build's status comes with the next restart: as a crash when the
		// supervisor saw it end before the ask, else as the status the ask found.
		if ev.ExitCode != nil && *ev.ExitCode == 3 {
			crashed = true
		}
	}
	if !crashed {
		t.Errorf("no restarted event reports the bad build's exit status 3:\n%s", s.Dump())
	}
	if rc := restartCount(t, ns, pod); rc != 0 {
		t.Errorf("the container restarted %d times; the supervisor should restart the process only", rc)
	}
	if r := kexec(t, ns, pod, "cat", "/app/static/index.html"); strings.TrimSpace(r.stdout) != "static" {
		t.Errorf("a synced file is gone: %s", r)
	}
	s.Stop()
	answers(t, ns, pod, "v6") // Ctrl-C leaves the app running

	r := mustLivesync(t, "-n", ns, "restore", "deploy/web", "--timeout", "3m")
	if !strings.Contains(r.stdout, `command: livesync's supervisor -> /bin/sh -c`) {
		t.Errorf("restore output:\n%s", r)
	}
	dep := getDeployment(t, ns, "web")
	if c := dep.Spec.Template.Spec.Containers[0].Command; !slices.Equal(c, []string{"/bin/sh", "-c", launcher}) {
		t.Errorf("restored command %q", c)
	}
	if _, ok := dep.Annotations[originalAnnotation]; ok {
		t.Errorf("restore left the record")
	}
	back := onePod(t, ns, "web").Name
	if cmd := pid1(t, ns, back); strings.Contains(cmd, "livesync-supervisor") || !strings.Contains(cmd, launcher) {
		t.Errorf("after restore pid 1 runs %q, want the original command", cmd)
	}
}

// TestRestartProcessImageEntrypoint: a pod that sets no command runs the image's entrypoint
// under the supervisor (read from the registry); --dry-run shows the patch and changes
// nothing; restore removes the command again.
func TestRestartProcessImageEntrypoint(t *testing.T) {
	ns := namespace(t)
	repo := "restart-ep-" + ns
	pushImage(t, repo, "dev", "app")
	deploymentSpec(t, ns, "web", image(repo, "dev"), nil)
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")

	gen := getDeployment(t, ns, "web").Generation
	r := mustLivesync(t, "-n", ns, "deploy/web", local+":/app", "--restart", "process", "--dry-run")
	if !strings.Contains(r.stdout+r.stderr, `the API server accepted the patch`) || !strings.Contains(r.stdout+r.stderr, `livesync-supervisor`) {
		t.Errorf("--dry-run does not show the patch:\n%s", r)
	}
	if getDeployment(t, ns, "web").Generation != gen {
		t.Fatal("--dry-run changed the deployment")
	}

	s := newSession(t, ns).Args("deploy/web", "--restart", "process", "--timeout", "3m").Map(local, "/app").Timeout(3 * time.Minute).Start()
	defer s.Stop()
	s.WaitSynced()
	c := getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0].Command
	if len(c) < 5 || c[3] != "livesync-supervisor" || c[4] != "/bin/sh" {
		t.Fatalf("template command %q: want the supervisor running the image's entrypoint", c)
	}
	pod := onePod(t, ns, "web").Name
	s.WaitCount("restarted", 1)
	s.Edit("index.html", "v2")
	s.WaitCount("restarted", 2)
	for _, ev := range restartEvents(s) {
		if ev.Error != "" || ev.ExitCode == nil || *ev.ExitCode != 0 {
			t.Errorf("restart of the image's sleep loop (exits 0 on TERM): %s", ev.Line)
		}
	}
	if rc := restartCount(t, ns, pod); rc != 0 {
		t.Errorf("the container restarted %d times", rc)
	}
	s.Stop()
	mustLivesync(t, "-n", ns, "restore", "deploy/web", "--timeout", "3m")
	if c := getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0].Command; c != nil {
		t.Errorf("restore left command %q; the pod set none", c)
	}
	if cmd := pid1(t, ns, onePod(t, ns, "web").Name); strings.Contains(cmd, "livesync-supervisor") {
		t.Errorf("after restore pid 1 still runs the supervisor: %s", cmd)
	}
}

// TestRestartProcessNoShell: an image without /bin/sh cannot run the supervisor: one line that
// suggests signal:, a non-zero exit, and the workload unchanged.
func TestRestartProcessNoShell(t *testing.T) {
	ns := namespace(t)
	repo := "restart-nosh-" + ns
	pushImage(t, repo, "dev", "distroless")
	deploymentSpec(t, ns, "web", image(repo, "dev"), nil)
	gen := getDeployment(t, ns, "web").Generation
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")
	r := livesync(t, "-n", ns, "deploy/web", local+":/app", "--restart", "process")
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], "has no /bin/sh") || !strings.Contains(lines[0], "--restart signal:") {
		t.Errorf("want one line naming the missing /bin/sh and suggesting signal:, got: %s", r)
	}
	if d := getDeployment(t, ns, "web"); d.Generation != gen || d.Annotations[originalAnnotation] != "" {
		t.Errorf("the deployment changed")
	}
}

// TestRestartSignal: signal:HUP reaches a busybox sh PID 1 that traps it after each sync;
// one that does not trap it gets nothing, and the session says why once.
func TestRestartSignal(t *testing.T) {
	ns := namespace(t)
	repo := "restart-sig-" + ns
	pushImage(t, repo, "dev", "app")
	deploymentSpec(t, ns, "traps", image(repo, "dev"), func(s *corev1.PodSpec) {
		s.Containers[0].Command = []string{"/bin/sh", "-c", `trap 'echo reloaded >>/tmp/reloads' HUP; while :; do sleep 1 & wait $!; done`}
	})
	deploymentSpec(t, ns, "plain", image(repo, "dev"), func(s *corev1.PodSpec) {
		s.Containers[0].Command = []string{"/bin/sh", "-c", `while :; do sleep 1; done`}
	})

	t.Run("a handler reloads", func(t *testing.T) {
		local := t.TempDir()
		write(t, filepath.Join(local, "conf"), "v1")
		pod := onePod(t, ns, "traps").Name
		s := newSession(t, ns).Args("deploy/traps", "--restart", "signal:HUP").Map(local, "/app").Timeout(2 * time.Minute).Start()
		defer s.Stop()
		s.WaitSynced().WaitCount("restarted", 1)
		s.Edit("conf", "v2").WaitCount("restarted", 2)
		s.Stop() // waits for every restart in flight
		evs := restartEvents(s)
		for _, ev := range evs {
			if ev.Error != "" || ev.Mode != "signal:HUP" {
				t.Errorf("restarted: %s", ev.Line)
			}
		}
		// Each HUP sent is one reload, once the shell ran its trap.
		waitFor(t, fmt.Sprintf("%d reloads", len(evs)), time.Minute, func() (bool, error) {
			return strings.Count(kexec(t, ns, pod, "cat", "/tmp/reloads").stdout, "reloaded") == len(evs), nil
		})
	})

	t.Run("no handler: one line, nothing sent", func(t *testing.T) {
		local := t.TempDir()
		write(t, filepath.Join(local, "conf"), "v1")
		s := newSession(t, ns).Args("deploy/plain", "--restart", "signal:HUP").Map(local, "/app").Timeout(2 * time.Minute).Start()
		s.WaitSynced().WaitCount("restarted", 1)
		s.Edit("conf", "v2").WaitCount("batch", 1)
		s.Stop() // waits for every restart in flight
		evs := restartEvents(s)
		want := "pid 1 (sh) does not handle SIGHUP: nothing would happen; try --restart process"
		if len(evs) != 1 || evs[0].Error != want {
			t.Errorf("restarted events, want one saying %q:\n%s", want, s.Dump())
		}
	})
}
