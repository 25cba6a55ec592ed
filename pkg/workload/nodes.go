package workload

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// Reasons of a NodeTrouble, stable words for scripts (the error event's "reason").
const (
	// ReasonNodeNotReady: the Node's Ready condition is False or Unknown.
	ReasonNodeNotReady = "node-not-ready"
	// ReasonNodeUnreachable: the pod's node did not answer an exec, and its Node object still
	// says Ready, or may not be read.
	ReasonNodeUnreachable = "node-unreachable"
)

// NodeTrouble is why a pod's node does not serve it now.
type NodeTrouble struct {
	Node    string
	Reason  string // ReasonNodeNotReady or ReasonNodeUnreachable
	Message string // e.g. "node vm-2 not ready (kubelet stopped posting node status)"
}

// Wrap returns err explained by the node: the line names the node and why, and says that the
// other replicas go on.
func (n NodeTrouble) Wrap(err error) error { return &NodeError{Trouble: n, Err: err} }

// NodeError is a target's failure explained by its node (see NodeTrouble.Wrap).
type NodeError struct {
	Trouble NodeTrouble
	Err     error // the exec's own failure; nil when the pod watch saw the node go
}

func (e *NodeError) Error() string {
	return e.Trouble.Message + ": the other replicas keep syncing; it is synced again when its node is back"
}

func (e *NodeError) Unwrap() error { return e.Err }

// PodNodeTrouble reads the node of target t's pod and asks it why the exec failed with cause
// (see remote.NodeTrouble).
func PodNodeTrouble(ctx context.Context, c kubernetes.Interface, t remote.Target, cause remote.NodeCause) (NodeTrouble, bool) {
	pod, err := c.CoreV1().Pods(t.Namespace).Get(ctx, t.Pod, metav1.GetOptions{})
	if err != nil || pod.Spec.NodeName == "" {
		return NodeTrouble{}, false
	}
	return CheckNode(ctx, c, pod.Spec.NodeName, cause)
}

// CheckNode says why node does not serve its pods, from its Ready condition, given what an
// exec saw (cause; remote.CauseNone when the pod watch saw the pod's Ready condition go False).
// Nodes are cluster-scoped, so a user with a namespaced Role may not read them: then only a
// failure that points at the node (a kubelet or runtime that did not answer) names it, with
// what the pod says.
func CheckNode(ctx context.Context, c kubernetes.Interface, node string, cause remote.NodeCause) (NodeTrouble, bool) {
	n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		if cause == remote.CauseKubelet || cause == remote.CauseRuntime {
			return NodeTrouble{Node: node, Reason: ReasonNodeUnreachable, Message: fmt.Sprintf("pod's node %s did not answer", node)}, true
		}
		return NodeTrouble{}, false
	}
	var ready *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			ready = &n.Status.Conditions[i]
		}
	}
	if ready == nil || ready.Status != corev1.ConditionTrue {
		why := "no Ready condition"
		if ready != nil {
			why = sentence(ready.Message)
			if why == "" {
				why = ready.Reason
			}
		}
		return NodeTrouble{Node: node, Reason: ReasonNodeNotReady, Message: fmt.Sprintf("node %s not ready (%s)", node, why)}, true
	}
	switch cause {
	case remote.CauseKubelet:
		return NodeTrouble{Node: node, Reason: ReasonNodeUnreachable, Message: fmt.Sprintf("node %s unreachable (its kubelet did not answer)", node)}, true
	case remote.CauseRuntime:
		return NodeTrouble{Node: node, Reason: ReasonNodeUnreachable, Message: fmt.Sprintf("node %s unreachable (its container runtime did not answer)", node)}, true
	}
	return NodeTrouble{}, false // a Ready node: the container itself is slow
}

// sentence makes a condition's message part of a line: "Kubelet stopped posting node
// status." becomes "kubelet stopped posting node status".
func sentence(s string) string {
	s = strings.TrimSuffix(strings.TrimSpace(strings.SplitN(s, "\n", 2)[0]), ".")
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToLower(r)) + s[n:]
}

// PodNotReadyOnNode says whether the pod's Ready condition is False while it is bound to a node:
// what the node lifecycle controller does to a NotReady node's pods (their containers still
// say running, since nobody there updates them).
func PodNotReadyOnNode(pod *corev1.Pod) bool {
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status != corev1.ConditionTrue
		}
	}
	return false
}
