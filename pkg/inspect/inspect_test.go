package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/livesync-dev/kubectl-livesync/pkg/image"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

const (
	d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	d2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	// dGone is a digest the fake registry does not serve.
	dGone = "sha256:9999999999999999999999999999999999999999999999999999999999999999"
)

type fakeResolver map[string]string

func (f fakeResolver) Resolve(_ context.Context, ref image.Reference) (string, error) {
	if d, ok := f[ref.WithoutDigest()]; ok {
		return d, nil
	}
	return "", errors.New("tag not found")
}

// Describe serves single-platform images whose config digest is the manifest digest with its
// first hex digit replaced by "c".
func (f fakeResolver) Describe(ctx context.Context, ref image.Reference) (image.Digests, error) {
	d, err := f.Resolve(ctx, ref)
	if err != nil {
		return image.Digests{}, err
	}
	return image.Digests{Manifests: []string{d}, Configs: []string{configOf(d)}}, nil
}

func configOf(d string) string { return "sha256:c" + d[len("sha256:")+1:] }

// Serves: the fake registry keeps every digest but dGone.
func (f fakeResolver) Serves(_ context.Context, _ image.Reference, digest string) (bool, error) {
	return digest != dGone, nil
}

func (f fakeResolver) IsIndex(string) bool { return false }

func pod(name, imageID string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "node1"},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", ImageID: imageID, Ready: true, RestartCount: 1, ContainerID: "containerd://" + name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		}}},
	}
}

func build(t *testing.T, img string, pods ...*corev1.Pod) *Report {
	t.Helper()
	return buildWith(t, img, nil, pods...)
}

// buildWith is build of a Deployment that dress changed first.
func buildWith(t *testing.T, img string, dress func(*appsv1.Deployment), pods ...*corev1.Pod) *Report {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Annotations: map[string]string{
			workload.OriginalAnnotation: `{"app":{"image":"127.0.0.1:5000/app:dev","imagePullPolicy":"IfNotPresent"}}`,
		}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: img, ImagePullPolicy: corev1.PullIfNotPresent}}}},
		},
	}
	if dress != nil {
		dress(d)
	}
	client := fake.NewClientset()
	for _, p := range pods {
		if _, err := client.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := workload.FromObject(d)
	if err != nil {
		t.Fatal(err)
	}
	cs, _ := w.Images(nil, nil)
	rep, err := Build(context.Background(), client, fakeResolver{"127.0.0.1:5000/app:dev": d2}, w, cs, Options{ServerVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestBuildVerdicts(t *testing.T) {
	cases := []struct {
		name    string
		img     string
		pods    []*corev1.Pod
		verdict image.Verdict
		stale   bool
	}{
		{"stale", "127.0.0.1:5000/app:dev", []*corev1.Pod{pod("a", "127.0.0.1:5000/app@"+d1), pod("b", "docker-pullable://127.0.0.1:5000/app@"+d1)}, image.VerdictStale, true},
		{"current", "127.0.0.1:5000/app:dev", []*corev1.Pod{pod("a", "127.0.0.1:5000/app@"+d2)}, image.VerdictCurrent, false},
		{"mixed", "127.0.0.1:5000/app:dev", []*corev1.Pod{pod("a", "127.0.0.1:5000/app@"+d1), pod("b", "127.0.0.1:5000/app@"+d2)}, image.VerdictMixed, true},
		{"pinned", "127.0.0.1:5000/app:dev@" + d2, []*corev1.Pod{pod("a", "127.0.0.1:5000/app@"+d2)}, image.VerdictPinned, false},
		{"pinned to an old digest", "127.0.0.1:5000/app:dev@" + d1, []*corev1.Pod{pod("a", "127.0.0.1:5000/app@"+d1)}, image.VerdictStale, true},
		{"registry error", "127.0.0.1:5000/other:dev", []*corev1.Pod{pod("a", "x@"+d1)}, image.VerdictUnknown, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := build(t, tc.img, tc.pods...)
			c := rep.Containers[0]
			if c.Verdict != tc.verdict || c.Stale() != tc.stale {
				t.Errorf("verdict %q stale %v, want %q %v (%+v)", c.Verdict, c.Stale(), tc.verdict, tc.stale, c)
			}
			if len(c.Pods) != len(tc.pods) {
				t.Errorf("%d pods, want %d", len(c.Pods), len(tc.pods))
			}
		})
	}
}

func TestJSONContract(t *testing.T) {
	rep := build(t, "127.0.0.1:5000/app:dev", pod("a", "127.0.0.1:5000/app@"+d1))
	var buf bytes.Buffer
	if err := Print(&buf, FormatJSON, []*Report{rep}); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	wl := m["workload"].(map[string]any)
	if wl["kind"] != "Deployment" || wl["namespace"] != "ns" || wl["name"] != "web" {
		t.Errorf("workload = %v", wl)
	}
	c := m["containers"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "init", "image", "registry", "repository", "tag", "pinnedDigest", "pullPolicy", "effectivePullPolicy", "registryDigest", "registryError", "pods", "verdict", "original"} {
		if _, ok := c[k]; !ok {
			t.Errorf("container lacks %q: %v", k, c)
		}
	}
	if c["registry"] != "127.0.0.1:5000" || c["repository"] != "app" || c["tag"] != "dev" || c["verdict"] != "stale" {
		t.Errorf("container = %v", c)
	}
	p := c["pods"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "node", "digest", "ready", "restarts"} {
		if _, ok := p[k]; !ok {
			t.Errorf("pod lacks %q: %v", k, p)
		}
	}
	if o := c["original"].(map[string]any); o["image"] != "127.0.0.1:5000/app:dev" {
		t.Errorf("original = %v", o)
	}
	buf.Reset()
	if err := Print(&buf, FormatYAML, []*Report{rep, rep}); err != nil || !strings.HasPrefix(buf.String(), "items:") {
		t.Errorf("yaml of two reports = %q, %v", buf.String(), err)
	}
}

func TestTable(t *testing.T) {
	rep := build(t, "127.0.0.1:5000/app:dev", pod("a", "127.0.0.1:5000/app@"+d1), pod("b", "127.0.0.1:5000/app@"+d1))
	var buf bytes.Buffer
	if err := Print(&buf, FormatTable, []*Report{rep}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"deployment/web in namespace ns", "CONTAINER", "sha256:222222222222", "sha256:111111111111", "stale", "IfNotPresent", "original image 127.0.0.1:5000/app:dev"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestReportOwner: inspect names the tool that owns the workload (Flux's labels here), what it
// does to a pin and how to hold it, and the managers of each container's image and pull
// policy, in the table and as additive JSON fields.
func TestReportOwner(t *testing.T) {
	rep := buildWith(t, "127.0.0.1:5000/app:dev", func(d *appsv1.Deployment) {
		d.Labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
		d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kustomize-controller", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1", FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{}}}}}}}`)}}
	}, pod("a", "127.0.0.1:5000/app@"+d2))
	var buf bytes.Buffer
	if err := Print(&buf, FormatTable, []*Report{rep}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"owned by Flux (kustomize-controller, Kustomization flux-system/apps) (label kustomize.toolkit.fluxcd.io/name=apps, label kustomize.toolkit.fluxcd.io/namespace=flux-system): re-applies this field: the pin lasts until its next reconcile; hold it with \"flux suspend kustomization apps -n flux-system\" (and \"flux resume kustomization apps -n flux-system\" after restore)",
		"* app: image managed by kustomize-controller (Apply); imagePullPolicy by kustomize-controller (Apply)",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	buf.Reset()
	if err := Print(&buf, FormatJSON, []*Report{rep}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Owner struct {
			Tool, Kind, Name, Namespace, Manager, Effect, Hold string
			Reconciles                                         bool
		} `json:"owner"`
		Containers []struct {
			Managers map[string][]struct{ Manager, Operation string } `json:"managers"`
		} `json:"containers"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if o := got.Owner; o.Tool != "Flux" || o.Kind != "Kustomization" || o.Name != "apps" || o.Namespace != "flux-system" || o.Manager != "kustomize-controller" || !o.Reconciles || o.Hold == "" {
		t.Errorf("owner = %+v", o)
	}
	if m := got.Containers[0].Managers["image"]; len(m) != 1 || m[0].Manager != "kustomize-controller" || m[0].Operation != "Apply" {
		t.Errorf("managers = %+v", got.Containers[0].Managers)
	}
	// A workload no tool owns has neither field.
	buf.Reset()
	if err := Print(&buf, FormatJSON, []*Report{build(t, "127.0.0.1:5000/app:dev")}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), `"owner"`) || strings.Contains(buf.String(), `"managers"`) {
		t.Errorf("owner or managers for an unowned workload:\n%s", buf.String())
	}
}

// TestReportReverted: a pin another writer put back to the original is reported as reverted,
// by that writer's manager.
func TestReportReverted(t *testing.T) {
	rep := buildWith(t, "127.0.0.1:5000/app:dev", func(d *appsv1.Deployment) {
		d.Annotations[workload.OriginalAnnotation] = `{"app":{"image":"127.0.0.1:5000/app:dev","imagePullPolicy":"IfNotPresent","set":{"image":"127.0.0.1:5000/app:dev@` + d1 + `","imagePullPolicy":"IfNotPresent"}}}`
		d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kustomize-controller", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1", FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:image":{}}}}}}}`)}}
	}, pod("a", "127.0.0.1:5000/app@"+d2))
	c := rep.Containers[0]
	if len(c.Reverted) != 1 || c.Reverted[0] != (Reverted{Field: "image", Manager: "kustomize-controller", Set: "127.0.0.1:5000/app:dev@" + d1}) {
		t.Fatalf("reverted = %+v", c.Reverted)
	}
	var buf bytes.Buffer
	if err := Print(&buf, FormatTable, []*Report{rep}); err != nil {
		t.Fatal(err)
	}
	if want := "* app: livesync's pin reverted: image 127.0.0.1:5000/app:dev was put back by kustomize-controller (livesync set 127.0.0.1:5000/app:dev@" + d1 + "); restore drops the record"; !strings.Contains(buf.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, buf.String())
	}
}

// TestBuildImageVolumesMatchesAndPulls: an image volume is reported beside the container with
// its imageRef; a running config digest matches the tag as "config"; a bare imageID the
// registry cannot place is unknown with one line why; Pulled events say how each image got
// there; pull secrets from the service account make the KEP-2535 note.
func TestBuildImageVolumesMatchesAndPulls(t *testing.T) {
	const vol = "127.0.0.1:5000/data:dev"
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Annotations: map[string]string{
			workload.OriginalAnnotation: `{"volume/data":{"image":"127.0.0.1:5000/data:dev"}}`,
		}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				ServiceAccountName: "builder",
				Containers:         []corev1.Container{{Name: "app", Image: dev, ImagePullPolicy: corev1.PullIfNotPresent}},
				Volumes:            []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: vol + "@" + d1}}}},
			}},
		},
	}
	a := pod("a", configOf(d2)) // a bare config digest: what the tag serves, loaded into the node
	b := pod("b", d1)           // a bare digest the registry cannot place
	for _, p := range []*corev1.Pod{a, b} {
		p.Status.ContainerStatuses[0].VolumeMounts = []corev1.VolumeMountStatus{{Name: "data", MountPath: "/data",
			VolumeStatus: &corev1.VolumeStatus{Image: &corev1.ImageVolumeStatus{ImageRef: "127.0.0.1:5000/data@" + d1}}}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	client := fake.NewClientset(
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder", Namespace: "ns"}, ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: "ns"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "a"}, Reason: "Pulled",
			Message: `Successfully pulled image "` + dev + `" in 1.2s (1.2s including waiting). Image size: 123 bytes.`},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e2", Namespace: "ns"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "b"}, Reason: "Pulled",
			Message: `Container image "` + dev + `" already present on machine and can be accessed by the pod`},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e3", Namespace: "ns"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "a"}, Reason: "Pulled",
			Message: `Container image "` + vol + "@" + d1 + `" already present on machine`},
	)
	for _, p := range []*corev1.Pod{a, b} {
		if _, err := client.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := workload.FromObject(d)
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := w.Images(nil, nil)
	if err != nil || len(imgs) != 2 || !imgs[1].Volume {
		t.Fatalf("Images = %+v, %v; want the container and the image volume", imgs, err)
	}
	rep, err := Build(context.Background(), client, fakeResolver{dev: d2, vol: d1}, w, imgs, Options{ServerVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Containers) != 1 || len(rep.ImageVolumes) != 1 || strings.Join(rep.PullSecrets, ",") != "regcred" {
		t.Fatalf("report = %+v", rep)
	}
	c, v := rep.Containers[0], rep.ImageVolumes[0]
	if got := []string{c.Pods[0].Match, c.Pods[1].Match}; got[0] != image.MatchConfig || got[1] != image.MatchNone {
		t.Errorf("container matches = %v, want config, none", got)
	}
	if c.Verdict != image.VerdictUnknown || c.Stale() {
		t.Errorf("container verdict %q stale %v, want unknown and not stale", c.Verdict, c.Stale())
	}
	notes := strings.Join(c.Notes, "\n")
	for _, want := range []string{"pod b runs sha256:111111111111, an imageID that names no repository", "(KEP-2535)"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if c.Pods[0].Pull != "pulled" || c.Pods[1].Pull != "already present" {
		t.Errorf("pulls = %q, %q", c.Pods[0].Pull, c.Pods[1].Pull)
	}
	if v.Name != "data" || v.Verdict != image.VerdictPinned || v.Pods[0].Digest != d1 || v.Pods[0].Match != image.MatchManifest ||
		v.Pods[0].Pull != "already present" || v.Original == nil || v.Original.Image != vol {
		t.Errorf("image volume = %+v", v)
	}
	var buf bytes.Buffer
	if err := Print(&buf, FormatTable, []*Report{rep}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(pull secrets: regcred)", "data (volume)", "(config)", "(unknown)", "volume data: changed by livesync"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	buf.Reset()
	if err := Print(&buf, FormatJSON, []*Report{rep}); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	vs, _ := m["imageVolumes"].([]any)
	if len(vs) != 1 || m["serverVersion"] != "v1.37.2" {
		t.Fatalf("json: imageVolumes %v, serverVersion %v", m["imageVolumes"], m["serverVersion"])
	}
	pod0 := m["containers"].([]any)[0].(map[string]any)["pods"].([]any)[0].(map[string]any)
	if pod0["match"] != "config" || pod0["imageID"] != configOf(d2) || pod0["pull"] != "pulled" {
		t.Errorf("json pod = %v", pod0)
	}
}

func TestCheckPins(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{}}}
	w, err := workload.FromObject(d)
	if err != nil {
		t.Fatal(err)
	}
	app := workload.Container{Name: "app", Image: dev}
	ok := []workload.Change{{Container: app, Image: dev + "@" + d1}, {Container: app, PullPolicy: "Always"}, {Container: app, Image: dev}}
	if err := CheckPins(context.Background(), fakeResolver{}, w, ok); err != nil {
		t.Errorf("served pins: %v", err)
	}
	gone := []workload.Change{{Container: workload.Container{Name: "data", Volume: true}, Image: dev + "@" + dGone}}
	err = CheckPins(context.Background(), fakeResolver{}, w, gone)
	if !errors.Is(err, ErrPinGone) || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), `deployment/web: image volume "data": 127.0.0.1:5000/app@`+dGone+": the registry no longer serves this digest") ||
		!strings.Contains(err.Error(), "nothing changed") || !strings.Contains(err.Error(), "--force") {
		t.Errorf("deleted pin: %v", err)
	}
}

func TestMinorOf(t *testing.T) {
	for v, want := range map[string]int{"v1.37.2": 37, "v1.35.0-gke.1": 35, "1.9": 9, "": 0, "v2": 0} {
		if got := minorOf(v); got != want {
			t.Errorf("minorOf(%q) = %d, want %d", v, got, want)
		}
	}
}
