package workload

import (
	"context"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

type recordingSink chan string

func (r recordingSink) AddTarget(t remote.Target) {
	r <- "add " + t.Pod + " " + t.ContainerID + containerSuffix(t)
}
func (r recordingSink) RemoveTarget(t remote.Target) { r <- "remove " + t.Pod + containerSuffix(t) }

// containerSuffix names containers other than "app", which most tests use alone.
func containerSuffix(t remote.Target) string {
	if t.Container == "app" {
		return ""
	}
	return " (" + t.Container + ")"
}

func (r recordingSink) next(t *testing.T) string {
	t.Helper()
	return receive(t, r, "target event")
}

// webDeployment is deployment ns/web selecting app=web, as a Workload.
func webDeployment(t *testing.T) *Workload {
	t.Helper()
	w, err := FromObject(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// receive returns the next string on ch, failing the test after 10s.
func receive(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
		return ""
	}
}

func runningPod(name, id string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "web"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", ContainerID: id, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		}}},
	}
}

func TestTrackerFollowsPodsAndContainerIDs(t *testing.T) {
	client := fake.NewClientset(runningPod("a", "c://1"), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "ns", Labels: map[string]string{"app": "web"}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}, runningPod("other", "c://9"))
	other, _ := client.CoreV1().Pods("ns").Get(context.Background(), "other", metav1.GetOptions{})
	other.Labels = map[string]string{"app": "db"}
	_, _ = client.CoreV1().Pods("ns").Update(context.Background(), other, metav1.UpdateOptions{})

	w := webDeployment(t)
	sink := recordingSink(make(chan string, 16))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	synced := make(chan struct{})
	tr := &Tracker{Client: client, Workload: w, Containers: []string{"app"}, Sink: sink}
	go tr.Run(ctx, synced)
	<-synced
	if got := sink.next(t); got != "add a c://1" {
		t.Fatalf("first event %q", got)
	}
	pods := client.CoreV1().Pods("ns")
	steps := []struct {
		do   func() error
		want string
	}{
		{func() error { _, err := pods.Create(ctx, runningPod("b", "c://2"), metav1.CreateOptions{}); return err }, "add b c://2"},
		{func() error { _, err := pods.Update(ctx, runningPod("a", "c://3"), metav1.UpdateOptions{}); return err }, "add a c://3"},
		{func() error {
			p := runningPod("b", "c://2")
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
			_, err := pods.Update(ctx, p, metav1.UpdateOptions{})
			return err
		}, "remove b"},
		{func() error { return pods.Delete(ctx, "a", metav1.DeleteOptions{}) }, "remove a"},
	}
	for i, s := range steps {
		if err := s.do(); err != nil {
			t.Fatal(err)
		}
		if got := sink.next(t); got != s.want {
			t.Fatalf("step %d: got %q, want %q", i, got, s.want)
		}
	}
	select {
	case extra := <-sink:
		t.Errorf("unexpected event %q", extra)
	default:
	}
}

// withSidecar adds a running container "sidecar" with container ID id to pod p.
func withSidecar(p *corev1.Pod, id string) *corev1.Pod {
	p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
		Name: "sidecar", ContainerID: id, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	})
	return p
}

// TestTrackerSeveralContainers: with -c app -c sidecar each container of
// each pod is a target of its own, added, restarted and removed on its own.
func TestTrackerSeveralContainers(t *testing.T) {
	client := fake.NewClientset(withSidecar(runningPod("a", "c://1"), "c://s1"))
	w := webDeployment(t)
	sink := recordingSink(make(chan string, 16))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	synced := make(chan struct{})
	go (&Tracker{Client: client, Workload: w, Containers: []string{"app", "sidecar"}, Sink: sink}).Run(ctx, synced)
	<-synced
	got := map[string]bool{sink.next(t): true, sink.next(t): true}
	if !got["add a c://1"] || !got["add a c://s1 (sidecar)"] {
		t.Fatalf("first events %v, want both containers of pod a added", got)
	}

	pods := client.CoreV1().Pods("ns")
	steps := []struct {
		pod  *corev1.Pod
		want string
	}{
		{withSidecar(runningPod("a", "c://1"), "c://s2"), "add a c://s2 (sidecar)"}, // only the sidecar restarted
		{runningPod("a", "c://1"), "remove a (sidecar)"},                            // the sidecar stopped
	}
	for i, s := range steps {
		if _, err := pods.Update(ctx, s.pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := sink.next(t); got != s.want {
			t.Fatalf("step %d: got %q, want %q", i, got, s.want)
		}
	}
	if err := pods.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := sink.next(t); got != "remove a" {
		t.Fatalf("after the delete: got %q, want %q", got, "remove a")
	}
	select {
	case extra := <-sink:
		t.Errorf("unexpected event %q", extra)
	default:
	}
}
