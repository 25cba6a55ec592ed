//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// The waiting tests start a session on a workload that has nothing to sync into and expect it
// to say why: a `waiting` event with -o json, and the same as one line of text output.

// createDeployment creates a Deployment without waiting for it: its pods may never run.
func createDeployment(t *testing.T, ns, name, img string, replicas int32, mutate func(*corev1.PodSpec)) {
	t.Helper()
	spec := podSpec(img, corev1.PullIfNotPresent)
	if mutate != nil {
		mutate(&spec)
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor(name)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)}, Spec: spec},
		},
	}
	if _, err := e.client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment: %v", err)
	}
}

// waitWaiting waits for a `waiting` event of the reason and returns its message.
func waitWaiting(t *testing.T, s *sessiontest.Session, reason string, timeout time.Duration) string {
	t.Helper()
	return s.Timeout(timeout).WaitMatch("waiting event with reason "+reason, func(ev sessiontest.Event) bool {
		return ev.Type == "waiting" && ev.Reason == reason
	}).Message
}

func pollUntil(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return context.DeadlineExceeded
		}
		time.Sleep(250 * time.Millisecond)
	}
	return nil
}

// textSession is a session with text output, whose stderr the test reads while it runs.
type textSession struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *textSession) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *textSession) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func startTextSync(t *testing.T, args ...string) *textSession {
	t.Helper()
	s := &textSession{}
	s.cmd = exec.Command(e.binary, append([]string{"--kubeconfig", kubeconfigFor(args)}, args...)...)
	s.cmd.Stderr = s
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() })
	return s
}

// waitLine waits until the text session printed a line containing want, exactly once.
func (s *textSession) waitLine(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	if err := pollUntil(timeout, func() bool { return strings.Contains(s.stderr(), want) }); err != nil {
		t.Fatalf("text output has no line with %q in %s:\n%s", want, timeout, s.stderr())
	}
}

// TestWaitingZeroReplicasThenScaled: a Deployment scaled to 0 is said to be, with the command
// that scales it; scaled to 1, the wait ends and the new pod gets its initial sync.
func TestWaitingZeroReplicasThenScaled(t *testing.T) {
	ns := namespace(t)
	repo := "wait0-" + ns
	pushImage(t, repo, "dev", "app")
	createDeployment(t, ns, "web", image(repo, "dev"), 0, nil)
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")

	s := newSession(t, ns).Args("deploy/web").Map(local, "/app").Start()
	txt := startTextSync(t, "-n", ns, "deploy/web", local+":/app")
	msg := waitWaiting(t, s, "NoReplicas", time.Minute)
	want := "deployment/web has 0 replicas: scale it up to sync, e.g. kubectl scale deployment/web --replicas=1 -n " + ns
	if msg != want {
		t.Errorf("waiting message %q, want %q", msg, want)
	}
	txt.waitLine(t, "waiting for deployment/web: "+want+"\n", time.Minute)

	d := getDeployment(t, ns, "web")
	one := int32(1)
	d.Spec.Replicas = &one
	if _, err := e.client.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Timeout(2 * time.Minute).WaitSynced()
	waitConverged(t, ns, "app=web", 1, local, "/app", time.Minute)
	if n := strings.Count(txt.stderr(), "has 0 replicas"); n != 1 {
		t.Errorf("the 0-replicas line was printed %d times, want once:\n%s", n, txt.stderr())
	}
	s.Stop()
}

// TestWaitingImagePull: an image that does not exist is named with the kubelet's message.
func TestWaitingImagePull(t *testing.T) {
	ns := namespace(t)
	missing := image("missing-"+ns, "dev")
	createDeployment(t, ns, "web", missing, 1, nil)
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")

	s := newSession(t, ns).Args("deploy/web").Map(local, "/app").Start()
	txt := startTextSync(t, "-n", ns, "deploy/web", local+":/app")
	msg := waitWaiting(t, s, "ImagePull", 2*time.Minute)
	if !strings.Contains(msg, `container "app" is in `) || !strings.Contains(msg, "ImagePull") || !strings.Contains(msg, missing) {
		t.Errorf("waiting message %q: want the container, ErrImagePull or ImagePullBackOff, and the image", msg)
	}
	txt.waitLine(t, `waiting for deployment/web: pod "`, time.Minute)
	txt.waitLine(t, `: container "app" is in `, 2*time.Minute)
	// The kubelet alternates ErrImagePull and ImagePullBackOff, with ContainerCreating between
	// two pulls: one reason, said once. Wait until the pod went back to ErrImagePull after a
	// back-off, so it went through all three.
	backedOff := false
	waitFor(t, "a second pull after ImagePullBackOff", 2*time.Minute, func() (bool, error) {
		for _, p := range runningPods(t, ns, "app=web") {
			for _, st := range p.Status.ContainerStatuses {
				if w := st.State.Waiting; w != nil {
					backedOff = backedOff || w.Reason == "ImagePullBackOff"
					return backedOff && w.Reason == "ErrImagePull", nil
				}
			}
		}
		return false, nil
	})
	s.Stop()
	var after []string
	pull := 0
	for _, ev := range s.Events() {
		if ev.Type != "waiting" {
			continue
		}
		if pull > 0 {
			after = append(after, ev.Reason)
		}
		if ev.Reason == "ImagePull" {
			pull++
		}
	}
	if pull != 1 || len(after) != 0 {
		t.Errorf("%d waiting events with reason ImagePull and %v after it, want 1 and none:\n%s", pull, after, s.Dump())
	}
}

// TestWaitingCrashLoop: a command that exits 3 is a CrashLoopBackOff with its exit code.
func TestWaitingCrashLoop(t *testing.T) {
	ns := namespace(t)
	repo := "waitcrash-" + ns
	pushImage(t, repo, "dev", "app")
	createDeployment(t, ns, "web", image(repo, "dev"), 1, func(p *corev1.PodSpec) {
		p.Containers[0].Command = []string{"sh", "-c", "exit 3"}
	})
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")

	s := newSession(t, ns).Args("deploy/web").Map(local, "/app").Start()
	txt := startTextSync(t, "-n", ns, "deploy/web", local+":/app")
	msg := waitWaiting(t, s, "CrashLoopBackOff", 3*time.Minute)
	if !strings.Contains(msg, `container "app" is in CrashLoopBackOff after `) || !strings.HasSuffix(msg, "last exit code 3") {
		t.Errorf("waiting message %q: want CrashLoopBackOff with restarts and last exit code 3", msg)
	}
	txt.waitLine(t, `container "app" is in CrashLoopBackOff after `, 3*time.Minute)
	s.Stop()
}

// TestWaitingSelectorNoMatch: -l that selects no pod waits for one instead of failing, and
// syncs into the default container of the first pod that comes.
func TestWaitingSelectorNoMatch(t *testing.T) {
	ns := namespace(t)
	repo := "waitsel-" + ns
	pushImage(t, repo, "dev", "app")
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")

	s := newSession(t, ns).Args("-l", "app=later").Map(local, "/app").Start()
	txt := startTextSync(t, "-n", ns, "-l", "app=later", local+":/app")
	want := `no pod matches the selector app=later in namespace "` + ns + `" yet`
	if msg := waitWaiting(t, s, "NoPods", time.Minute); msg != want {
		t.Errorf("waiting message %q, want %q", msg, want)
	}
	txt.waitLine(t, "waiting for pods/app=later: "+want+"\n", time.Minute)
	createDeployment(t, ns, "later", image(repo, "dev"), 1, nil)
	s.Timeout(2 * time.Minute).WaitSynced()
	waitConverged(t, ns, "app=later", 1, local, "/app", time.Minute)
	s.Stop()
}

// TestWaitingMissingContainer: -c naming a container the selected pods lack lists theirs.
func TestWaitingMissingContainer(t *testing.T) {
	ns := namespace(t)
	repo := "waitmiss-" + ns
	pushImage(t, repo, "dev", "app")
	deployment(t, ns, "web", image(repo, "dev"), 2, corev1.PullIfNotPresent)
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")

	s := newSession(t, ns).Args("-l", "app=web", "-c", "nope").Map(local, "/app").Start()
	txt := startTextSync(t, "-n", ns, "-l", "app=web", "-c", "nope", local+":/app")
	msg := waitWaiting(t, s, "ContainerMissing", time.Minute)
	if !strings.HasSuffix(msg, `: no container "nope": it has app`) {
		t.Errorf("waiting message %q, want the missing container and the ones the pod has", msg)
	}
	txt.waitLine(t, `waiting for pods/app=web: pod "web-`, time.Minute)
	if s.Count("target-added") != 0 {
		t.Errorf("a target was added for a container that does not exist:\n%s", s.Dump())
	}
	s.Stop()
}
