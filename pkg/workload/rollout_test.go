package workload

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes/fake"
	restfake "k8s.io/client-go/rest/fake"
	"k8s.io/kubectl/pkg/scheme"
)

// request is what the API server received.
type request struct {
	method, path, query, contentType, body string
}

// resolved gives w the resource.Info the builder would: a REST client that records each
// request and answers it with status (and the object on 200).
func resolved(t *testing.T, w *Workload, gvr schema.GroupVersionResource, status int, got *[]request) *Workload {
	t.Helper()
	gvk := gvr.GroupVersion().WithKind(w.Kind)
	client := &restfake.RESTClient{
		GroupVersion:         gvr.GroupVersion(),
		NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
		Client: restfake.CreateHTTPClient(func(req *http.Request) (*http.Response, error) {
			b, _ := io.ReadAll(req.Body)
			*got = append(*got, request{req.Method, req.URL.Path, req.URL.RawQuery, req.Header.Get("Content-Type"), string(b)})
			body := `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","message":"no","code":403}`
			if status == http.StatusOK {
				w.Object.GetObjectKind().SetGroupVersionKind(gvk)
				out, err := runtime.Encode(scheme.Codecs.LegacyCodec(gvr.GroupVersion()), w.Object)
				if err != nil {
					return nil, err
				}
				body = string(out)
			}
			h := http.Header{"Content-Type": []string{runtime.ContentTypeJSON}}
			return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}, nil
		}),
	}
	w.Info = &resource.Info{
		Client: client, Namespace: w.Namespace, Name: w.Name, Object: w.Object,
		Mapping: &meta.RESTMapping{Resource: gvr, GroupVersionKind: gvk, Scope: meta.RESTScopeNamespace},
	}
	return w
}

// TestApplyThroughHelper: every kind is patched through its own mapping (no kind switch), as
// a strategic merge patch under livesync's field manager, dryRun=All with --dry-run.
func TestApplyThroughHelper(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "y:1"}}}}
	cases := []struct {
		name     string
		w        *Workload
		gvr      schema.GroupVersionResource
		dryRun   bool
		wantPath string
		query    string
	}{
		{"deployment", mustWorkload(t, testDeployment()), schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, false,
			"/namespaces/ns/deployments/web", "fieldManager=kubectl-livesync"},
		{"pod, dry run", mustWorkloadOf(t, pod), schema.GroupVersionResource{Version: "v1", Resource: "pods"}, true,
			"/namespaces/ns/pods/p", "dryRun=All&fieldManager=kubectl-livesync"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []request
			w := resolved(t, tc.w, tc.gvr, http.StatusOK, &got)
			cs, _ := w.Containers(nil)
			p, err := BuildPatch(w, []Change{{Container: cs[0], Image: "x:2"}}, false)
			if err != nil {
				t.Fatal(err)
			}
			if err := Apply(p, tc.dryRun); err != nil {
				t.Fatal(err)
			}
			want := []request{{http.MethodPatch, tc.wantPath, tc.query, "application/strategic-merge-patch+json", string(p.Data)}}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("requests:\n %+v\nwant\n %+v", got, want)
			}
		})
	}
}

func TestApplyRefusesAndExplains(t *testing.T) {
	w := mustWorkload(t, testDeployment())
	cs, _ := w.Containers(nil)
	p, err := BuildPatch(w, []Change{{Container: cs[1], Image: "x:2"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	// Built from an object alone (as the pods -l selects are): nothing to patch through.
	if err := Apply(p, false); err == nil || !strings.Contains(err.Error(), "patching deployment/web: it is not one object read from the API server") {
		t.Errorf("unresolved workload: %v", err)
	}
	var got []request
	resolved(t, w, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, http.StatusForbidden, &got)
	err = Apply(p, false)
	if err == nil || !strings.Contains(err.Error(), `patching deployment/web: forbidden: you need the "patch" verb on deployments.apps in namespace "ns"`) {
		t.Errorf("forbidden: %v", err)
	}
}

// TestPodTargets: a bare Pod's changed containers are waited for from the container IDs they
// run now; an unchanged image, an init container's running state and other kinds are not.
func TestPodTargets(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "i", Image: "x:1"}},
			Containers:     []corev1.Container{{Name: "c", Image: "y:1"}, {Name: "d", Image: "z:1"}},
		},
		Status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "i", ContainerID: "containerd://i1", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "c", ContainerID: "containerd://c1", State: running}, {Name: "d", ContainerID: "containerd://d1", State: running}},
		},
	}
	client := fake.NewClientset(pod)
	w := mustWorkloadOf(t, pod)
	cs, _ := w.Containers(nil)
	changes := []Change{
		{Container: cs[0], Image: "x:2"},
		{Container: cs[1], Image: "y:2"},
		{Container: cs[2], PullPolicy: "Always"},
	}
	got, err := PodTargets(context.Background(), client, w, changes, map[string]string{"c": "sha256:c"})
	if err != nil {
		t.Fatal(err)
	}
	want := []PodTarget{
		{Container: "i", Init: true},
		{Container: "c", OldID: "containerd://c1", Digest: "sha256:c", WantRunning: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("targets = %+v, want %+v", got, want)
	}
	if got, err := PodTargets(context.Background(), client, mustWorkload(t, testDeployment()), changes, nil); got != nil || err != nil {
		t.Errorf("deployment targets = %+v, %v; want none: it rolls out", got, err)
	}
	if _, err := PodTargets(context.Background(), fake.NewClientset(), w, changes, nil); err == nil || !strings.Contains(err.Error(), `reading pod "p"`) {
		t.Errorf("missing pod: %v", err)
	}
}
