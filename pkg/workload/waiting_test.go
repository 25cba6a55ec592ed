package workload

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
)

// podIn returns a pod "name" of app=web with containers app and sidecar, in phase, whose
// container app has status st.
func podIn(name string, phase corev1.PodPhase, st corev1.ContainerState) *corev1.Pod {
	p := runningPod(name, "c://1")
	p.Spec.Containers = []corev1.Container{{Name: "app"}, {Name: "sidecar"}}
	p.Status.Phase = phase
	p.Status.ContainerStatuses[0].State = st
	if st.Running == nil {
		p.Status.ContainerStatuses[0].ContainerID = ""
	}
	return p
}

func waitingIn(reason, msg string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
}

func TestWaitReason(t *testing.T) {
	w := &Workload{Kind: KindDeployment, Name: "web", Namespace: "ns"}
	unschedulable := podIn("a", corev1.PodPending, corev1.ContainerState{})
	unschedulable.Status.ContainerStatuses = nil
	unschedulable.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}
	crashing := podIn("a", corev1.PodRunning, waitingIn("CrashLoopBackOff", "back-off 10s restarting failed container"))
	crashing.Status.ContainerStatuses[0].RestartCount = 4
	crashing.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 3}
	tests := []struct {
		name       string
		pods       []*corev1.Pod
		containers []string
		wantOK     bool
		reason     string
		message    string
	}{
		{"a running container is no wait", []*corev1.Pod{podIn("a", corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})}, []string{"app"}, false, "", ""},
		{"no pods is for NoPodsReason", nil, []string{"app"}, false, "", ""},
		{"pending with the scheduler's reason", []*corev1.Pod{unschedulable}, []string{"app"}, true,
			WaitUnschedulable, `pod "a": Unschedulable: 0/1 nodes are available: 1 Insufficient cpu.`},
		{"image pull with the kubelet's message", []*corev1.Pod{podIn("a", corev1.PodPending, waitingIn("ErrImagePull", "rpc error: not found\nmore"))}, []string{"app"}, true,
			WaitImagePull, `pod "a": container "app" is in ErrImagePull: rpc error: not found`},
		{"crash loop with exit code and restarts", []*corev1.Pod{crashing}, []string{"app"}, true,
			WaitCrashLoop, `pod "a": container "app" is in CrashLoopBackOff after 4 restarts, last exit code 3`},
		{"not ready yet", []*corev1.Pod{podIn("a", corev1.PodPending, waitingIn("ContainerCreating", ""))}, []string{"app"}, true,
			WaitNotReady, `pod "a": container "app" is not running yet (ContainerCreating)`},
		{"an exited container names its exit code", []*corev1.Pod{podIn("a", corev1.PodRunning, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}})}, []string{"app"}, true,
			WaitNotReady, `pod "a": container "app" is not running: it exited with code 3`},
		{"a missing container lists the ones that exist", []*corev1.Pod{podIn("a", corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})}, []string{"nope"}, true,
			WaitContainerMissing, `pod "a": no container "nope": it has app, sidecar`},
		{"the most telling pod wins", []*corev1.Pod{podIn("a", corev1.PodPending, waitingIn("ContainerCreating", "")), podIn("b", corev1.PodPending, waitingIn("ImagePullBackOff", "Back-off pulling image"))}, []string{"app"}, true,
			WaitImagePull, `pod "b": container "app" is in ImagePullBackOff: Back-off pulling image`},
		{"an ended pod", []*corev1.Pod{podIn("a", corev1.PodSucceeded, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}})}, []string{"app"}, true,
			WaitNotReady, `pod "a": it has ended (Succeeded) and its containers will not run again`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := WaitReason(w, tt.pods, tt.containers)
			if ok != tt.wantOK || got.Reason != tt.reason || got.Message != tt.message {
				t.Errorf("WaitReason = %+v, %v; want {Reason:%s Message:%s}, %v", got, ok, tt.reason, tt.message, tt.wantOK)
			}
		})
	}
}

func TestNoPodsReason(t *testing.T) {
	zero, two := int32(0), int32(2)
	deploy := func(n *int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: appsv1.DeploymentSpec{Replicas: n,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	}
	for _, tt := range []struct {
		name    string
		obj     *appsv1.Deployment
		reason  string
		message string
	}{
		{"scaled to 0 says how to scale", deploy(&zero), WaitNoReplicas, "deployment/web has 0 replicas: scale it up to sync, e.g. kubectl scale deployment/web --replicas=1 -n ns"},
		{"replicas but no pod", deploy(&two), WaitNoPods, `no pod matches the selector app=web in namespace "ns" yet`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, err := FromObject(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			got := NoPodsReason(context.Background(), fake.NewClientset(tt.obj), w)
			if got.Reason != tt.reason || got.Message != tt.message {
				t.Errorf("NoPodsReason = %+v, want %s: %s", got, tt.reason, tt.message)
			}
		})
	}
}

// recordingReporter turns the tracker's reports into lines, in order.
type recordingReporter chan string

func (r recordingReporter) Report(ev filesync.Event) {
	switch e := ev.(type) {
	case filesync.Waiting:
		r <- "waiting " + e.Workload + " " + e.Reason
	case filesync.Restarting:
		code := "?"
		if e.ExitCode != nil {
			code = fmt.Sprint(*e.ExitCode)
		}
		r <- fmt.Sprintf("restarting %s %d exit %s", e.Target.Pod, e.Restarts, code)
	}
}

func (r recordingReporter) next(t *testing.T) string {
	t.Helper()
	return receive(t, r, "report")
}

// TestTrackerReportsWaitsOnChange: each reason is reported once, again only when it changes,
// and not while a target exists. Each step's next report proves that no report came between.
func TestTrackerReportsWaitsOnChange(t *testing.T) {
	zero := int32(0)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: appsv1.DeploymentSpec{Replicas: &zero,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	client := fake.NewClientset(d)
	w, err := FromObject(d)
	if err != nil {
		t.Fatal(err)
	}
	sink, rep := recordingSink(make(chan string, 16)), recordingReporter(make(chan string, 16))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&Tracker{Client: client, Workload: w, Containers: []string{"app"}, Sink: sink, Reporter: rep}).Run(ctx, nil)
	if got := rep.next(t); got != "waiting deployment/web NoReplicas" {
		t.Fatalf("first report %q", got)
	}
	pods := client.CoreV1().Pods("ns")
	pull := podIn("a", corev1.PodPending, waitingIn("ErrImagePull", "not found"))
	if _, err := pods.Create(ctx, podIn("a", corev1.PodPending, waitingIn("ContainerCreating", "")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		pod  *corev1.Pod
		want string // the next report
	}{
		{pull, "waiting deployment/web ImagePull"},
		// The kubelet alternates ErrImagePull and ImagePullBackOff: one reason, said once.
		{podIn("a", corev1.PodPending, waitingIn("ImagePullBackOff", "Back-off")), ""},
		// Between two pulls the kubelet shows ContainerCreating again: still the pull.
		{podIn("a", corev1.PodPending, waitingIn("ContainerCreating", "")), ""},
		{pull, ""},
		{podIn("a", corev1.PodPending, waitingIn("CrashLoopBackOff", "")), "waiting deployment/web CrashLoopBackOff"},
	}
	if got := rep.next(t); got != "waiting deployment/web NotReady" {
		t.Fatalf("after the pod was created: %q", got)
	}
	for i, s := range steps {
		if _, err := pods.Update(ctx, s.pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if s.want != "" {
			if got := rep.next(t); got != s.want {
				t.Fatalf("step %d: got %q, want %q", i, got, s.want)
			}
		}
	}
	// Running ends the wait; the same reason after it is said again.
	if _, err := pods.Update(ctx, runningPod("a", "c://1"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := sink.next(t); got != "add a c://1" {
		t.Fatalf("sink got %q", got)
	}
	if _, err := pods.Update(ctx, podIn("a", corev1.PodRunning, waitingIn("CrashLoopBackOff", "")), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := rep.next(t); got != "waiting deployment/web CrashLoopBackOff" {
		t.Fatalf("after the target went: %q", got)
	}
	select {
	case extra := <-rep:
		t.Errorf("unexpected report %q", extra)
	default:
	}
}

// TestTrackerReportsRestartLoop: the second restart of a synced container within
// RestartWindow is reported with the last exit code; restarts further apart are not.
func TestTrackerReportsRestartLoop(t *testing.T) {
	client := fake.NewClientset(runningPod("a", "c://1"))
	w := webDeployment(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	sink, rep := recordingSink(make(chan string, 16)), recordingReporter(make(chan string, 16))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&Tracker{Client: client, Workload: w, Containers: []string{"app"}, Sink: sink, Reporter: rep, Clock: clk}).Run(ctx, nil)
	if got := sink.next(t); got != "add a c://1" {
		t.Fatalf("first event %q", got)
	}
	restart := func(id string, after time.Duration) {
		t.Helper()
		clk.SetTime(clk.Now().Add(after))
		p := runningPod("a", id)
		p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 3}
		if _, err := client.CoreV1().Pods("ns").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := sink.next(t); got != "add a "+id {
			t.Fatalf("sink got %q", got)
		}
	}
	restart("c://2", time.Minute)
	restart("c://3", RestartWindow+time.Minute) // too far apart: no loop
	restart("c://4", time.Minute)
	if got := rep.next(t); got != "restarting a 2 exit 3" {
		t.Fatalf("report %q", got)
	}
	select {
	case extra := <-rep:
		t.Errorf("unexpected report %q", extra)
	default:
	}
}
