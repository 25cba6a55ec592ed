// Package workload turns kubectl's TYPE/NAME and -l grammar into workloads with a pod
// template, their running pods and containers, and patches those templates.
package workload

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/cmd/util/podcmd"
)

// Kinds that carry a pod template (or are a Pod), as accepted on the command line.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
	KindDaemonSet   = "DaemonSet"
	KindReplicaSet  = "ReplicaSet"
	KindPod         = "Pod"
)

// Workload is one object whose pods run the images livesync inspects, pins and syncs into.
type Workload struct {
	Kind      string
	Namespace string
	Name      string
	// Object is the typed object as read from the API server.
	Object runtime.Object
	// Spec is the pod spec of the template (or of the Pod itself).
	Spec *corev1.PodSpec
	// Selector selects the workload's pods.
	Selector labels.Selector
	// Annotations of the workload object (not of the template).
	Annotations map[string]string
	// PodAnnotations are the template's (or the Pod's) annotations, where kubectl's
	// default-container annotation lives.
	PodAnnotations map[string]string
	// ResourceVersion guards patches against concurrent writers.
	ResourceVersion string
	// Info is the object as the resource builder resolved it: its REST client and mapping are
	// how patches and rollout watches reach it, whatever its kind. Nil for a Workload built
	// from an object alone, which can be read but not patched.
	Info *resource.Info
}

// Ref returns the kubectl-style reference, e.g. "deployment/web".
func (w *Workload) Ref() string { return strings.ToLower(w.Kind) + "/" + w.Name }

// Container is one image of a workload's pod template: a container, or an image volume
// (spec.volumes[].image) when Volume is set. Inspect, refresh, pull-policy and restore treat
// both through this one type: an image volume has an image (its reference) and a pull policy
// like a container, and nothing else of one.
type Container struct {
	Name       string
	Init       bool
	Volume     bool
	Image      string
	PullPolicy string
	// Command and Args are the template's; nil when it sets none (the image's
	// entrypoint and cmd run).
	Command, Args []string
}

// volumeKeyPrefix marks an image volume's record in the OriginalAnnotation. Container names are
// DNS labels, so a key with a "/" is never a container's.
const volumeKeyPrefix = "volume/"

// Key names the container's record in the OriginalAnnotation: its name, or "volume/NAME" for an
// image volume (which may share a name with a container).
func (c Container) Key() string {
	if c.Volume {
		return volumeKeyPrefix + c.Name
	}
	return c.Name
}

// Label names the container for messages: `container "app"`, `image volume "data"`.
func (c Container) Label() string {
	if c.Volume {
		return fmt.Sprintf("image volume %q", c.Name)
	}
	return fmt.Sprintf("container %q", c.Name)
}

// LabelOfKey names, for messages, the container or image volume a record key (Key) belongs to.
func LabelOfKey(key string) string {
	if name, ok := strings.CutPrefix(key, volumeKeyPrefix); ok {
		return Container{Name: name, Volume: true}.Label()
	}
	return Container{Name: key}.Label()
}

func errNoPodTemplate(kind string) error {
	return fmt.Errorf("%s has no pod template: use a deployment, statefulset, daemonset, replicaset or pod", kind)
}

// FromObject builds a Workload from a typed object; kinds without a pod template are refused
// with a message naming the supported kinds.
func FromObject(obj runtime.Object) (*Workload, error) {
	var (
		w   Workload
		sel *metav1.LabelSelector
		om  metav1.ObjectMeta
	)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		w.Kind, om, w.Spec, sel = KindDeployment, o.ObjectMeta, &o.Spec.Template.Spec, o.Spec.Selector
		w.PodAnnotations = o.Spec.Template.Annotations
	case *appsv1.StatefulSet:
		w.Kind, om, w.Spec, sel = KindStatefulSet, o.ObjectMeta, &o.Spec.Template.Spec, o.Spec.Selector
		w.PodAnnotations = o.Spec.Template.Annotations
	case *appsv1.DaemonSet:
		w.Kind, om, w.Spec, sel = KindDaemonSet, o.ObjectMeta, &o.Spec.Template.Spec, o.Spec.Selector
		w.PodAnnotations = o.Spec.Template.Annotations
	case *appsv1.ReplicaSet:
		w.Kind, om, w.Spec, sel = KindReplicaSet, o.ObjectMeta, &o.Spec.Template.Spec, o.Spec.Selector
		w.PodAnnotations = o.Spec.Template.Annotations
	case *corev1.Pod:
		w.Kind, om, w.Spec = KindPod, o.ObjectMeta, &o.Spec
		w.PodAnnotations = o.Annotations
	default:
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		if kind == "" {
			// A typed object from the client has no TypeMeta: its Go type
			// names the kind (*v1.Service is a service).
			kind = reflect.Indirect(reflect.ValueOf(obj)).Type().Name()
		}
		return nil, errNoPodTemplate(strings.ToLower(kind))
	}
	w.Namespace, w.Name, w.Annotations, w.ResourceVersion = om.Namespace, om.Name, om.Annotations, om.ResourceVersion
	w.Object = obj
	if w.Kind == KindPod {
		w.Selector = labels.Everything()
		return &w, nil
	}
	if sel == nil {
		return nil, fmt.Errorf("%s has no selector", w.Ref())
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("reading the selector of %s: %w", w.Ref(), err)
	}
	w.Selector = s
	return &w, nil
}

// Containers returns the chosen containers of the template: all of them (init containers
// first, marked) when names is empty, else the named ones. A missing name is an error listing
// the containers that exist.
func (w *Workload) Containers(names []string) ([]Container, error) {
	var all []Container
	for _, c := range w.Spec.InitContainers {
		all = append(all, Container{Name: c.Name, Init: true, Image: c.Image, PullPolicy: string(c.ImagePullPolicy), Command: c.Command, Args: c.Args})
	}
	for _, c := range w.Spec.Containers {
		all = append(all, Container{Name: c.Name, Image: c.Image, PullPolicy: string(c.ImagePullPolicy), Command: c.Command, Args: c.Args})
	}
	return pick(all, names, func(n string) error {
		return fmt.Errorf("container %q not found in %s: it has %s", n, w.Ref(), containerNames(all))
	})
}

// pick returns all when names is empty, else the entries of all named, each name once, in
// the order named; a name that matches none is notFound's error.
func pick(all []Container, names []string, notFound func(name string) error) ([]Container, error) {
	if len(names) == 0 {
		return all, nil
	}
	var out []Container
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		found := false
		for _, c := range all {
			if c.Name == n {
				out = append(out, c)
				found = true
			}
		}
		if !found {
			return nil, notFound(n)
		}
	}
	return out, nil
}

// ImageVolumes returns the template's image volumes (spec.volumes[].image), all of them when
// names is empty, else the named ones; a name that is not an image volume is an error listing
// those that exist.
func (w *Workload) ImageVolumes(names []string) ([]Container, error) {
	var all []Container
	for _, v := range w.Spec.Volumes {
		if v.Image != nil {
			all = append(all, Container{Name: v.Name, Volume: true, Image: v.Image.Reference, PullPolicy: string(v.Image.PullPolicy)})
		}
	}
	return pick(all, names, func(n string) error {
		has := "none"
		if len(all) > 0 {
			has = containerNames(all)
		}
		return fmt.Errorf("image volume %q not found in %s: its image volumes: %s", n, w.Ref(), has)
	})
}

// Images returns the images the selectors choose: with neither containers nor volumes named,
// every container (init ones first) and every image volume; else the named containers and
// the named image volumes.
func (w *Workload) Images(containers, volumes []string) ([]Container, error) {
	var cs, vs []Container
	var err error
	if len(containers) > 0 || len(volumes) == 0 {
		if cs, err = w.Containers(containers); err != nil {
			return nil, err
		}
	}
	if len(volumes) > 0 || len(containers) == 0 {
		if vs, err = w.ImageVolumes(volumes); err != nil {
			return nil, err
		}
	}
	return append(cs, vs...), nil
}

// find returns the template's current state of c (container or image volume), if it still has it.
func (w *Workload) find(c Container) (Container, bool) {
	var all []Container
	if c.Volume {
		all, _ = w.ImageVolumes(nil)
	} else {
		all, _ = w.Containers(nil)
	}
	i := slices.IndexFunc(all, func(x Container) bool { return x.Name == c.Name && x.Init == c.Init })
	if i < 0 {
		return Container{}, false
	}
	return all[i], true
}

func containerNames(cs []Container) string {
	var names []string
	for _, c := range cs {
		n := c.Name
		if c.Init {
			n += " (init)"
		}
		names = append(names, n)
	}
	return strings.Join(names, ", ")
}

// Pods lists the workload's pods, sorted by name. For a Deployment this includes pods of older
// ReplicaSets that are still terminating or running, which is what a user needs to see.
func (w *Workload) Pods(ctx context.Context, client kubernetes.Interface) ([]corev1.Pod, error) {
	opts := metav1.ListOptions{LabelSelector: w.Selector.String()}
	if w.Kind == KindPod {
		opts = metav1.ListOptions{FieldSelector: "metadata.name=" + w.Name}
	}
	list, err := client.CoreV1().Pods(w.Namespace).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing pods of %s: %w", w.Ref(), err)
	}
	pods := list.Items
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods, nil
}

// ContainerStatus returns the status of the named container (init or regular) of a pod.
func ContainerStatus(pod *corev1.Pod, name string, init bool) *corev1.ContainerStatus {
	statuses := pod.Status.ContainerStatuses
	if init {
		statuses = pod.Status.InitContainerStatuses
	}
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

// PullSecrets returns the names of the template's imagePullSecrets.
func (w *Workload) PullSecrets() []string {
	var out []string
	for _, s := range w.Spec.ImagePullSecrets {
		out = append(out, s.Name)
	}
	return out
}

// AllPullSecrets returns the secrets the workload's pods pull with: the template's
// imagePullSecrets, then its service account's (the admission plugin copies those into every
// pod). Reading the service account is optional (docs/rbac.yaml): when it fails, only the
// template's are known.
func (w *Workload) AllPullSecrets(ctx context.Context, client kubernetes.Interface) []string {
	out := w.PullSecrets()
	sa, err := client.CoreV1().ServiceAccounts(w.Namespace).Get(ctx, w.ServiceAccount(), metav1.GetOptions{})
	if err != nil {
		return out
	}
	for _, s := range sa.ImagePullSecrets {
		if !slices.Contains(out, s.Name) {
			out = append(out, s.Name)
		}
	}
	return out
}

// ServiceAccount returns the template's service account name ("default" when unset).
func (w *Workload) ServiceAccount() string {
	if w.Spec.ServiceAccountName != "" {
		return w.Spec.ServiceAccountName
	}
	return "default"
}

// SyncContainer picks the container to sync into the way kubectl exec does: the named one, else
// the one the kubectl.kubernetes.io/default-container annotation names, else the first, telling
// the user on warn ("Defaulted container ...") when there was a choice.
func (w *Workload) SyncContainer(name string, warn io.Writer) (string, error) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Annotations: w.PodAnnotations}, Spec: *w.Spec}
	if name != "" {
		if c, _ := podcmd.FindContainerByName(pod, name); c == nil {
			all, _ := w.Containers(nil)
			return "", fmt.Errorf("container %q not found in %s: it has %s", name, w.Ref(), containerNames(all))
		}
		return name, nil
	}
	c, err := podcmd.FindOrDefaultContainerByName(pod, "", false, warn)
	if err != nil {
		return "", fmt.Errorf("choosing a container of %s: %w", w.Ref(), err)
	}
	return c.Name, nil
}
