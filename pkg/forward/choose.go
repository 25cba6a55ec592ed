package forward

import (
	corev1 "k8s.io/api/core/v1"
)

// Reasons a forward has no pod to send connections to, and why it lost one.
const (
	// WaitNoPod: no pod of the workload runs.
	WaitNoPod = "no-pod"
	// WaitNotReady: pods run, but none is Ready.
	WaitNotReady = "not-ready"
	// WaitSyncing: a Ready pod's initial sync is still running: it serves unsynced code.
	WaitSyncing = "syncing"
	// WaitUnreachable: Ready, synced pods run, but each failed its last dial (or refused the
	// forward's port) and its back-off has not ended.
	WaitUnreachable = "unreachable"

	// LostDeleted, LostTerminating, LostNotReady, LostRestarted: why the serving pod left.
	LostDeleted     = "deleted"
	LostTerminating = "terminating"
	LostNotReady    = "not-ready"
	LostRestarted   = "restarted"
	// LostUnreachable: the pod failed a dial, or refused the forward's port with nothing sent
	// back; another is tried.
	LostUnreachable = WaitUnreachable
)

var reasonText = map[string]string{
	WaitNoPod:       "no running pod",
	WaitNotReady:    "no Ready pod",
	WaitSyncing:     "initial sync running",
	LostDeleted:     "pod deleted",
	LostTerminating: "pod terminating",
	LostRestarted:   "container restarted",
	WaitUnreachable: "no reachable pod",
}

// podInfo is what the tracker last said about a pod.
type podInfo struct {
	pod        *corev1.Pod
	containers []string // the chosen containers in this pod
}

// state is why a pod can or cannot take new connections.
type state int

const (
	gone state = iota
	terminating
	notRunning
	notReady
	unsynced
	eligible
)

// judge says whether p can take new connections: it runs, is Ready, is not terminating, and
// every chosen container of it runs and has finished its initial sync (synced holds the
// containerIDs that have).
func judge(p *podInfo, synced map[string]bool) state {
	if p == nil {
		return gone
	}
	pod := p.pod
	switch {
	case pod.DeletionTimestamp != nil:
		return terminating
	case pod.Status.Phase != corev1.PodRunning:
		return notRunning
	}
	present := 0
	for _, c := range p.containers {
		st := status(pod, c)
		if st == nil {
			continue // -l: this pod has no such container
		}
		present++
		if st.State.Running == nil || st.ContainerID == "" {
			return notRunning
		}
	}
	if present == 0 {
		return notRunning
	}
	if !ready(pod) {
		return notReady
	}
	for _, c := range p.containers {
		if st := status(pod, c); st != nil && !synced[st.ContainerID] {
			return unsynced
		}
	}
	return eligible
}

// choose picks the pod for new connections: current while it stays eligible and reachable
// (connections do not hop between healthy replicas), else the newest such pod, the one a
// rollout just brought. With none it says why: an eligible pod that is unreachable (in the
// back-off of a failure) first, else the most hopeful reason any pod gives.
func choose(pods map[string]*podInfo, synced map[string]bool, current string, unreachable func(pod string) bool) (string, string) {
	if judge(pods[current], synced) == eligible && !unreachable(current) {
		return current, ""
	}
	best, why := "", WaitNoPod
	for name, p := range pods {
		switch judge(p, synced) {
		case eligible:
			if unreachable(name) {
				why = WaitUnreachable
			} else if best == "" || newer(p.pod, pods[best].pod) {
				best = name
			}
		case unsynced:
			if why != WaitUnreachable {
				why = WaitSyncing
			}
		case notReady:
			if why == WaitNoPod {
				why = WaitNotReady
			}
		}
	}
	if best != "" {
		return best, ""
	}
	return "", why
}

// lostWhy says why the pod that served is no longer eligible.
func lostWhy(p *podInfo, synced map[string]bool) string {
	switch judge(p, synced) {
	case gone:
		return LostDeleted
	case terminating:
		return LostTerminating
	case notReady:
		return LostNotReady
	}
	return LostRestarted
}

func newer(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name > b.Name
}

func ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func status(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// podPorts lists the named container ports of pod, the chosen containers' first.
func podPorts(p *podInfo) []NamedPort {
	var out []NamedPort
	add := func(c corev1.Container) {
		for _, cp := range c.Ports {
			if cp.Name != "" && (cp.Protocol == "" || cp.Protocol == corev1.ProtocolTCP) {
				out = append(out, NamedPort{Name: cp.Name, Port: int(cp.ContainerPort)})
			}
		}
	}
	for _, name := range p.containers {
		for _, c := range p.pod.Spec.Containers {
			if c.Name == name {
				add(c)
			}
		}
	}
	for _, c := range p.pod.Spec.Containers {
		add(c)
	}
	return out
}
