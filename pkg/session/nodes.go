package session

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// nodeAskTimeout bounds the reads of a pod and its Node when an exec failed: the engine waits
// for its reporter.
const nodeAskTimeout = 5 * time.Second

// nodeWatch names the node of a replica that fails because of it: an exec error that points at
// the node (remote.NodeTrouble), or the pod watch seeing the pod's Ready condition go False on a
// node that is not Ready. The line says so once per outage, whatever the retries' errors say
// (the engine repeats only a changed message, and a dead node's messages change), and again
// only when an unreachable node turns out NotReady; the Recovered line then says the node is
// back. The other targets are untouched: the engine keeps syncing them.
type nodeWatch struct {
	ctx    context.Context
	client kubernetes.Interface
	rep    filesync.Reporter

	mu       sync.Mutex
	told     map[string]workload.NodeTrouble // by Target.String(): what its last line said
	checking map[string]bool                 // by pod: a Node read from the pod watch is under way
	wg       sync.WaitGroup
}

func newNodeWatch(ctx context.Context, c kubernetes.Interface, rep filesync.Reporter) *nodeWatch {
	return &nodeWatch{ctx: ctx, client: c, rep: rep, told: map[string]workload.NodeTrouble{}, checking: map[string]bool{}}
}

// Report implements filesync.Reporter.
func (n *nodeWatch) Report(ev filesync.Event) {
	switch e := ev.(type) {
	case filesync.Error:
		tr, ok, drop := n.explain(e.Target, e.Err)
		if drop {
			return
		}
		if ok {
			e.Err, e.Hint, e.Node, e.Reason = tr.Wrap(e.Err), "", tr.Node, tr.Reason
		}
		ev = e
	case filesync.InitialSync:
		if e.Err == nil {
			n.forget(e.Target)
			break
		}
		tr, ok, drop := n.explain(e.Target, e.Err)
		if drop {
			return
		}
		if ok {
			e.Err, e.Node, e.Reason = tr.Wrap(e.Err), tr.Node, tr.Reason
		}
		ev = e
	case filesync.Recovered:
		e.Node = n.forget(e.Target).Node
		ev = e
	case filesync.TargetRemoved:
		n.forget(e.Target)
	}
	n.rep.Report(ev)
}

// explain asks err's target's node why, when err points at it: ok says tr explains err, drop
// that this outage was told already.
func (n *nodeWatch) explain(t filesync.Target, err error) (tr workload.NodeTrouble, ok, drop bool) {
	cause := remote.NodeTrouble(err)
	if cause == remote.CauseNone || n.client == nil {
		return tr, false, false
	}
	ctx, cancel := context.WithTimeout(n.ctx, nodeAskTimeout)
	defer cancel()
	tr, ok = workload.PodNodeTrouble(ctx, n.client, t, cause)
	if !ok {
		return tr, false, false
	}
	return tr, true, !n.tell(t, tr)
}

// tell records that t's line says tr and says whether it is news: the first trouble of an
// outage, or a node that was unreachable and is now known NotReady.
func (n *nodeWatch) tell(t filesync.Target, tr workload.NodeTrouble) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	last, told := n.told[t.String()]
	if told && (last.Reason == tr.Reason || tr.Reason != workload.ReasonNodeNotReady) {
		return false
	}
	n.told[t.String()] = tr
	return true
}

func (n *nodeWatch) forget(t filesync.Target) workload.NodeTrouble {
	n.mu.Lock()
	defer n.mu.Unlock()
	tr := n.told[t.String()]
	delete(n.told, t.String())
	return tr
}

// ObservePod implements workload.PodObserver: a pod whose Ready condition went False while its
// containers run has its Node read (in the background: observers must not block); a node that
// is not Ready is named on the line of each of the pod's targets.
func (n *nodeWatch) ObservePod(pod *corev1.Pod, containers []string, gone bool) {
	if gone || n.client == nil || !workload.PodNotReadyOnNode(pod) {
		return
	}
	var targets []filesync.Target
	for _, c := range containers {
		if t, running := workload.TargetOf(pod, c); running {
			targets = append(targets, t)
		}
	}
	key := pod.Namespace + "/" + pod.Name
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(targets) == 0 || n.checking[key] {
		return
	}
	n.checking[key] = true
	n.wg.Add(1)
	go func(node string) {
		defer n.wg.Done()
		defer func() { n.mu.Lock(); delete(n.checking, key); n.mu.Unlock() }()
		ctx, cancel := context.WithTimeout(n.ctx, nodeAskTimeout)
		defer cancel()
		// The pod alone says nothing of its node (a failing readiness probe looks the same):
		// only a Node that says NotReady is named.
		tr, ok := workload.CheckNode(ctx, n.client, node, remote.CauseNone)
		if !ok {
			return
		}
		for _, t := range targets {
			if n.ctx.Err() == nil && n.tell(t, tr) {
				n.rep.Report(filesync.Error{Target: t, Err: tr.Wrap(nil), Node: tr.Node, Reason: tr.Reason})
			}
		}
	}(pod.Spec.NodeName)
}

// wait waits for the Node reads under way.
func (n *nodeWatch) wait() { n.wg.Wait() }
