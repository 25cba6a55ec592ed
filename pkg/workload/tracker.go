package workload

import (
	"context"
	gosync "sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/livesync-dev/kubectl-livesync/pkg/sync"
)

// Sink receives the targets a Tracker finds. The sync engine implements it.
type Sink interface {
	AddTarget(t sync.Target)
	RemoveTarget(t sync.Target)
}

// Tracker follows a workload's pods and keeps Sink told which containers run: each of the
// chosen containers that runs in a pod is a target of its own; a new containerID (restart, new
// pod) is a new target with a fresh writable layer; a container that stops, or a pod that
// terminates or goes away, leaves the set. It uses an informer, which relists and rewatches
// across API timeouts and dropped connections.
type Tracker struct {
	Client   kubernetes.Interface
	Workload *Workload
	// Containers names the containers to sync into in every pod, at least one; the caller
	// picks the default one (SyncContainer) when the user named none.
	Containers []string
	Sink       Sink

	mu      gosync.Mutex
	targets map[string]sync.Target // by Target.String(): namespace/pod/container
}

// Run tracks until ctx is done. synced, if not nil, is closed once the first full list of pods
// has been delivered to Sink.
func (tr *Tracker) Run(ctx context.Context, synced chan<- struct{}) {
	tr.targets = map[string]sync.Target{}
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
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { tr.observe(obj, false) },
		UpdateFunc: func(_, obj any) { tr.observe(obj, false) },
		DeleteFunc: func(obj any) { tr.observe(obj, true) },
	})
	go inf.RunWithContext(ctx)
	if synced != nil {
		go func() {
			if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
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
	for _, c := range tr.Containers {
		next, running := TargetOf(pod, c)
		key := next.String()
		cur, known := tr.targets[key]
		switch {
		case deleted || !running:
			if known {
				delete(tr.targets, key)
				tr.Sink.RemoveTarget(cur)
			}
		case !known || cur.ContainerID != next.ContainerID:
			tr.targets[key] = next
			tr.Sink.AddTarget(next)
		}
	}
}

// TargetOf returns the pod's container as a target, and whether it can receive files now: the
// pod is not terminating and the container runs.
func TargetOf(pod *corev1.Pod, container string) (sync.Target, bool) {
	t := sync.Target{Namespace: pod.Namespace, Pod: pod.Name, Container: container}
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
