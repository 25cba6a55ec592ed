package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// OriginalAnnotation records, per container, the image and pull policy a workload had before
// livesync first changed them, so restore always returns to the true original.
const OriginalAnnotation = "livesync.dev/original"

// Original is the recorded pre-livesync state of one container.
type Original struct {
	Image      string `json:"image"`
	PullPolicy string `json:"imagePullPolicy,omitempty"`
	Init       bool   `json:"init,omitempty"`
}

// Originals maps container names to their recorded original state.
type Originals map[string]Original

// ParseOriginals reads the annotation; a missing annotation is an empty map.
func ParseOriginals(annotations map[string]string) (Originals, error) {
	raw, ok := annotations[OriginalAnnotation]
	if !ok || raw == "" {
		return Originals{}, nil
	}
	o := Originals{}
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		return nil, fmt.Errorf("reading annotation %s: %w: fix or remove it with kubectl annotate", OriginalAnnotation, err)
	}
	return o, nil
}

// Change is a new image and/or pull policy for one container; empty fields stay as they are.
type Change struct {
	Container  Container
	Image      string
	PullPolicy string
}

// Patch is a strategic merge patch of a workload plus what it means, for --dry-run output.
type Patch struct {
	Workload *Workload
	Changes  []Change
	// Restore removes the annotation instead of recording originals.
	Restore bool
	Data    []byte
}

type containerPatch struct {
	Name            string `json:"name"`
	Image           string `json:"image,omitempty"`
	ImagePullPolicy string `json:"imagePullPolicy,omitempty"`
}

// BuildPatch builds a patch that changes only the given containers and records each one's
// original image and policy in the annotation, unless an earlier change already recorded it.
// When restore is set the annotation is removed instead. The patch carries the workload's
// resourceVersion so a concurrent writer makes it fail rather than be overwritten.
func BuildPatch(w *Workload, changes []Change, restore bool) (*Patch, error) {
	var regular, init []containerPatch
	for _, c := range changes {
		cp := containerPatch{Name: c.Container.Name, Image: c.Image, ImagePullPolicy: c.PullPolicy}
		if c.Container.Init {
			init = append(init, cp)
		} else {
			regular = append(regular, cp)
		}
	}
	spec := map[string]any{}
	if len(regular) > 0 {
		spec["containers"] = regular
	}
	if len(init) > 0 {
		spec["initContainers"] = init
	}
	var annotation any
	if !restore {
		orig, err := ParseOriginals(w.Annotations)
		if err != nil {
			return nil, err
		}
		for _, c := range changes {
			if _, ok := orig[c.Container.Name]; !ok {
				orig[c.Container.Name] = Original{Image: c.Container.Image, PullPolicy: c.Container.PullPolicy, Init: c.Container.Init}
			}
		}
		b, err := json.Marshal(orig)
		if err != nil {
			return nil, err
		}
		annotation = string(b)
	}
	meta := map[string]any{
		"resourceVersion": w.ResourceVersion,
		"annotations":     map[string]any{OriginalAnnotation: annotation},
	}
	body := map[string]any{"metadata": meta}
	if w.Kind == KindPod {
		body["spec"] = spec
	} else {
		body["spec"] = map[string]any{"template": map[string]any{"spec": spec}}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return &Patch{Workload: w, Changes: changes, Restore: restore, Data: data}, nil
}

// RestoreChanges returns the changes that put every recorded original back, in a stable order.
// Containers that no longer exist in the template are skipped.
func RestoreChanges(w *Workload, orig Originals) []Change {
	all, _ := w.Containers(nil)
	var out []Change
	for _, c := range all {
		o, ok := orig[c.Name]
		if !ok {
			continue
		}
		out = append(out, Change{Container: c, Image: o.Image, PullPolicy: o.PullPolicy})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Container.Name < out[j].Container.Name })
	return out
}

// Apply sends the patch. With dryRun the API server validates and authorizes it (dryRun=All)
// without persisting anything, so --dry-run also proves the user may make the change.
func Apply(ctx context.Context, client kubernetes.Interface, p *Patch, dryRun bool) error {
	w := p.Workload
	opts := metav1.PatchOptions{FieldManager: "kubectl-livesync"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var err error
	pt := types.StrategicMergePatchType
	switch w.Kind {
	case KindDeployment:
		_, err = client.AppsV1().Deployments(w.Namespace).Patch(ctx, w.Name, pt, p.Data, opts)
	case KindStatefulSet:
		_, err = client.AppsV1().StatefulSets(w.Namespace).Patch(ctx, w.Name, pt, p.Data, opts)
	case KindDaemonSet:
		_, err = client.AppsV1().DaemonSets(w.Namespace).Patch(ctx, w.Name, pt, p.Data, opts)
	case KindReplicaSet:
		_, err = client.AppsV1().ReplicaSets(w.Namespace).Patch(ctx, w.Name, pt, p.Data, opts)
	case KindPod:
		_, err = client.CoreV1().Pods(w.Namespace).Patch(ctx, w.Name, pt, p.Data, opts)
	default:
		return fmt.Errorf("patching %s: unsupported kind", w.Ref())
	}
	if err != nil {
		return explainPatchError(w, err)
	}
	return nil
}

func explainPatchError(w *Workload, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("patching %s: forbidden: you need the \"patch\" verb on %s in namespace %q: %w", w.Ref(), resourceName(w.Kind), w.Namespace, err)
	case apierrors.IsConflict(err):
		return fmt.Errorf("patching %s: it changed while livesync was reading it; run the command again", w.Ref())
	case apierrors.IsNotFound(err):
		return fmt.Errorf("patching %s: it no longer exists", w.Ref())
	case apierrors.IsInvalid(err):
		return fmt.Errorf("patching %s: the API server rejected the change: %w", w.Ref(), err)
	}
	return fmt.Errorf("patching %s: %w", w.Ref(), err)
}

func resourceName(kind string) string {
	switch kind {
	case KindPod:
		return "pods"
	case KindDeployment, KindStatefulSet, KindDaemonSet, KindReplicaSet:
		return map[string]string{KindDeployment: "deployments", KindStatefulSet: "statefulsets", KindDaemonSet: "daemonsets", KindReplicaSet: "replicasets"}[kind] + ".apps"
	}
	return kind
}

// CanRollOut reports why a template change on this workload would not replace its pods, or nil.
func (w *Workload) CanRollOut() error {
	if w.Kind == KindReplicaSet {
		return fmt.Errorf("%s: a ReplicaSet does not replace its pods when its template changes; run this on the Deployment that owns it", w.Ref())
	}
	return nil
}
