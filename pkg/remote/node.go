package remote

import "errors"

// NodeCause says what in a failed exec points at the target's node rather than at its
// container: the session then asks the Node object why (see pkg/workload.NodeState).
type NodeCause int

const (
	// CauseNone: nothing points at the node.
	CauseNone NodeCause = iota
	// CauseKubelet: the apiserver could not reach the node's kubelet (a dial or proxy error).
	CauseKubelet
	// CauseRuntime: the kubelet answered, its container runtime did not.
	CauseRuntime
	// CauseTimeout: the exec ran past its deadline: a frozen container or a dead node.
	CauseTimeout
)

// The words of a kubelet the apiserver cannot dial (pkg/util/proxy, the exec upgrade) and of a
// container runtime the kubelet cannot reach (CRI over a unix socket, the kubelet's own
// "container runtime is down").
var (
	kubeletWords = []string{"error dialing backend", "proxy error", ":10250", "no route to host", "connect: connection refused", "i/o timeout"}
	runtimeWords = []string{"container runtime is down", "runtime is not ready", "code = Unavailable", "containerd.sock", "cri-o.sock", "crio.sock"}
)

// NodeTrouble says whether err, an exec's failure (a *SyncError from Classify, or the
// Executor's own), points at the target's node, and how.
func NodeTrouble(err error) NodeCause {
	if err == nil {
		return CauseNone
	}
	var se *SyncError
	if errors.As(err, &se) && se.Kind != nil && !errors.Is(se.Kind, ErrTimeout) && !errors.Is(se.Kind, ErrTargetGone) {
		return CauseNone // a deterministic failure the container itself explains
	}
	msg := err.Error()
	if se != nil && se.Err != nil {
		msg = se.Err.Error()
	}
	switch {
	case containsAny(msg, runtimeWords...):
		return CauseRuntime
	case containsAny(msg, kubeletWords...):
		return CauseKubelet
	case errors.Is(err, ErrTimeout):
		return CauseTimeout
	}
	return CauseNone
}
