package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// The fields livesync writes in a container (or image volume), as Original.Owners names them.
const (
	FieldImage      = "image"
	FieldPullPolicy = "imagePullPolicy"
	FieldCommand    = "command"
)

// FieldOwner is one managedFields entry that owns a field: the manager's name and how it
// wrote (Apply for server-side apply, Update for everything else).
type FieldOwner struct {
	Manager    string `json:"manager"`
	Operation  string `json:"operation"`
	APIVersion string `json:"apiVersion,omitempty"`
}

// String reads "helm (Apply)".
func (o FieldOwner) String() string { return fmt.Sprintf("%s (%s)", o.Manager, o.Operation) }

// fieldPath is where a field of c lives in the object, as managedFields spells it.
func (w *Workload) fieldPath(c Container, field string) fieldpath.Path {
	parts := []any{"spec"}
	if w.Kind != KindPod {
		parts = append(parts, "template", "spec")
	}
	switch {
	case c.Volume:
		// An image volume's fields have their own names under spec.volumes[].image.
		name := map[string]string{FieldImage: "reference", FieldPullPolicy: "pullPolicy"}[field]
		parts = append(parts, "volumes", fieldpath.KeyByFields("name", c.Name), "image", name)
	case c.Init:
		parts = append(parts, "initContainers", fieldpath.KeyByFields("name", c.Name), field)
	default:
		parts = append(parts, "containers", fieldpath.KeyByFields("name", c.Name), field)
	}
	return fieldpath.MakePathOrDie(parts...)
}

// managedFields returns the object's managedFields entries (nil when it has none or is not
// an object with metadata).
func managedFields(obj runtime.Object) []metav1.ManagedFieldsEntry {
	if obj == nil {
		return nil
	}
	a, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	return a.GetManagedFields()
}

// fieldSet decodes one entry's set; an entry that does not decode owns nothing livesync can
// tell (the API server never writes one).
func fieldSet(e metav1.ManagedFieldsEntry) (*fieldpath.Set, bool) {
	if e.FieldsV1 == nil {
		return &fieldpath.Set{}, true
	}
	s := &fieldpath.Set{}
	if err := s.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
		return nil, false
	}
	return s, true
}

// FieldOwners returns the managedFields entries of the object itself (not of a subresource)
// that own field of c, in the object's order (newest first). Never nil, so that a record of
// "nobody" is kept apart from no record at all.
func (w *Workload) FieldOwners(c Container, field string) []FieldOwner {
	return ownersOf(managedFields(w.Object), w.fieldPath(c, field))
}

func ownersOf(entries []metav1.ManagedFieldsEntry, p fieldpath.Path) []FieldOwner {
	out := []FieldOwner{}
	for _, e := range entries {
		if e.Subresource != "" {
			continue
		}
		if s, ok := fieldSet(e); ok && s.Has(p) {
			out = append(out, FieldOwner{Manager: e.Manager, Operation: string(e.Operation), APIVersion: e.APIVersion})
		}
	}
	return out
}

// handBack is one field restore put back, with the owners recorded before livesync first
// changed it (none for a record older than that bookkeeping).
type handBack struct {
	container Container
	field     string
	path      fieldpath.Path
	owners    []FieldOwner
}

// handBacks lists the fields of the restored steps whose ownership restore hands back.
func (p *RestorePlan) handBacks() []handBack {
	var out []handBack
	for _, s := range p.Steps {
		if s.Skipped {
			continue
		}
		for _, f := range []string{FieldImage, FieldPullPolicy, FieldCommand} {
			if f == FieldCommand && s.Container.Volume {
				continue
			}
			out = append(out, handBack{container: s.Container, field: f, path: p.Workload.fieldPath(s.Container, f), owners: s.Original.Owners[f]})
		}
	}
	return out
}

// handOwnershipBack returns entries with every field of moves that a livesync entry owns
// taken from it and given to the owners recorded before livesync first wrote it: back into
// their entries, or, for an owner whose entry is gone (its last field was this one), a new
// entry of its name and operation. A field recorded by a release that kept no owners is only
// dropped from livesync's entries, which leaves it to whoever writes it next. Entries left
// empty are removed, as the API server would. It also returns, per owner given a field, the
// fields it got ("helm (Apply)": [container "app" image]), and false when nothing changes.
func handOwnershipBack(entries []metav1.ManagedFieldsEntry, moves []handBack, now metav1.Time) ([]metav1.ManagedFieldsEntry, map[string][][2]string, bool, error) {
	out := slices.Clone(entries)
	sets := make([]*fieldpath.Set, len(out))
	for i, e := range out {
		if s, ok := fieldSet(e); ok {
			sets[i] = s
		}
	}
	given := map[string][][2]string{}
	changed := false
	for _, m := range moves {
		ours := false
		for i, e := range out {
			if e.Manager != FieldManager || e.Subresource != "" || sets[i] == nil || !sets[i].Has(m.path) {
				continue
			}
			sets[i] = sets[i].Difference(fieldpath.NewSet(m.path))
			ours, changed = true, true
		}
		if !ours {
			continue // someone else wrote it since: theirs, with the ownership they got
		}
		for _, o := range m.owners {
			if o.Manager == FieldManager {
				continue
			}
			i := -1
			for j, e := range out {
				if e.Manager == o.Manager && string(e.Operation) == o.Operation && e.Subresource == "" &&
					(o.APIVersion == "" || e.APIVersion == o.APIVersion) && sets[j] != nil {
					i = j
					break
				}
			}
			if i < 0 {
				out = append(out, metav1.ManagedFieldsEntry{Manager: o.Manager, Operation: metav1.ManagedFieldsOperationType(o.Operation),
					APIVersion: o.APIVersion, Time: &now, FieldsType: "FieldsV1"})
				sets = append(sets, &fieldpath.Set{})
				i = len(out) - 1
			}
			if sets[i].Has(m.path) {
				continue
			}
			sets[i].Insert(m.path)
			changed = true
			given[o.String()] = append(given[o.String()], [2]string{m.container.Label(), m.field})
		}
	}
	if !changed {
		return entries, nil, false, nil
	}
	final := make([]metav1.ManagedFieldsEntry, 0, len(out))
	for i, e := range out {
		if sets[i] == nil {
			final = append(final, e) // not decoded: left exactly as it was
			continue
		}
		if sets[i].Empty() {
			continue
		}
		raw, err := sets[i].ToJSON()
		if err != nil {
			return nil, nil, false, fmt.Errorf("encoding the fields of manager %q: %w", e.Manager, err)
		}
		e.FieldsV1 = metav1.NewFieldsV1(string(raw))
		final = append(final, e)
	}
	return final, given, true, nil
}

// managedFieldsPatch is the JSON patch that replaces the object's managedFields, guarded by
// its resourceVersion the way client-go's csaupgrade guards its own: a replace of
// resourceVersion, which a newer object fails with a conflict.
func managedFieldsPatch(entries []metav1.ManagedFieldsEntry, resourceVersion string) ([]byte, error) {
	return json.Marshal([]map[string]any{
		{"op": "replace", "path": "/metadata/managedFields", "value": entries},
		{"op": "replace", "path": "/metadata/resourceVersion", "value": resourceVersion},
	})
}

// describeGiven reads `container "app" image and imagePullPolicy to helm (Apply)` for each
// owner given fields (pairs of container label and field, in the order given).
func describeGiven(given map[string][][2]string) []string {
	var out []string
	for owner, fields := range given {
		var parts []string
		for i := 0; i < len(fields); {
			j, names := i, []string{}
			for ; j < len(fields) && fields[j][0] == fields[i][0]; j++ {
				names = append(names, fields[j][1])
			}
			parts = append(parts, fields[i][0]+" "+strings.Join(names, " and "))
			i = j
		}
		out = append(out, strings.Join(parts, ", ")+" to "+owner)
	}
	slices.Sort(out)
	return out
}

// The tools Owner tells apart, as Owner.Tool names them.
const (
	ToolHelm   = "Helm"
	ToolArgoCD = "Argo CD"
	ToolFlux   = "Flux"
)

// The field managers of those tools, as they write managedFields.
const (
	ManagerHelm           = "helm"
	ManagerArgoCD         = "argocd-controller"
	ManagerKustomizeCtrl  = "kustomize-controller"
	ManagerHelmController = "helm-controller"
)

// Owner is the tool that manages a workload, read from its well-known labels and annotations
// and from the field managers of what livesync would write.
type Owner struct {
	// Tool is ToolHelm, ToolArgoCD or ToolFlux.
	Tool string `json:"tool"`
	// Kind is what of the tool owns it: "release" (Helm), "Application" (Argo CD),
	// "Kustomization" or "HelmRelease" (Flux).
	Kind string `json:"kind"`
	// Name and Namespace name that object, when the marks say ("" when only a manager does).
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// Manager is the tool's field manager.
	Manager string `json:"manager"`
	// Marks are the labels, annotations and managers that told, e.g.
	// "label app.kubernetes.io/managed-by=Helm".
	Marks []string `json:"marks"`
	// Reconciles reports that the tool re-applies what it owns on its own, without anyone
	// running it (Flux always; Argo CD when the Application self-heals, which the workload
	// cannot tell, so it counts).
	Reconciles bool `json:"reconciles"`
	// Effect says what the tool does to a field livesync changes.
	Effect string `json:"effect"`
	// Hold is the command that keeps it from doing that while the pin is wanted, and Resume
	// the one that lets it go on after restore; both "" for Helm, which has nothing to hold.
	Hold   string `json:"hold,omitempty"`
	Resume string `json:"resume,omitempty"`
}

// Describe reads "Flux (kustomize-controller, Kustomization flux-system/apps)".
func (o *Owner) Describe() string {
	obj := o.Kind
	if o.Name != "" {
		obj += " " + o.Name
		if o.Namespace != "" {
			obj = o.Kind + " " + o.Namespace + "/" + o.Name
		}
	}
	return fmt.Sprintf("%s (%s, %s)", o.Tool, o.Manager, obj)
}

// Owner returns who manages the workload, or nil when no mark and no manager of the image or
// pull policy of cs names a tool. Argo CD's marks are read first (a chart it renders also carries Helm's), then
// Flux's (helm-controller's releases carry Helm's too), then Helm's; a workload without marks
// is known by the manager of a field livesync would change.
func (w *Workload) Owner(cs []Container) *Owner {
	var labels, annotations map[string]string
	if a, err := meta.Accessor(w.Object); err == nil {
		labels, annotations = a.GetLabels(), a.GetAnnotations()
	}
	mark := func(kind string, m map[string]string, key string) (string, string, bool) {
		v, ok := m[key]
		return v, fmt.Sprintf("%s %s=%s", kind, key, v), ok && v != ""
	}
	var o *Owner
	if v, m, ok := mark("annotation", annotations, "argocd.argoproj.io/tracking-id"); ok {
		name, _, _ := strings.Cut(v, ":") // app:group/Kind:namespace/name
		o = &Owner{Tool: ToolArgoCD, Kind: "Application", Name: name, Marks: []string{m}}
	} else if v, m, ok := mark("label", labels, "argocd.argoproj.io/instance"); ok {
		o = &Owner{Tool: ToolArgoCD, Kind: "Application", Name: v, Marks: []string{m}}
	} else if v, m, ok := mark("label", labels, "helm.toolkit.fluxcd.io/name"); ok {
		ns, m2, _ := mark("label", labels, "helm.toolkit.fluxcd.io/namespace")
		o = &Owner{Tool: ToolFlux, Kind: "HelmRelease", Name: v, Namespace: ns, Marks: []string{m}}
		if ns != "" {
			o.Marks = append(o.Marks, m2)
		}
	} else if v, m, ok := mark("label", labels, "kustomize.toolkit.fluxcd.io/name"); ok {
		ns, m2, _ := mark("label", labels, "kustomize.toolkit.fluxcd.io/namespace")
		o = &Owner{Tool: ToolFlux, Kind: "Kustomization", Name: v, Namespace: ns, Marks: []string{m}}
		if ns != "" {
			o.Marks = append(o.Marks, m2)
		}
	} else if _, m, ok := mark("label", labels, "app.kubernetes.io/managed-by"); ok && labels["app.kubernetes.io/managed-by"] == "Helm" {
		o = &Owner{Tool: ToolHelm, Kind: "release", Marks: []string{m}}
		if v, m, ok := mark("annotation", annotations, "meta.helm.sh/release-name"); ok {
			o.Name, o.Marks = v, append(o.Marks, m)
		}
		if v, m, ok := mark("annotation", annotations, "meta.helm.sh/release-namespace"); ok {
			o.Namespace, o.Marks = v, append(o.Marks, m)
		}
	}
	// The managers of the fields livesync would write: a reconciler among them is the owner
	// that matters, whatever the marks say.
	for _, c := range cs {
		for _, f := range []string{FieldImage, FieldPullPolicy} {
			for _, fo := range w.FieldOwners(c, f) {
				byManager := ownerOfManager(fo.Manager)
				if byManager == nil {
					continue
				}
				switch {
				case o == nil:
					o = byManager
				case byManager.Tool == o.Tool && byManager.Kind == o.Kind:
				case byManager.Tool != ToolHelm && o.Tool == ToolHelm:
					o = byManager // a reconciler applies the chart (a HelmRelease, an Argo CD app)
				default:
					continue // the marks name the tool that matters
				}
				if m := "manager " + fo.Manager + " of " + c.Label() + " " + f; !slices.Contains(o.Marks, m) {
					o.Marks = append(o.Marks, m)
				}
			}
		}
	}
	if o == nil {
		return nil
	}
	o.explain()
	return o
}

// ownerOfManager is the owner a field manager's name alone tells.
func ownerOfManager(manager string) *Owner {
	switch manager {
	case ManagerKustomizeCtrl:
		return &Owner{Tool: ToolFlux, Kind: "Kustomization"}
	case ManagerHelmController:
		return &Owner{Tool: ToolFlux, Kind: "HelmRelease"}
	case ManagerArgoCD:
		return &Owner{Tool: ToolArgoCD, Kind: "Application"}
	case ManagerHelm:
		return &Owner{Tool: ToolHelm, Kind: "release"}
	}
	return nil
}

// explain fills in the manager, what the tool does to a changed field and how to hold it.
func (o *Owner) explain() {
	name, ns := o.Name, ""
	if name == "" {
		name = "NAME"
	}
	if o.Namespace != "" {
		ns = " -n " + o.Namespace
	}
	switch {
	case o.Tool == ToolFlux && o.Kind == "Kustomization":
		o.Manager, o.Reconciles = ManagerKustomizeCtrl, true
		o.Effect = "re-applies this field: the pin lasts until its next reconcile"
		o.Hold, o.Resume = "flux suspend kustomization "+name+ns, "flux resume kustomization "+name+ns
	case o.Tool == ToolFlux:
		o.Manager, o.Reconciles = ManagerHelmController, true
		o.Effect = "re-applies this field at its next upgrade, and at every reconcile when its drift detection is on"
		o.Hold, o.Resume = "flux suspend helmrelease "+name+ns, "flux resume helmrelease "+name+ns
	case o.Tool == ToolArgoCD:
		o.Manager, o.Reconciles = ManagerArgoCD, true
		o.Effect = "reverts this field at its next sync when the Application self-heals"
		o.Hold, o.Resume = "argocd app set "+name+" --self-heal=false", "argocd app set "+name+" --self-heal"
	default:
		o.Manager = ManagerHelm
		o.Effect = "sets this field again at the next helm upgrade; nothing reverts it before, and restore hands it back"
	}
}

// ErrReconciled means a tool that re-applies what it owns (Flux, Argo CD) owns the workload,
// and livesync was not told to write anyway (--force).
var ErrReconciled = errors.New("re-applies what it owns")

// CheckOwner says in one line what the workload's owner will do to changes ("" when no tool
// owns it), and refuses with ErrReconciled, unless force, when that owner re-applies them on
// its own: the pin would be undone within minutes while livesync reported it done, and a
// follower pinning each new push would fight it with a rollout every time. Helm alone is
// fine: nothing reverts the pin before the next upgrade, and restore hands its fields back.
func (w *Workload) CheckOwner(changes []Change, force bool) (string, error) {
	cs := make([]Container, len(changes))
	for i, c := range changes {
		cs[i] = c.Container
	}
	o := w.Owner(cs)
	if o == nil {
		return "", nil
	}
	line := fmt.Sprintf("%s: %s %s", w.Ref(), o.Describe(), o.Effect)
	if o.Hold != "" {
		line += fmt.Sprintf("; hold it with %q (and %q after restore)", o.Hold, o.Resume)
	}
	if o.Reconciles && !force {
		return line, fmt.Errorf("%s: %s %w: hold it first with %q, then run again with --force", w.Ref(), o.Describe(), ErrReconciled, o.Hold)
	}
	return line, nil
}
