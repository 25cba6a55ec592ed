package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/kubectl/pkg/polymorphichelpers"
)

// ErrRolloutTimeout is wrapped by the error returned when a rollout does not finish in time.
var ErrRolloutTimeout = errors.New("rollout did not finish")

// Waiter waits for rollouts the way `kubectl rollout status` does and explains a stuck one.
type Waiter struct {
	Client  kubernetes.Interface
	Out     io.Writer
	Timeout time.Duration
}

// PodTarget is what a bare Pod's container must reach after its image was patched: a new
// container (the kubelet restarts it on an image change) running Digest when it is known.
type PodTarget struct {
	Container   string
	Init        bool
	OldID       string
	Digest      string
	WantRunning bool
}

// Wait blocks until the workload's rollout is complete. For a bare Pod it waits until every
// target container restarted (and runs the wanted digest when one is given).
func (wt *Waiter) Wait(ctx context.Context, w *Workload, targets []PodTarget) error {
	parent := ctx
	ctx, cancel := watchtools.ContextWithOptionalTimeout(ctx, wt.Timeout)
	defer cancel()
	var err error
	if w.Kind == KindPod {
		err = wt.waitPod(ctx, w, targets)
	} else {
		err = wt.waitRollout(ctx, w)
	}
	if err == nil {
		return nil
	}
	if parent.Err() != nil {
		return fmt.Errorf("stopped waiting for %s: %w", w.Ref(), parent.Err())
	}
	if errors.Is(err, context.DeadlineExceeded) || wait.Interrupted(err) {
		// Diagnose with a fresh context: the waiting one is spent.
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		return fmt.Errorf("%w: %s after %s: %s", ErrRolloutTimeout, w.Ref(), wt.Timeout, wt.diagnose(dctx, w))
	}
	return err
}

func (wt *Waiter) waitRollout(ctx context.Context, w *Workload) error {
	if err := w.patchable(); err != nil {
		return fmt.Errorf("waiting for %s: it is not one object read from the API server", w.Ref())
	}
	viewer, err := polymorphichelpers.StatusViewerFor(w.Info.Mapping.GroupVersionKind.GroupKind())
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", w.Ref(), err)
	}
	if ss, ok := w.Object.(*appsv1.StatefulSet); ok && ss.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		fmt.Fprintf(wt.Out, "%s uses the OnDelete update strategy: its pods change only when you delete them\n", w.Ref())
		return nil
	}
	last := ""
	_, err = watchtools.UntilWithSync(ctx, listWatch(w), w.Object.DeepCopyObject(), nil, func(e watch.Event) (bool, error) {
		switch e.Type {
		case watch.Deleted:
			return false, fmt.Errorf("%s was deleted while waiting for its rollout", w.Ref())
		case watch.Added, watch.Modified:
		default:
			return false, nil
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(e.Object)
		if err != nil {
			return false, err
		}
		msg, done, err := viewer.Status(&unstructured.Unstructured{Object: u}, 0)
		if err != nil {
			return false, fmt.Errorf("waiting for %s: %w", w.Ref(), err)
		}
		if msg != last {
			fmt.Fprint(wt.Out, msg)
			last = msg
		}
		return done, nil
	})
	return err
}

// listWatch lists and watches the one workload object through the REST client and mapping it
// was resolved with, as kubectl rollout status does, whatever its kind.
func listWatch(w *Workload) cache.ListerWatcher {
	c, m := w.Info.Client, w.Info.Mapping
	scoped := m.Scope.Name() == meta.RESTScopeNameNamespace
	sel := fields.OneTermEqualSelector("metadata.name", w.Name).String()
	request := func(o *metav1.ListOptions) *rest.Request {
		o.FieldSelector = sel
		return c.Get().NamespaceIfScoped(w.Namespace, scoped).Resource(m.Resource.Resource).VersionedParams(o, metav1.ParameterCodec)
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return request(&o).Do(ctx).Get()
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.Watch = true
			return request(&o).Watch(ctx)
		},
	}
}

// PodTargets returns what the wait must see after changes are patched into a bare Pod: each
// container whose image changes restarted, on digests[name] when known. It reads the pod's
// container statuses before the patch, so the wait can tell the restarted containers from the
// old ones. Other kinds roll out instead: nil.
func PodTargets(ctx context.Context, client kubernetes.Interface, w *Workload, changes []Change, digests map[string]string) ([]PodTarget, error) {
	if w.Kind != KindPod {
		return nil, nil
	}
	var out []PodTarget
	for _, ch := range changes {
		if ch.Image != "" && ch.Image != ch.Container.Image && !ch.Container.Volume {
			c := ch.Container
			out = append(out, PodTarget{Container: c.Name, Init: c.Init, Digest: digests[c.Name], WantRunning: !c.Init})
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	pod, err := client.CoreV1().Pods(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading pod %q: %w", w.Name, err)
	}
	for i, t := range out {
		if st := ContainerStatus(pod, t.Container, t.Init); st != nil && st.State.Running != nil && pod.DeletionTimestamp == nil {
			out[i].OldID = st.ContainerID
		}
	}
	return out, nil
}

func (wt *Waiter) waitPod(ctx context.Context, w *Workload, targets []PodTarget) error {
	last := ""
	_, err := watchtools.UntilWithSync(ctx, podWatch(wt.Client, w.Namespace, w.Name), &corev1.Pod{}, nil, func(e watch.Event) (bool, error) {
		if e.Type == watch.Deleted {
			return false, fmt.Errorf("pod %q was deleted while waiting for its containers to restart", w.Name)
		}
		pod, ok := e.Object.(*corev1.Pod)
		if !ok {
			return false, nil
		}
		done, pending := 0, ""
		for _, t := range targets {
			st := ContainerStatus(pod, t.Container, t.Init)
			switch {
			case st == nil || st.ContainerID == "" || st.ContainerID == t.OldID:
				pending = fmt.Sprintf("container %q has not restarted yet", t.Container)
			case t.Digest != "" && !strings.HasSuffix(st.ImageID, t.Digest):
				pending = fmt.Sprintf("container %q runs %s, waiting for %s", t.Container, st.ImageID, t.Digest)
			case t.WantRunning && st.State.Running == nil:
				pending = fmt.Sprintf("container %q restarted, waiting for it to run", t.Container)
			default:
				done++
			}
		}
		msg := fmt.Sprintf("Waiting for pod %q: %s...\n", w.Name, pending)
		if done == len(targets) {
			msg = fmt.Sprintf("pod %q restarted %d container(s) on the new image\n", w.Name, done)
		}
		if msg != last {
			fmt.Fprint(wt.Out, msg)
			last = msg
		}
		return done == len(targets), nil
	})
	return err
}

// diagnose says what the workload's pods are waiting on, e.g. ImagePullBackOff with its message.
func (wt *Waiter) diagnose(ctx context.Context, w *Workload) string {
	podList, err := w.Pods(ctx, wt.Client)
	if err != nil {
		return "could not list its pods: " + err.Error()
	}
	reasons := map[string][]string{}
	for i := range podList {
		p := &podList[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, pr := range podProblems(p, nil) {
			reasons[pr.text] = append(reasons[pr.text], p.Name)
		}
	}
	if len(reasons) == 0 {
		return "no pod reports a waiting reason; check `kubectl describe " + w.Ref() + "` and its events"
	}
	var parts []string
	for r, pods := range reasons {
		parts = append(parts, fmt.Sprintf("%s (pod %s)", r, strings.Join(pods, ", ")))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// podWatch lists and watches the one pod ns/name, for watchtools.UntilWithSync.
func podWatch(c kubernetes.Interface, ns, name string) cache.ListerWatcher {
	pods := c.CoreV1().Pods(ns)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return pods.Watch(ctx, o)
		},
	}, c)
}
