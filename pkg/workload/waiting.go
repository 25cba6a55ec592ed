package workload

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/cmd/util/podcmd"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
)

// Wait reasons, the `reason` of a filesync.Waiting event; scripts match on them.
const (
	WaitNoReplicas       = "NoReplicas"       // the workload is scaled to 0
	WaitNoPods           = "NoPods"           // nothing matches the selector (or the pod is gone)
	WaitUnschedulable    = "Unschedulable"    // pods Pending: the scheduler's reason
	WaitImagePull        = "ImagePull"        // ErrImagePull / ImagePullBackOff (the kubelet alternates them)
	WaitCrashLoop        = "CrashLoopBackOff" // the container keeps exiting
	WaitNotReady         = "NotReady"         // created, initializing, or otherwise not running yet
	WaitContainerMissing = "ContainerMissing" // the pods have no container of that name
)

// problem is one thing a pod reports as keeping it from running, worded without the pod's name.
type problem struct {
	reason string // one of the Wait* reasons
	text   string
}

// podProblems lists what keeps a pod's containers from running: the scheduler's reason, and
// each container (init containers included) waiting with a reason other than the routine
// PodInitializing and ContainerCreating. only, when not empty, limits the regular containers
// looked at; init containers always count since they hold up every other one.
func podProblems(p *corev1.Pod, only []string) []problem {
	var out []problem
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			out = append(out, problem{WaitUnschedulable, fmt.Sprintf("%s: %s", c.Reason, c.Message)})
		}
	}
	regular := p.Status.ContainerStatuses
	if len(only) > 0 {
		regular = slices.DeleteFunc(slices.Clone(regular), func(st corev1.ContainerStatus) bool { return !slices.Contains(only, st.Name) })
	}
	for _, st := range append(slices.Clone(p.Status.InitContainerStatuses), regular...) {
		wt := st.State.Waiting
		if wt == nil || wt.Reason == "" || wt.Reason == "PodInitializing" || wt.Reason == "ContainerCreating" {
			continue
		}
		switch wt.Reason {
		case "CrashLoopBackOff":
			text := fmt.Sprintf("container %q is in CrashLoopBackOff after %s", st.Name, restarts(st.RestartCount))
			if t := st.LastTerminationState.Terminated; t != nil {
				text += fmt.Sprintf(", last exit code %d", t.ExitCode)
			}
			out = append(out, problem{WaitCrashLoop, text})
		case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
			out = append(out, problem{WaitImagePull, fmt.Sprintf("container %q is in %s: %s", st.Name, wt.Reason, firstLine(wt.Message))})
		default:
			out = append(out, problem{WaitNotReady, fmt.Sprintf("container %q is in %s: %s", st.Name, wt.Reason, firstLine(wt.Message))})
		}
	}
	return out
}

func restarts(n int32) string {
	if n == 1 {
		return "1 restart"
	}
	return fmt.Sprintf("%d restarts", n)
}

// waitRank orders reasons by how much they tell: a missing container or a failing pull is
// the user's to fix; not ready yet may just be slow.
var waitRank = map[string]int{WaitContainerMissing: 0, WaitImagePull: 1, WaitCrashLoop: 2, WaitUnschedulable: 3, WaitNotReady: 4}

// WaitReason says why none of the pods offers a running container to sync into: the most
// telling problem of the first pod (by name) that has it. containers are the chosen
// containers; empty means each pod's default one, which then always exists. It returns
// ok=false when some chosen container runs, or when there are no live pods (see noPods).
func WaitReason(w *Workload, pods []*corev1.Pod, containers []string) (reason filesync.Waiting, ok bool) {
	pods = slices.DeleteFunc(slices.Clone(pods), func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
	if len(pods) == 0 {
		return filesync.Waiting{}, false
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	best, bestRank := filesync.Waiting{}, len(waitRank)+1
	consider := func(p *corev1.Pod, reason, text string) {
		if r := waitRank[reason]; r < bestRank {
			best, bestRank = filesync.Waiting{Pod: p.Name, Reason: reason, Message: fmt.Sprintf("pod %q: %s", p.Name, text)}, r
		}
	}
	for _, p := range pods {
		for _, c := range containers {
			if !hasContainer(p, c) {
				consider(p, WaitContainerMissing, fmt.Sprintf("no container %q: it has %s", c, strings.Join(podContainerNames(p), ", ")))
				continue
			}
			if _, running := TargetOf(p, c); running {
				return filesync.Waiting{}, false
			}
		}
		if len(containers) == 0 {
			if c := defaultContainer(p); c != "" {
				if _, running := TargetOf(p, c); running {
					return filesync.Waiting{}, false
				}
			}
		}
		for _, pr := range podProblems(p, containers) {
			consider(p, pr.reason, pr.text)
		}
		if bestRank > waitRank[WaitNotReady] {
			consider(p, WaitNotReady, notRunning(p, containers))
		}
	}
	return best, true
}

// notRunning words a pod whose containers exist and report no problem but do not run yet.
func notRunning(p *corev1.Pod, containers []string) string {
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return fmt.Sprintf("it has ended (%s) and its containers will not run again", p.Status.Phase)
	}
	state := "not running yet"
	for _, c := range containers {
		st := ContainerStatus(p, c, false)
		switch {
		case st == nil:
		case st.State.Waiting != nil && st.State.Waiting.Reason != "":
			state = fmt.Sprintf("not running yet (%s)", st.State.Waiting.Reason)
		case st.State.Terminated != nil:
			state = fmt.Sprintf("not running: it exited with code %d", st.State.Terminated.ExitCode)
		}
	}
	if len(containers) == 1 {
		return fmt.Sprintf("container %q is %s", containers[0], state)
	}
	return "its containers are " + state
}

// defaultContainer picks a pod's container the way kubectl exec does, for a session that named
// none and selected pods that did not exist when it started.
func defaultContainer(p *corev1.Pod) string {
	c, err := podcmd.FindOrDefaultContainerByName(p, "", true, io.Discard)
	if err != nil {
		return ""
	}
	return c.Name
}

func hasContainer(p *corev1.Pod, name string) bool {
	return slices.Contains(podContainerNames(p), name)
}

func podContainerNames(p *corev1.Pod) []string {
	var names []string
	for _, c := range p.Spec.Containers {
		names = append(names, c.Name)
	}
	return names
}

// NoPodsReason says why a workload has no live pod: scaled to 0 (and how to scale it up), or
// nothing matches its selector.
func NoPodsReason(ctx context.Context, client kubernetes.Interface, w *Workload) filesync.Waiting {
	if w.Kind == KindPod {
		return filesync.Waiting{Reason: WaitNoPods, Message: fmt.Sprintf("pod %q is gone from namespace %q", w.Name, w.Namespace)}
	}
	if n := wantedReplicas(ctx, client, w); n != nil && *n == 0 {
		return filesync.Waiting{Reason: WaitNoReplicas, Message: fmt.Sprintf("%s has 0 replicas: scale it up to sync, e.g. kubectl scale %s --replicas=1 -n %s", w.Ref(), w.Ref(), w.Namespace)}
	}
	return filesync.Waiting{Reason: WaitNoPods, Message: fmt.Sprintf("no pod matches the selector %s in namespace %q yet", w.Selector, w.Namespace)}
}

// wantedReplicas reads spec.replicas afresh (the user may have scaled since livesync started);
// nil for kinds without one, or when it can't be read.
func wantedReplicas(ctx context.Context, client kubernetes.Interface, w *Workload) *int32 {
	apps := client.AppsV1()
	var (
		n   *int32
		err error
	)
	switch w.Kind {
	case KindDeployment:
		d, e := apps.Deployments(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		err = e
		if err == nil {
			n = d.Spec.Replicas
		}
	case KindStatefulSet:
		s, e := apps.StatefulSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		err = e
		if err == nil {
			n = s.Spec.Replicas
		}
	case KindReplicaSet:
		r, e := apps.ReplicaSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		err = e
		if err == nil {
			n = r.Spec.Replicas
		}
	default:
		return nil
	}
	if err != nil {
		return nil
	}
	if n == nil {
		one := int32(1) // the API server's default
		return &one
	}
	return n
}
