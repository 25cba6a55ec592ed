package workload

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// PodObserver sees every pod event of a Tracker, with the containers chosen in that pod;
// gone says the pod left the workload's list. It is called under the tracker's lock and must
// not block. The port-forward and the log follower implement it.
type PodObserver interface {
	ObservePod(pod *corev1.Pod, containers []string, gone bool)
}

// Sink receives the targets a Tracker finds. The sync engine implements it.
type Sink interface {
	AddTarget(t remote.Target)
	RemoveTarget(t remote.Target)
}

// Tracker follows a workload's pods and keeps Sink told which containers run: each of the
// chosen containers that runs in a pod is a target of its own; a new containerID (restart, new
// pod) is a new target with a fresh writable layer; a container that stops, or a pod that
// terminates or goes away, leaves the set. It uses an informer, which relists and rewatches
// across API timeouts and dropped connections.
type Tracker struct {
	Client   kubernetes.Interface
	Workload *Workload
	// Containers names the containers to sync into in every pod; the caller picks the default
	// one (SyncContainer) when the user named none. Empty means each pod's default container,
	// for -l selecting pods that did not exist when the session started.
	Containers []string
	Sink       Sink
	// Reporter, if not nil, is told why there is nothing to sync into (filesync.Waiting) and about
	// synced containers that keep restarting (filesync.Restarting).
	Reporter filesync.Reporter
	// Clock times restarts; nil means the real clock.
	Clock clock.PassiveClock
	// Pods, if not nil, see each pod event after Sink did.
	Pods []PodObserver

	mu       sync.Mutex
	targets  map[string]remote.Target // by Target.String(): namespace/pod/container
	lastID   map[string]string        // by the same key: the last running containerID seen
	restarts map[string][]time.Time   // by the same key: restarts within RestartWindow
	store    cache.Store
	listed   bool             // the first full list was observed: waits can be judged
	waiting  filesync.Waiting // the last reason reported; zero while there are targets
	ctx      context.Context
}

// RestartWindow is how close together two restarts of a synced container must come to be
// reported as a restart loop.
const RestartWindow = 5 * time.Minute

// Run tracks until ctx is done. synced, if not nil, is closed once the first full list of pods
// has been delivered to Sink.
func (tr *Tracker) Run(ctx context.Context, synced chan<- struct{}) {
	tr.targets, tr.lastID, tr.restarts, tr.ctx = map[string]remote.Target{}, map[string]string{}, map[string][]time.Time{}, ctx
	if tr.Clock == nil {
		tr.Clock = clock.RealClock{}
	}
	w := tr.Workload
	pods := tr.Client.CoreV1().Pods(w.Namespace)
	opts := func(o *metav1.ListOptions) {
		if w.Kind == KindPod {
			o.FieldSelector = "metadata.name=" + w.Name
		} else {
			o.LabelSelector = w.Selector.String()
		}
	}
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			opts(&o)
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			opts(&o)
			return pods.Watch(ctx, o)
		},
	}, tr.Client)
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	tr.store = inf.GetStore()
	reg, _ := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { tr.observe(obj, false) },
		UpdateFunc: func(_, obj any) { tr.observe(obj, false) },
		DeleteFunc: func(obj any) { tr.observe(obj, true) },
	})
	go inf.RunWithContext(ctx)
	go func() {
		// Judge the wait only once every listed pod was seen: the first pods alone may all be
		// Pending while a later one runs.
		if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			tr.listed = true
			tr.judgeWait()
		}
	}()
	if synced != nil {
		go func() {
			// The registration's, not the informer's: it is synced once the handler has
			// returned for every listed pod, so the Sink has every target (a Sink may take a
			// while: sync-back reads each new container's incarnation before passing it on).
			if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
				close(synced)
			}
		}()
	}
	<-ctx.Done()
}

func (tr *Tracker) observe(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	containers := tr.Containers
	if len(containers) == 0 {
		if c := defaultContainer(pod); c != "" {
			containers = []string{c}
		}
	}
	for _, c := range containers {
		next, running := TargetOf(pod, c)
		key := next.String()
		cur, known := tr.targets[key]
		switch {
		case deleted || !running:
			if known {
				delete(tr.targets, key)
				tr.Sink.RemoveTarget(cur)
			}
			if deleted {
				delete(tr.lastID, key)
				delete(tr.restarts, key)
			}
		case !known || cur.ContainerID != next.ContainerID:
			tr.noteRestart(pod, next)
			tr.targets[key] = next
			tr.Sink.AddTarget(next)
		}
	}
	for _, o := range tr.Pods {
		o.ObservePod(pod, containers, deleted)
	}
	tr.judgeWait()
}

// noteRestart counts a new container in a pod where another one of that name ran before, and
// reports a restart loop at the second restart within RestartWindow: each restart starts from
// the image, so the synced files are gone until livesync syncs them again.
func (tr *Tracker) noteRestart(pod *corev1.Pod, t remote.Target) {
	key := t.String()
	prev := tr.lastID[key]
	tr.lastID[key] = t.ContainerID
	if prev == "" || prev == t.ContainerID || tr.Reporter == nil {
		return
	}
	now := tr.Clock.Now()
	recent := slices.DeleteFunc(tr.restarts[key], func(at time.Time) bool { return now.Sub(at) > RestartWindow })
	recent = append(recent, now)
	tr.restarts[key] = recent
	if len(recent) < 2 {
		return
	}
	ev := filesync.Restarting{Target: t, Restarts: len(recent), Window: RestartWindow}
	if st := ContainerStatus(pod, t.Container, false); st != nil && st.LastTerminationState.Terminated != nil {
		code := st.LastTerminationState.Terminated.ExitCode
		ev.ExitCode = &code
	}
	tr.restarts[key] = nil // say it again only after two more
	tr.Reporter.Report(ev)
}

// judgeWait reports why nothing can be synced when there is no target, once per reason.
// Called with mu held.
func (tr *Tracker) judgeWait() {
	if tr.Reporter == nil || !tr.listed {
		return
	}
	if len(tr.targets) > 0 {
		tr.waiting = filesync.Waiting{}
		return
	}
	var pods []*corev1.Pod
	for _, obj := range tr.store.List() {
		if p, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	why, ok := WaitReason(tr.Workload, pods, tr.Containers)
	if !ok {
		if live := slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return p.DeletionTimestamp == nil }); live {
			return // a chosen container runs; its target is on its way
		}
		why = NoPodsReason(tr.ctx, tr.Client, tr.Workload)
	}
	why.Workload = tr.Workload.Ref()
	if why.Reason == tr.waiting.Reason || tr.sameTrouble(why) {
		return
	}
	tr.waiting = why
	tr.Reporter.Report(why)
}

// TargetOf returns the pod's container as a target, and whether it can receive files now: the
// pod is not terminating and the container runs.
func TargetOf(pod *corev1.Pod, container string) (remote.Target, bool) {
	t := remote.Target{Namespace: pod.Namespace, Pod: pod.Name, Container: container}
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return t, false
	}
	st := ContainerStatus(pod, container, false)
	if st == nil || st.State.Running == nil || st.ContainerID == "" {
		return t, false
	}
	t.ContainerID = st.ContainerID
	return t, true
}

// sameTrouble tells a retry from a new reason: between two pulls or two crashes the kubelet
// shows the container as ContainerCreating or exited, which is still the pull or crash last
// reported for that pod.
func (tr *Tracker) sameTrouble(why filesync.Waiting) bool {
	last := tr.waiting
	return why.Reason == WaitNotReady && why.Pod != "" && why.Pod == last.Pod &&
		(last.Reason == WaitImagePull || last.Reason == WaitCrashLoop)
}
