package workload

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// annotated returns testDeployment with the annotation set to raw and its containers' images
// and pull policies set as given (name -> {image, policy}).
func annotated(raw string, state map[string]State) *appsv1.Deployment {
	d := testDeployment()
	if raw != "" {
		d.Annotations = map[string]string{OriginalAnnotation: raw}
	}
	for i, c := range d.Spec.Template.Spec.Containers {
		if s, ok := state[c.Name]; ok {
			d.Spec.Template.Spec.Containers[i].Image = s.Image
			d.Spec.Template.Spec.Containers[i].ImagePullPolicy = corev1.PullPolicy(s.PullPolicy)
		}
	}
	return d
}

func mustWorkload(t *testing.T, d *appsv1.Deployment) *Workload {
	t.Helper()
	w, err := FromObject(d)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestMalformedOriginals: an annotation that is valid JSON of the wrong shape (or not JSON) is
// one error line naming the fix for every command that reads it, never a panic, and never
// overwritten by refresh or pull-policy.
func TestMalformedOriginals(t *testing.T) {
	cases := []struct{ raw, want string }{
		{"null", "got null"},
		{" null ", "got null"},
		{"[]", "got an array"},
		{`"x"`, "got a string"},
		{"5", "got a number"},
		{"true", "got a boolean"},
		{"{not json", "got invalid JSON"},
		{`{"app": null}`, `container "app": want an object with an image, got null`},
		{`{"app": "x"}`, `container "app": want an object with an image, got a string`},
		{`{"app": []}`, `container "app": want an object with an image, got an array`},
		{`{"app": {}}`, `container "app": no image recorded`},
		{`{"app": {"image": ""}}`, `container "app": no image recorded`},
		{`{"app": {"image": 5}}`, `container "app": json: cannot unmarshal`},
		{`{"app": {"image": "a", "set": "b"}}`, `container "app": json: cannot unmarshal`},
		{`{"app": {"image": "a", "set": {}}}`, `container "app": no image in "set"`},
	}
	for _, tc := range cases {
		t.Run(tc.raw, func(t *testing.T) {
			w := mustWorkload(t, annotated(tc.raw, nil))
			_, err := w.Originals()
			if !errors.Is(err, ErrBadOriginal) {
				t.Fatalf("Originals() error = %v, want ErrBadOriginal", err)
			}
			msg := err.Error()
			for _, want := range []string{
				"annotation livesync.dev/original on deployment/web is not what livesync writes: ",
				tc.want,
				"remove it with kubectl annotate -n ns deployment/web livesync.dev/original-",
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q lacks %q", msg, want)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			// refresh and pull-policy record through BuildPatch: refused, not a nil-map panic.
			cs, _ := w.Containers([]string{"app"})
			for _, ch := range []Change{{Container: cs[0], Image: "example.com/app:dev@sha256:abc"}, {Container: cs[0], PullPolicy: "Always"}} {
				if p, err := BuildPatch(w, []Change{ch}, false); !errors.Is(err, ErrBadOriginal) {
					t.Errorf("BuildPatch(%+v) = %s, %v; want ErrBadOriginal", ch, p.Data, err)
				}
			}
			if _, err := PlanRestore(w, false); !errors.Is(err, ErrBadOriginal) {
				t.Errorf("PlanRestore error = %v, want ErrBadOriginal", err)
			}
			if _, err := PlanRestore(w, true); !errors.Is(err, ErrBadOriginal) {
				t.Errorf("PlanRestore(force) error = %v, want ErrBadOriginal", err)
			}
		})
	}
}

func TestOriginalsValid(t *testing.T) {
	cases := []struct {
		raw  string
		want Originals
	}{
		{"", Originals{}},
		{"{}", Originals{}},
		// Written by the release before "set": still read, unknown fields ignored.
		{`{"app":{"image":"a:dev","imagePullPolicy":"IfNotPresent"}}`, Originals{"app": {Image: "a:dev", PullPolicy: "IfNotPresent"}}},
		{`{"app":{"image":"a:dev","set":null,"later":1}}`, Originals{"app": {Image: "a:dev"}}},
		{`{"i":{"image":"a","init":true,"set":{"image":"b","imagePullPolicy":"Always"}}}`, Originals{"i": {Image: "a", Init: true, Set: &State{Image: "b", PullPolicy: "Always"}}}},
	}
	for _, tc := range cases {
		got, err := mustWorkload(t, annotated(tc.raw, nil)).Originals()
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Originals(%q) = %+v, %v; want %+v", tc.raw, got, err, tc.want)
		}
	}
}

func TestPinnedForm(t *testing.T) {
	cases := []struct {
		img, ref string
		want     bool
	}{
		{"r.io/app:dev@sha256:" + strings.Repeat("a", 64), "r.io/app:dev", true},
		{"r.io/app:dev@sha256:" + strings.Repeat("b", 64), "r.io/app:dev@sha256:" + strings.Repeat("a", 64), true},
		{"nginx:latest@sha256:" + strings.Repeat("a", 64), "nginx", true},
		{"docker.io/library/nginx:latest@sha256:" + strings.Repeat("a", 64), "nginx", true},
		{"r.io/app:dev", "r.io/app:dev", false},
		{"r.io/app:v2", "r.io/app:dev", false},
		{"r.io/app:v2@sha256:" + strings.Repeat("a", 64), "r.io/app:dev", false},
		{"r.io/other:dev@sha256:" + strings.Repeat("a", 64), "r.io/app:dev", false},
		{"r.io/app@sha256:" + strings.Repeat("a", 64), "r.io/app", false},
		{"::bad", "r.io/app:dev", false},
	}
	for _, tc := range cases {
		if got := pinnedForm(tc.img, tc.ref); got != tc.want {
			t.Errorf("pinnedForm(%q, %q) = %v, want %v", tc.img, tc.ref, got, tc.want)
		}
	}
}

// TestBuildPatchRecords: a record keeps the true original across livesync's own changes, and
// takes someone else's later change as the new original of that field.
func TestBuildPatchRecords(t *testing.T) {
	const (
		dev    = "example.com/app:dev"
		pinned = "example.com/app:dev@sha256:abc"
		next   = "example.com/app:dev@sha256:def"
		v2     = "example.com/app:v2"
		v2pin  = "example.com/app:v2@sha256:abc"
	)
	cases := []struct {
		name   string
		raw    string
		cur    State
		change Change
		want   Original
	}{
		{"first change", "", State{dev, "IfNotPresent"}, Change{Image: pinned},
			Original{Image: dev, PullPolicy: "IfNotPresent", Set: &State{pinned, "IfNotPresent"}}},
		{"livesync's own pin moves on", `{"app":{"image":"` + dev + `","imagePullPolicy":"IfNotPresent","set":{"image":"` + pinned + `","imagePullPolicy":"IfNotPresent"}}}`,
			State{pinned, "IfNotPresent"}, Change{Image: next},
			Original{Image: dev, PullPolicy: "IfNotPresent", Set: &State{next, "IfNotPresent"}}},
		{"policy on top of a pin", `{"app":{"image":"` + dev + `","imagePullPolicy":"IfNotPresent","set":{"image":"` + pinned + `","imagePullPolicy":"IfNotPresent"}}}`,
			State{pinned, "IfNotPresent"}, Change{PullPolicy: "Always"},
			Original{Image: dev, PullPolicy: "IfNotPresent", Set: &State{pinned, "Always"}}},
		{"user set another image, then refresh", `{"app":{"image":"` + dev + `","imagePullPolicy":"IfNotPresent","set":{"image":"` + pinned + `","imagePullPolicy":"IfNotPresent"}}}`,
			State{v2, "IfNotPresent"}, Change{Image: v2pin},
			Original{Image: v2, PullPolicy: "IfNotPresent", Set: &State{v2pin, "IfNotPresent"}}},
		{"user set the policy, then refresh", `{"app":{"image":"` + dev + `","imagePullPolicy":"IfNotPresent","set":{"image":"` + pinned + `","imagePullPolicy":"IfNotPresent"}}}`,
			State{pinned, "Always"}, Change{Image: next},
			Original{Image: dev, PullPolicy: "Always", Set: &State{next, "Always"}}},
		{"legacy pin moves on", `{"app":{"image":"` + dev + `","imagePullPolicy":"IfNotPresent"}}`,
			State{"example.com/app:dev@sha256:" + strings.Repeat("a", 64), "IfNotPresent"}, Change{Image: next},
			Original{Image: dev, PullPolicy: "IfNotPresent", Set: &State{next, "IfNotPresent"}}},
		{"legacy record, user set another image", `{"app":{"image":"` + dev + `","imagePullPolicy":"IfNotPresent"}}`,
			State{v2, "IfNotPresent"}, Change{Image: v2pin},
			Original{Image: v2, PullPolicy: "IfNotPresent", Set: &State{v2pin, "IfNotPresent"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := annotated(tc.raw, map[string]State{"app": tc.cur})
			w := mustWorkload(t, d)
			cs, _ := w.Containers([]string{"app"})
			tc.change.Container = cs[0]
			// The object has no managedFields: nobody owned the changed field before.
			if tc.change.Image != "" {
				tc.want.Owners = map[string][]FieldOwner{FieldImage: {}}
			} else {
				tc.want.Owners = map[string][]FieldOwner{FieldPullPolicy: {}}
			}
			p, err := BuildPatch(w, []Change{tc.change}, false)
			if err != nil {
				t.Fatal(err)
			}
			got, err := mustWorkload(t, applyPatch(t, d, p.Data)).Originals()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got["app"], tc.want) || len(got) != 1 {
				t.Errorf("record = %+v (set %+v), want %+v (set %+v)", got["app"], got["app"].Set, tc.want, tc.want.Set)
			}
		})
	}
}

// TestPlanRestore: restore undoes only what livesync set and nobody changed since; a container
// someone changed is left as is with its record kept, unless --force.
func TestPlanRestore(t *testing.T) {
	const (
		dev     = "example.com/app:dev"
		pinned  = "example.com/app:dev@sha256:abc"
		v2      = "example.com/app:v2"
		side    = "example.com/side:dev"
		sidePin = "example.com/side:dev@sha256:abc"
	)
	rec := func(orig, origPolicy, set, setPolicy string) string {
		s := `{"image":"` + orig + `","imagePullPolicy":"` + origPolicy + `"`
		if set != "" {
			s += `,"set":{"image":"` + set + `","imagePullPolicy":"` + setPolicy + `"}`
		}
		return s + "}"
	}
	refreshed := `{"app":` + rec(dev, "IfNotPresent", pinned, "IfNotPresent") + `}`
	cases := []struct {
		name    string
		raw     string
		cur     map[string]State
		force   bool
		want    map[string]State // the containers after the patch
		kept    []string         // records left in the annotation
		skipped []string
		noPatch bool
	}{
		{name: "as livesync left it", raw: refreshed, cur: map[string]State{"app": {pinned, "IfNotPresent"}},
			want: map[string]State{"app": {dev, "IfNotPresent"}}},
		{name: "kubectl set image after refresh", raw: refreshed, cur: map[string]State{"app": {v2, "IfNotPresent"}},
			skipped: []string{"app"}, kept: []string{"app"}, noPatch: true},
		{name: "kubectl set image after refresh, --force", raw: refreshed, cur: map[string]State{"app": {v2, "IfNotPresent"}}, force: true,
			want: map[string]State{"app": {dev, "IfNotPresent"}}},
		{name: "policy changed by someone after pull-policy", raw: `{"app":` + rec(dev, "IfNotPresent", dev, "Always") + `}`,
			cur: map[string]State{"app": {dev, "Never"}}, skipped: []string{"app"}, kept: []string{"app"}, noPatch: true},
		{name: "policy changed by someone after refresh: image back, their policy stays", raw: refreshed,
			cur: map[string]State{"app": {pinned, "Always"}}, want: map[string]State{"app": {dev, "Always"}}},
		{name: "image changed by someone after pull-policy: policy back, their image stays", raw: `{"app":` + rec(dev, "IfNotPresent", dev, "Always") + `}`,
			cur: map[string]State{"app": {v2, "Always"}}, want: map[string]State{"app": {v2, "IfNotPresent"}}},
		{name: "one changed, one not: the record of the changed one stays",
			raw:  `{"app":` + rec(dev, "IfNotPresent", pinned, "IfNotPresent") + `,"sidecar":` + rec(side, "Always", sidePin, "Always") + `}`,
			cur:  map[string]State{"app": {v2, "IfNotPresent"}, "sidecar": {sidePin, "Always"}},
			want: map[string]State{"app": {v2, "IfNotPresent"}, "sidecar": {side, "Always"}}, skipped: []string{"app"}, kept: []string{"app"}},
		{name: "legacy record, pinned form", raw: `{"app":` + rec(dev, "IfNotPresent", "", "") + `}`,
			cur: map[string]State{"app": {"example.com/app:dev@sha256:" + strings.Repeat("a", 64), "Always"}}, want: map[string]State{"app": {dev, "IfNotPresent"}}},
		{name: "legacy record, another tag", raw: `{"app":` + rec(dev, "IfNotPresent", "", "") + `}`,
			cur: map[string]State{"app": {v2, "IfNotPresent"}}, skipped: []string{"app"}, kept: []string{"app"}, noPatch: true},
		{name: "already the originals: the record goes", raw: refreshed, cur: map[string]State{"app": {dev, "IfNotPresent"}},
			want: map[string]State{"app": {dev, "IfNotPresent"}}},
		{name: "a recorded container that is gone", raw: `{"gone":` + rec(dev, "IfNotPresent", pinned, "IfNotPresent") + `}`,
			cur: map[string]State{"app": {v2, "IfNotPresent"}}, want: map[string]State{"app": {v2, "IfNotPresent"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := annotated(tc.raw, tc.cur)
			plan, err := PlanRestore(mustWorkload(t, d), tc.force)
			if err != nil {
				t.Fatal(err)
			}
			var skipped []string
			for _, s := range plan.Steps {
				if s.Skipped {
					skipped = append(skipped, s.Container.Name)
					if s.Conflict == "" || s.Change.Image == "" && s.Change.PullPolicy == "" {
						t.Errorf("skipped %q without a conflict or a --force change: %+v", s.Container.Name, s)
					}
				}
			}
			if !reflect.DeepEqual(skipped, tc.skipped) {
				t.Errorf("skipped %q, want %q", skipped, tc.skipped)
			}
			p, err := plan.Patch()
			if err != nil {
				t.Fatal(err)
			}
			if tc.noPatch {
				if p != nil {
					t.Errorf("patch %s, want none", p.Data)
				}
				return
			}
			if p == nil {
				t.Fatal("no patch")
			}
			after := applyPatch(t, d, p.Data)
			for _, c := range after.Spec.Template.Spec.Containers {
				if want, ok := tc.want[c.Name]; ok && (c.Image != want.Image || string(c.ImagePullPolicy) != want.PullPolicy) {
					t.Errorf("container %s after restore: %s %s, want %s %s", c.Name, c.Image, c.ImagePullPolicy, want.Image, want.PullPolicy)
				}
			}
			got, err := mustWorkload(t, after).Originals()
			if err != nil {
				t.Fatal(err)
			}
			var kept []string
			for name := range got {
				kept = append(kept, name)
			}
			if !reflect.DeepEqual(kept, tc.kept) {
				t.Errorf("records kept %q, want %q (annotation %q)", kept, tc.kept, after.Annotations[OriginalAnnotation])
			}
			if len(tc.kept) == 0 {
				if _, ok := after.Annotations[OriginalAnnotation]; ok {
					t.Errorf("annotation left: %q", after.Annotations[OriginalAnnotation])
				}
			}
		})
	}
}
