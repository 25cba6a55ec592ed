package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/util/retry"

	"github.com/livesync-dev/kubectl-livesync/pkg/image"
)

// OriginalAnnotation records, per container, the image and pull policy a workload had before
// livesync first changed them, so restore always returns to the true original, and what
// livesync set, so restore can tell its own change from a later one by someone else. A
// container whose command livesync wrapped in its supervisor (--restart process) also has its
// original command recorded, under "supervisor".
const OriginalAnnotation = "livesync.dev/original"

// ErrBadOriginal means the OriginalAnnotation holds something livesync never writes: a hand
// edit, another tool, or a truncated value.
var ErrBadOriginal = errors.New("is not what livesync writes")

// State is a container's image and pull policy.
type State struct {
	Image      string `json:"image"`
	PullPolicy string `json:"imagePullPolicy,omitempty"`
}

// Original is the recorded pre-livesync state of one container.
type Original struct {
	Image      string `json:"image"`
	PullPolicy string `json:"imagePullPolicy,omitempty"`
	Init       bool   `json:"init,omitempty"`
	// Set is the image and pull policy livesync last left the container with. Records written
	// before it existed have none; see setFor for how those are read.
	Set *State `json:"set,omitempty"`
	// Supervisor is set while livesync's supervisor wraps the container's command.
	Supervisor *SupervisorRecord `json:"supervisor,omitempty"`
	// Owners are, per field livesync changed (FieldImage, FieldPullPolicy, FieldCommand), the
	// managedFields entries that owned it before livesync first did: restore hands the field
	// back to them, so that their next server-side apply does not meet a conflict with
	// livesync. A field without an entry was changed by a release that kept none.
	Owners map[string][]FieldOwner `json:"owners,omitempty"`
}

// recordOwners records the owners of field as the object has them now, livesync left out,
// unless they are recorded already and the field still holds what livesync set (fresh is
// false): then the owners recorded before livesync's first write are still the ones to
// return to. Livesync is never recorded: a field it owned before its first write can only
// have been left to it by an earlier write of its own (a release that did not hand
// ownership back), and restore hands that back too.
func (o *Original) recordOwners(w *Workload, c Container, field string, fresh bool) {
	if _, ok := o.Owners[field]; ok && !fresh {
		return
	}
	if o.Owners == nil {
		o.Owners = map[string][]FieldOwner{}
	}
	o.Owners[field] = slices.DeleteFunc(w.FieldOwners(c, field), func(f FieldOwner) bool { return f.Manager == FieldManager })
}

// SupervisorRecord is what a container ran before livesync wrapped its command in the
// supervisor (see PlanSupervise).
type SupervisorRecord struct {
	// Command is the template's command before; null when it set none (the image's
	// entrypoint ran), which restore puts back by removing the command.
	Command []string `json:"command"`
}

// Originals maps container names (Container.Key: "volume/NAME" for an image volume) to their
// recorded original state.
type Originals map[string]Original

// Originals reads the workload's OriginalAnnotation; a missing or empty one is an empty map.
// Anything else that is not an object of container records, each with an image, is an error
// wrapping ErrBadOriginal that says how to remove it. Refresh and pull-policy refuse such a
// workload rather than overwrite the annotation: it may be the only place the user's true
// original is written down (a hand-edited record with a typo, say), and a record livesync
// wrote over it would make restore return to a pinned digest instead. Refusing loses nothing;
// the user reads the annotation, then fixes or removes it.
func (w *Workload) Originals() (Originals, error) {
	raw := w.Annotations[OriginalAnnotation]
	if raw == "" {
		return Originals{}, nil
	}
	o, problem := parseOriginals(raw)
	if problem != "" {
		return nil, fmt.Errorf("annotation %s on %s %w: %s: fix it, or remove it with kubectl annotate -n %s %s %s-",
			OriginalAnnotation, w.Ref(), ErrBadOriginal, problem, w.Namespace, w.Ref(), OriginalAnnotation)
	}
	return o, nil
}

// parseOriginals decodes the annotation, or says in a few words why it cannot. It checks the
// shape itself because encoding/json accepts null for a map (leaving it nil, which panics on
// the first write) and for a struct (leaving a record with no image).
func parseOriginals(raw string) (Originals, string) {
	var records map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &records); err != nil || records == nil {
		return nil, "want a JSON object of container records, got " + describeJSON(raw, err)
	}
	names := make([]string, 0, len(records))
	for name := range records {
		names = append(names, name)
	}
	sort.Strings(names)
	out := Originals{}
	for _, name := range names {
		rec := records[name]
		if kind := describeJSON(string(rec), nil); kind != "an object" {
			return nil, fmt.Sprintf("container %q: want an object with an image, got %s", name, kind)
		}
		var o Original
		if err := json.Unmarshal(rec, &o); err != nil {
			return nil, fmt.Sprintf("container %q: %v", name, err)
		}
		if o.Image == "" {
			return nil, fmt.Sprintf("container %q: no image recorded", name)
		}
		if o.Set != nil && o.Set.Image == "" {
			return nil, fmt.Sprintf("container %q: no image in \"set\"", name)
		}
		out[name] = o
	}
	return out, ""
}

// describeJSON names the kind of a JSON value for an error message; err is the decoding
// error of invalid JSON, if the caller has one.
func describeJSON(raw string, err error) string {
	if !json.Valid([]byte(raw)) {
		if err != nil {
			return fmt.Sprintf("invalid JSON (%v)", err)
		}
		return "invalid JSON"
	}
	switch strings.TrimSpace(raw)[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// setFor returns what livesync left the container with, given its current state cur. A record
// written before Set existed is read the way that release wrote it: refresh replaced the image
// by the same repository and tag with a digest added, so the current image counts as
// livesync's when it is the original or such a pinned form of it, and as someone else's
// otherwise (reported as an empty image, which no container has). That release cannot say who
// set the pull policy; it is taken as livesync's, which is what restore did then.
func (o Original) setFor(cur State) State {
	if o.Set != nil {
		return *o.Set
	}
	set := State{PullPolicy: cur.PullPolicy}
	if cur.Image == o.Image || pinnedForm(cur.Image, o.Image) {
		set.Image = cur.Image
	}
	return set
}

// pinnedForm reports whether img is ref's repository and tag with a digest pinned, which is
// what refresh writes ("app:dev" -> "app:dev@sha256:…", "nginx" -> "nginx:latest@sha256:…").
func pinnedForm(img, ref string) bool {
	i, err := image.ParseReference(img)
	if err != nil || i.Digest == "" || i.Tag == "" {
		return false
	}
	r, err := image.ParseReference(ref)
	return err == nil && r.Registry == i.Registry && r.Repository == i.Repository && r.Tag == i.Tag
}

// Change is a new image, pull policy and/or command for one container; empty fields stay as
// they are.
type Change struct {
	Container  Container
	Image      string
	PullPolicy string
	// SetCommand sets the container's command to Command; a nil Command removes it.
	SetCommand bool
	Command    []string
}

// empty reports that c changes nothing.
func (c Change) empty() bool { return c.Image == "" && c.PullPolicy == "" && !c.SetCommand }

// Patch is a strategic merge patch of a workload plus what it means, for --dry-run output.
type Patch struct {
	Workload *Workload
	Changes  []Change
	// Restore reports that the patch removes the annotation: nothing is left to restore.
	Restore bool
	Data    []byte
	// HandedBack says, after Apply, which fields restore handed back to which owners, e.g.
	// `container "app" image to helm (Apply)`; empty when it handed back none.
	HandedBack []string
	handBacks  []handBack
	// appliedVersion is the resourceVersion Apply's write left, where WatchReverts starts.
	appliedVersion string
	// watch opens WatchReverts' watch; nil is the workload's REST client.
	watch watchFunc
	// restoring marks restore's patch, which puts back what the owner had.
	restoring bool
}

// Pins reports that the patch sets an image or pull policy of livesync's own (refresh,
// pull-policy), which another writer may revert; restore's patch does not.
func (p *Patch) Pins() bool {
	if p.restoring {
		return false
	}
	for _, c := range p.Changes {
		if c.Image != "" || c.PullPolicy != "" {
			return true
		}
	}
	return false
}

// BuildPatch builds a patch that changes only the given containers and records each one's
// original image and policy in the annotation, with what the patch sets. An earlier record is
// kept, except for a field someone else changed since livesync set it: that choice is the
// original restore must return to now. When restore is set the annotation is removed instead.
// The patch carries the workload's resourceVersion so a concurrent writer makes it fail
// rather than be overwritten.
func BuildPatch(w *Workload, changes []Change, restore bool) (*Patch, error) {
	if restore {
		return buildPatch(w, changes, nil)
	}
	orig, err := w.Originals()
	if err != nil {
		return nil, err
	}
	for _, c := range changes {
		cur := State{Image: c.Container.Image, PullPolicy: c.Container.PullPolicy}
		rec, ok := orig[c.Container.Key()]
		imageMoved, policyMoved := !ok, !ok
		if !ok {
			rec = Original{Image: cur.Image, PullPolicy: cur.PullPolicy, Init: c.Container.Init}
		} else {
			set := rec.setFor(cur)
			imageMoved, policyMoved = cur.Image != set.Image, cur.PullPolicy != set.PullPolicy
			if imageMoved {
				rec.Image = cur.Image
			}
			if policyMoved {
				rec.PullPolicy = cur.PullPolicy
			}
		}
		if c.Image != "" && c.Image != cur.Image {
			rec.recordOwners(w, c.Container, FieldImage, imageMoved)
		}
		if c.PullPolicy != "" && c.PullPolicy != cur.PullPolicy {
			rec.recordOwners(w, c.Container, FieldPullPolicy, policyMoved)
		}
		next := cur
		if c.Image != "" {
			next.Image = c.Image
		}
		if c.PullPolicy != "" {
			next.PullPolicy = c.PullPolicy
		}
		rec.Set = &next
		orig[c.Container.Key()] = rec
	}
	return buildPatch(w, changes, orig)
}

// buildPatch builds the patch of changes that sets the annotation to orig, or removes it when
// orig is empty.
func buildPatch(w *Workload, changes []Change, orig Originals) (*Patch, error) {
	var regular, init, volumes []map[string]any
	for _, c := range changes {
		if c.Container.Volume {
			// spec.volumes merges by name; only the image source's fields change.
			src := map[string]any{}
			if c.Image != "" {
				src["reference"] = c.Image
			}
			if c.PullPolicy != "" {
				src["pullPolicy"] = c.PullPolicy
			}
			volumes = append(volumes, map[string]any{"name": c.Container.Name, "image": src})
			continue
		}
		cp := map[string]any{"name": c.Container.Name}
		if c.Image != "" {
			cp["image"] = c.Image
		}
		if c.PullPolicy != "" {
			cp["imagePullPolicy"] = c.PullPolicy
		}
		if c.SetCommand {
			cp["command"] = c.Command // nil: null, which removes it
		}
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
	if len(volumes) > 0 {
		spec["volumes"] = volumes
	}
	var annotation any // nil removes the annotation
	if len(orig) > 0 {
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
	return &Patch{Workload: w, Changes: changes, Restore: len(orig) == 0, Data: data}, nil
}

// FieldManager is the field manager livesync's patches are recorded under.
const FieldManager = "kubectl-livesync"

// Apply sends the patch through the REST mapping the workload was resolved with, the way
// kubectl set image does, so every kind is patched alike. With dryRun the API server validates
// and authorizes it (dryRun=All) without persisting anything, so --dry-run also proves the
// user may make the change.
func Apply(p *Patch, dryRun bool) error {
	w := p.Workload
	if err := w.patchable(); err != nil {
		return err
	}
	h := resource.NewHelper(w.Info.Client, w.Info.Mapping).WithFieldManager(FieldManager).DryRun(dryRun)
	var obj runtime.Object
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		obj, err = h.Patch(w.Namespace, w.Name, types.StrategicMergePatchType, p.Data, nil)
		if apierrors.IsConflict(err) {
			if rerr := p.rebase(h); rerr != nil {
				return rerr
			}
		}
		return err
	})
	if err != nil {
		return explainPatchError(w, err)
	}
	if dryRun {
		return nil
	}
	if a, err := meta.Accessor(obj); err == nil {
		p.appliedVersion = a.GetResourceVersion()
	}
	if len(p.handBacks) == 0 {
		return nil
	}
	return p.handBack(h, obj)
}

// handBack edits the managedFields of the restored object (obj, as the patch returned it) so
// that livesync owns none of the fields restore put back, each going to the owners it had
// before livesync first wrote it (see handOwnershipBack). It is a second request because the
// restore patch itself, like every update, makes its writer the owner of what it changes. A
// writer in between fails it with a conflict; it is then computed again from a fresh read.
func (p *Patch) handBack(h *resource.Helper, obj runtime.Object) error {
	w := p.Workload
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if obj == nil {
			var err error
			if obj, err = h.Get(w.Namespace, w.Name); err != nil {
				return err
			}
		}
		a, err := meta.Accessor(obj)
		if err != nil {
			return err
		}
		entries, given, changed, err := handOwnershipBack(a.GetManagedFields(), p.handBacks, metav1.Now())
		if err != nil || !changed {
			return err
		}
		data, err := managedFieldsPatch(entries, a.GetResourceVersion())
		if err != nil {
			return err
		}
		if _, err = h.Patch(w.Namespace, w.Name, types.JSONPatchType, data, nil); err != nil {
			obj = nil // read it again before the next try
			return err
		}
		p.HandedBack = describeGiven(given)
		return nil
	})
	if err != nil {
		return fmt.Errorf("handing back the fields restore put back on %s (it restored them, but %q still owns them, so their owner's next server-side apply may conflict): %w", w.Ref(), FieldManager, err)
	}
	return nil
}

// errChanged says a conflicting writer changed what the patch was built from.
var errChanged = errors.New("changed")

// rebase moves the patch onto the object's current resourceVersion when the conflict came
// from a write that left alone what the patch was built from: the containers it changes and
// the record annotation. Controllers write status all the time (a Deployment's conditions
// after its rollout), and that must not fail a refresh or pull-policy right after another.
// Any other change returns errChanged, and the patch is not retried.
func (p *Patch) rebase(h *resource.Helper) error {
	w := p.Workload
	obj, err := h.Get(w.Namespace, w.Name)
	if err != nil {
		return err
	}
	fresh, err := FromObject(obj)
	if err != nil {
		return err
	}
	if fresh.Annotations[OriginalAnnotation] != w.Annotations[OriginalAnnotation] {
		return errChanged
	}
	for _, c := range p.Changes {
		now, ok := fresh.find(c.Container)
		if !ok || now.Image != c.Container.Image || now.PullPolicy != c.Container.PullPolicy ||
			!slices.Equal(now.Command, c.Container.Command) {
			return errChanged
		}
	}
	var body map[string]any
	if err := json.Unmarshal(p.Data, &body); err != nil {
		return err
	}
	body["metadata"].(map[string]any)["resourceVersion"] = fresh.ResourceVersion
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	p.Data, w.ResourceVersion = data, fresh.ResourceVersion
	return nil
}

// patchable refuses a workload that was not resolved from the API server, or whose mapping is
// not of its kind (the pods -l selects are not one object to patch).
func (w *Workload) patchable() error {
	if w.Info == nil || w.Info.Mapping == nil || w.Info.Mapping.GroupVersionKind.Kind != w.Kind {
		return fmt.Errorf("patching %s: it is not one object read from the API server: name a workload as TYPE/NAME", w.Ref())
	}
	return nil
}

func explainPatchError(w *Workload, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("patching %s: forbidden: you need the \"patch\" verb on %s in namespace %q: %w", w.Ref(), w.Info.Mapping.Resource.GroupResource(), w.Namespace, err)
	case apierrors.IsConflict(err), errors.Is(err, errChanged):
		return fmt.Errorf("patching %s: it changed while livesync was reading it; run the command again", w.Ref())
	case apierrors.IsNotFound(err):
		return fmt.Errorf("patching %s: it no longer exists", w.Ref())
	case apierrors.IsInvalid(err):
		return fmt.Errorf("patching %s: the API server rejected the change: %w", w.Ref(), err)
	}
	return fmt.Errorf("patching %s: %w", w.Ref(), err)
}

// CanRollOut reports why a template change on this workload would not replace its pods, or nil.
func (w *Workload) CanRollOut() error {
	if w.Kind == KindReplicaSet {
		return fmt.Errorf("%s: a ReplicaSet does not replace its pods when its template changes; run this on the Deployment that owns it", w.Ref())
	}
	return nil
}
