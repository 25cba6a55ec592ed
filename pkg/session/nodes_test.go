package session

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

var lostTarget = filesync.Target{Namespace: "ns", Pod: "web-2", Container: "app", ContainerID: "containerd://2"}

func nodePod(ready corev1.ConditionStatus) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-2"},
		Spec:       corev1.PodSpec{NodeName: "vm-2", Containers: []corev1.Container{{Name: "app"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", ContainerID: "containerd://2",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
}

func node(ready corev1.ConditionStatus, reason, msg string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vm-2"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: reason, Message: msg}}}}
}

type recorder struct{ evs []filesync.Event }

func (r *recorder) Report(ev filesync.Event) { r.evs = append(r.evs, ev) }

func execErr(msg string) error {
	return remote.Classify(errors.New(msg), lostTarget, "applying changes", "/app", "")
}

// TestNodeDropNamedOncePerOutage: a replica whose node's kubelet is gone fails each retry with
// another dial error; its line names the node and why once, again when the node turns out
// NotReady, and the recovered line says the node is back.
func TestNodeDropNamedOncePerOutage(t *testing.T) {
	c := fake.NewClientset(nodePod(corev1.ConditionTrue), node(corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"))
	rec := &recorder{}
	nw := newNodeWatch(context.Background(), c, rec)

	nw.Report(filesync.Error{Target: lostTarget, Err: execErr("error dialing backend: dial tcp 10.244.1.1:10250: connect: connection refused")})
	nw.Report(filesync.Error{Target: lostTarget, Err: execErr("error dialing backend: dial tcp 10.244.1.1:10250: i/o timeout")})
	if _, err := c.CoreV1().Nodes().Update(context.Background(), node(corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	nw.Report(filesync.Error{Target: lostTarget, Err: execErr("error dialing backend: dial tcp 10.244.1.1:10250: connect: connection refused")})
	nw.Report(filesync.Error{Target: lostTarget, Err: execErr("error dialing backend: dial tcp 10.244.1.1:10250: connect: no route to host")})
	nw.Report(filesync.Recovered{Target: lostTarget, Failures: 4})

	want := []struct{ reason, line string }{
		{workload.ReasonNodeUnreachable, "node vm-2 unreachable (its kubelet did not answer): the other replicas keep syncing; it is synced again when its node is back"},
		{workload.ReasonNodeNotReady, "node vm-2 not ready (kubelet stopped posting node status): the other replicas keep syncing; it is synced again when its node is back"},
	}
	if len(rec.evs) != len(want)+1 {
		t.Fatalf("got %d events, want %d (once per outage and reason): %+v", len(rec.evs), len(want)+1, rec.evs)
	}
	for i, w := range want {
		e, ok := rec.evs[i].(filesync.Error)
		if !ok || e.Err.Error() != w.line || e.Node != "vm-2" || e.Reason != w.reason {
			t.Errorf("event %d = %+v, want node vm-2, reason %s, line %q", i, rec.evs[i], w.reason, w.line)
		}
	}
	if r, ok := rec.evs[2].(filesync.Recovered); !ok || r.Node != "vm-2" {
		t.Errorf("last event = %+v, want Recovered naming node vm-2", rec.evs[2])
	}

	// The next outage is told again.
	nw.Report(filesync.Error{Target: lostTarget, Err: execErr("error dialing backend: dial tcp 10.244.1.1:10250: connect: connection refused")})
	if len(rec.evs) != 4 {
		t.Fatalf("a new outage after recovery: got %d events, want 4", len(rec.evs))
	}
}

// TestNodeReadForbidden: a namespaced Role cannot read nodes; the line names the pod's node
// from what the pod says.
func TestNodeReadForbidden(t *testing.T) {
	c := fake.NewClientset(nodePod(corev1.ConditionTrue))
	c.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "vm-2", errors.New("no"))
	})
	rec := &recorder{}
	nw := newNodeWatch(context.Background(), c, rec)
	nw.Report(filesync.Error{Target: lostTarget, Err: execErr(`rpc error: code = Unavailable desc = dial unix /n2/containerd.sock: connect: connection refused`)})
	nw.Report(filesync.Error{Target: lostTarget, Err: execErr(`command terminated with exit code 2`)})
	if len(rec.evs) != 2 {
		t.Fatalf("got %d events, want 2: %+v", len(rec.evs), rec.evs)
	}
	e := rec.evs[0].(filesync.Error)
	if !strings.HasPrefix(e.Err.Error(), "pod's node vm-2 did not answer: ") || e.Reason != workload.ReasonNodeUnreachable {
		t.Errorf("forbidden node read: %q (%s)", e.Err, e.Reason)
	}
	if e := rec.evs[1].(filesync.Error); e.Node != "" || strings.Contains(e.Err.Error(), "vm-2") {
		t.Errorf("an exit code is the container's, not the node's: %q", e.Err)
	}
}

// TestPodWatchNamesNotReadyNode: the node lifecycle controller marks a NotReady node's pods
// unready while their containers still say running; a failing readiness probe on a Ready node
// looks the same from the pod and is not blamed on the node.
func TestPodWatchNamesNotReadyNode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ready corev1.ConditionStatus
		want  int
	}{{"node not ready", corev1.ConditionUnknown, 1}, {"readiness probe", corev1.ConditionTrue, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(node(tc.ready, "NodeStatusUnknown", "Kubelet stopped posting node status."))
			rec := &recorder{}
			nw := newNodeWatch(context.Background(), c, rec)
			nw.ObservePod(nodePod(corev1.ConditionFalse), []string{"app"}, false)
			nw.wait()
			nw.ObservePod(nodePod(corev1.ConditionFalse), []string{"app"}, false)
			nw.wait()
			if len(rec.evs) != tc.want {
				t.Fatalf("got %d events, want %d: %+v", len(rec.evs), tc.want, rec.evs)
			}
			if tc.want > 0 {
				if e := rec.evs[0].(filesync.Error); e.Node != "vm-2" || e.Reason != workload.ReasonNodeNotReady || e.Target != lostTarget {
					t.Errorf("event = %+v", e)
				}
			}
		})
	}
}

// deadNodeExecutor fails every exec into pod web-2 the way the apiserver does when web-2's
// node's kubelet is gone.
type deadNodeExecutor struct{ filesync.Executor }

func (d deadNodeExecutor) Exec(ctx context.Context, t filesync.Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if t.Pod == "web-2" {
		return errors.New("error dialing backend: dial tcp 10.244.1.1:10250: connect: connection refused")
	}
	return d.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
}

// TestRunNamesLostNode: the replica on a NotReady node is named with its node and why; the
// other one is synced.
func TestRunNamesLostNode(t *testing.T) {
	lost := runningPod("web-2")
	lost.Spec.NodeName = "vm-2"
	f := newFixture(t, runningPod("web-1"), lost, node(corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."))
	f.cfg.Once = true
	f.deps.Executor = deadNodeExecutor{f.deps.Executor}
	if err := Run(context.Background(), f.cfg, f.deps); err == nil {
		t.Fatal("Run converged with web-2's node down")
	}
	if got := readRemote(t, f, "web-1", "index.html"); got != "v1" {
		t.Errorf("web-1: index.html is %q, want v1", got)
	}
	want := "initial-sync ns/web-2/app err=node vm-2 not ready (kubelet stopped posting node status): the other replicas keep syncing; it is synced again when its node is back"
	if got := f.j.waitFor(t, "initial-sync ns/web-2/app err="); got != want {
		t.Errorf("the lost replica's line:\n got %s\nwant %s", got, want)
	}
}
