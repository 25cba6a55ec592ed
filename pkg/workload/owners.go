package workload

import (
	"bytes"
	"encoding/json"
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
	if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
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
// dropped from livesync's entries, which leaves it to whoever writes it next. Entries left empty are removed, as the API server
// would. It also returns, per owner given a field, the fields it got ("helm (Apply)":
// [container "app" image]), and false when nothing changes.
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
		e.FieldsV1 = &metav1.FieldsV1{Raw: raw}
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
