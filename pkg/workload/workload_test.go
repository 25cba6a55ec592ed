package workload

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

func TestBuilderArgs(t *testing.T) {
	cases := []struct {
		args     []string
		selector string
		want     []string
		err      string
	}{
		{[]string{"deploy/web"}, "", []string{"deploy/web"}, ""},
		{[]string{"deployment", "web"}, "", []string{"deployment", "web"}, ""},
		{[]string{"web-0"}, "", []string{"pod/web-0"}, ""},
		{[]string{"deploy"}, "app=web", []string{"deploy"}, ""},
		{nil, "app=web", []string{"pods"}, ""},
		{nil, "", nil, "name a workload"},
		{[]string{"deploy/web"}, "app=web", nil, "use one of them"},
		{[]string{"deploy", "web"}, "app=web", nil, "use one of them"},
		{[]string{"deploy/web", "x"}, "", nil, "either TYPE/NAME or TYPE NAME"},
		{[]string{"a", "b", "c"}, "", nil, "too many arguments"},
	}
	for _, tc := range cases {
		got, err := BuilderArgs(tc.args, tc.selector)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("BuilderArgs(%q, %q) error = %v, want %q", tc.args, tc.selector, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("BuilderArgs(%q, %q) = %q, %v; want %q", tc.args, tc.selector, got, err, tc.want)
		}
	}
}

func testDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", ResourceVersion: "42"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "setup", Image: "busybox:1", ImagePullPolicy: corev1.PullIfNotPresent}},
				Containers: []corev1.Container{
					{Name: "app", Image: "example.com/app:dev", ImagePullPolicy: corev1.PullIfNotPresent},
					{Name: "sidecar", Image: "example.com/side:dev", ImagePullPolicy: corev1.PullAlways},
				},
			}},
		},
	}
}

func TestFromObjectAndContainers(t *testing.T) {
	w, err := FromObject(testDeployment())
	if err != nil {
		t.Fatal(err)
	}
	if w.Ref() != "deployment/web" || w.Selector.String() != "app=web" {
		t.Errorf("ref %q selector %q", w.Ref(), w.Selector)
	}
	all, err := w.Containers(nil)
	if err != nil || len(all) != 3 || !all[0].Init || all[0].Name != "setup" {
		t.Fatalf("Containers(nil) = %+v, %v", all, err)
	}
	one, err := w.Containers([]string{"sidecar", "sidecar"})
	if err != nil || len(one) != 1 || one[0].Name != "sidecar" {
		t.Errorf("Containers(sidecar) = %+v, %v", one, err)
	}
	_, err = w.Containers([]string{"nope"})
	if err == nil || !strings.Contains(err.Error(), "it has setup (init), app, sidecar") {
		t.Errorf("missing container error = %v", err)
	}
	if _, err := FromObject(&corev1.Service{TypeMeta: metav1.TypeMeta{Kind: "Service"}}); err == nil || !strings.Contains(err.Error(), "service has no pod template") {
		t.Errorf("service error = %v", err)
	}
}

// applyPatch applies a strategic merge patch to the deployment, as the API server would.
func applyPatch(t *testing.T, d *appsv1.Deployment, data []byte) *appsv1.Deployment {
	t.Helper()
	orig, _ := json.Marshal(d)
	out, err := strategicpatch.StrategicMergePatch(orig, data, appsv1.Deployment{})
	if err != nil {
		t.Fatalf("applying patch %s: %v", data, err)
	}
	var res appsv1.Deployment
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

func TestPatchChangesOnlyChosenContainerAndRestoreRoundTrips(t *testing.T) {
	d := testDeployment()
	w, _ := FromObject(d)
	cs, _ := w.Containers([]string{"app"})
	p, err := BuildPatch(w, []Change{{Container: cs[0], Image: "example.com/app:dev@sha256:abc"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(p.Data), `"resourceVersion":"42"`) {
		t.Errorf("patch lacks the resourceVersion guard: %s", p.Data)
	}
	d2 := applyPatch(t, d, p.Data)
	ctrs := d2.Spec.Template.Spec.Containers
	if ctrs[0].Image != "example.com/app:dev@sha256:abc" || ctrs[1].Image != "example.com/side:dev" || d2.Spec.Template.Spec.InitContainers[0].Image != "busybox:1" {
		t.Fatalf("patched containers: %+v %+v", ctrs, d2.Spec.Template.Spec.InitContainers)
	}
	if ctrs[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image patch changed the policy: %s", ctrs[0].ImagePullPolicy)
	}

	// A second change to the same container keeps the first original; another container is added.
	w2, _ := FromObject(d2)
	cs2, _ := w2.Containers(nil)
	p2, err := BuildPatch(w2, []Change{{Container: cs2[1], PullPolicy: "Always"}, {Container: cs2[2], PullPolicy: "Never"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	d3 := applyPatch(t, d2, p2.Data)
	w3, _ := FromObject(d3)
	orig, err := w3.Originals()
	if err != nil {
		t.Fatal(err)
	}
	want := Originals{
		"app": {Image: "example.com/app:dev", PullPolicy: "IfNotPresent", Set: &State{Image: "example.com/app:dev@sha256:abc", PullPolicy: "Always"},
			Owners: map[string][]FieldOwner{FieldImage: {}, FieldPullPolicy: {}}}, // the object has no managedFields: nobody owned them
		"sidecar": {Image: "example.com/side:dev", PullPolicy: "Always", Set: &State{Image: "example.com/side:dev", PullPolicy: "Never"},
			Owners: map[string][]FieldOwner{FieldPullPolicy: {}}},
	}
	if !reflect.DeepEqual(orig, want) {
		t.Errorf("originals = %+v, want %+v", orig, want)
	}

	plan, err := PlanRestore(w3, false)
	if err != nil {
		t.Fatal(err)
	}
	p3, err := plan.Patch()
	if err != nil || p3 == nil {
		t.Fatalf("restore patch = %v, %v", p3, err)
	}
	d4 := applyPatch(t, d3, p3.Data)
	if !reflect.DeepEqual(d4.Spec, d.Spec) {
		t.Errorf("restore did not return to the original spec:\n got %+v\nwant %+v", d4.Spec.Template.Spec.Containers, d.Spec.Template.Spec.Containers)
	}
	if _, ok := d4.Annotations[OriginalAnnotation]; ok {
		t.Errorf("restore left the annotation")
	}
}

func TestPodPatchAndInit(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec:       corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i", Image: "x:1"}}, Containers: []corev1.Container{{Name: "c", Image: "y:1"}}},
	}
	w, err := FromObject(pod)
	if err != nil {
		t.Fatal(err)
	}
	cs, _ := w.Containers(nil)
	p, err := BuildPatch(w, []Change{{Container: cs[0], Image: "x:2"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	_ = json.Unmarshal(p.Data, &body)
	spec := body["spec"].(map[string]any)
	if _, ok := spec["template"]; ok {
		t.Errorf("pod patch uses a template: %s", p.Data)
	}
	if _, ok := spec["initContainers"]; !ok {
		t.Errorf("init container change not under initContainers: %s", p.Data)
	}
}

func TestCanRollOut(t *testing.T) {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{}}}
	w, err := FromObject(rs)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.CanRollOut(); err == nil {
		t.Error("a ReplicaSet template change does not roll out; want an error")
	}
}

// TestImageVolumesPatchAndRestore: an image volume named like a container is a separate record
// ("volume/app"); one patch pins the container and the volume together; restore puts back
// exactly what changed, and an old annotation (container records only) still restores.
func TestImageVolumesPatchAndRestore(t *testing.T) {
	d := testDeployment()
	d.Spec.Template.Spec.Volumes = []corev1.Volume{
		{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "app", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "example.com/data:dev", PullPolicy: corev1.PullIfNotPresent}}},
	}
	w, _ := FromObject(d)
	if _, err := w.ImageVolumes([]string{"cache"}); err == nil || !strings.Contains(err.Error(), `image volume "cache" not found in deployment/web: its image volumes: app`) {
		t.Errorf("an emptyDir named as an image volume: %v", err)
	}
	if got, _ := w.Images([]string{"sidecar"}, nil); len(got) != 1 || got[0].Volume {
		t.Errorf("Images(-c sidecar) = %+v, want the container only", got)
	}
	if got, _ := w.Images(nil, []string{"app"}); len(got) != 1 || !got[0].Volume || got[0].Key() != "volume/app" {
		t.Errorf("Images(--volume app) = %+v, want the image volume only", got)
	}
	all, err := w.Images(nil, nil)
	if err != nil || len(all) != 4 {
		t.Fatalf("Images() = %+v, %v", all, err)
	}
	app, vol := all[1], all[3]
	p, err := BuildPatch(w, []Change{{Container: app, Image: "example.com/app:dev@sha256:abc"}, {Container: vol, Image: "example.com/data:dev@sha256:def", PullPolicy: "Always"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	d2 := applyPatch(t, d, p.Data)
	vs := d2.Spec.Template.Spec.Volumes
	if len(vs) != 2 || vs[0].EmptyDir == nil || vs[1].Image == nil || vs[1].Image.Reference != "example.com/data:dev@sha256:def" || vs[1].Image.PullPolicy != corev1.PullAlways ||
		d2.Spec.Template.Spec.Containers[0].Image != "example.com/app:dev@sha256:abc" {
		t.Fatalf("patched: volumes %+v containers %+v", vs, d2.Spec.Template.Spec.Containers)
	}
	w2, _ := FromObject(d2)
	orig, err := w2.Originals()
	if err != nil {
		t.Fatal(err)
	}
	if o := orig["volume/app"]; o.Image != "example.com/data:dev" || o.PullPolicy != "IfNotPresent" || orig["app"].Image != "example.com/app:dev" {
		t.Errorf("originals = %+v", orig)
	}
	plan, err := PlanRestore(w2, false)
	if err != nil {
		t.Fatal(err)
	}
	p3, err := plan.Patch()
	if err != nil || p3 == nil {
		t.Fatalf("restore patch = %v, %v", p3, err)
	}
	if d3 := applyPatch(t, d2, p3.Data); !reflect.DeepEqual(d3.Spec, d.Spec) {
		t.Errorf("restore did not return to the original spec:\n got %+v\nwant %+v", d3.Spec.Template.Spec, d.Spec.Template.Spec)
	}

	// A record written before image volumes existed names containers only, and restores them.
	old := testDeployment()
	old.Spec.Template.Spec.Volumes = d.Spec.Template.Spec.Volumes
	old.Spec.Template.Spec.Containers[0].Image = "example.com/app:dev@sha256:abc"
	old.Annotations = map[string]string{OriginalAnnotation: `{"app":{"image":"example.com/app:dev","imagePullPolicy":"IfNotPresent"}}`}
	wo, _ := FromObject(old)
	plan, err = PlanRestore(wo, false)
	if err != nil || len(plan.Steps) != 1 || plan.Steps[0].Change.Image != "example.com/app:dev" || plan.Steps[0].Container.Volume {
		t.Fatalf("old record: %+v, %v", plan, err)
	}
}
