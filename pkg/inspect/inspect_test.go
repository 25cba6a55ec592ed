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
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Annotations: map[string]string{
			workload.OriginalAnnotation: `{"app":{"image":"127.0.0.1:5000/app:dev","imagePullPolicy":"IfNotPresent"}}`,
		}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: img, ImagePullPolicy: corev1.PullIfNotPresent}}}},
		},
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
