package workload

import (
	"io"
	"net/http"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	restfake "k8s.io/client-go/rest/fake"
	"k8s.io/kubectl/pkg/scheme"
)

// TestApplyRebasesOverStatusWrites: a conflict from a write that left the patched containers
// and the record alone (a controller's status update right after a rollout) moves the patch
// onto the new resourceVersion; a conflict from a change to what the patch was built from
// fails with the one-line error and is not retried.
func TestApplyRebasesOverStatusWrites(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(d *appsv1.Deployment)
		patches int
		wantErr string
	}{
		{"status only", func(d *appsv1.Deployment) { d.Status.ObservedGeneration = 7 }, 2, ""},
		{"image changed", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "example.com/app:other" }, 1,
			"patching deployment/web: it changed while livesync was reading it; run the command again"},
		{"record changed", func(d *appsv1.Deployment) {
			d.Annotations = map[string]string{OriginalAnnotation: `{"app":{"image":"x","imagePullPolicy":"Always"}}`}
		}, 1, "patching deployment/web: it changed while livesync was reading it; run the command again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := mustWorkload(t, testDeployment())
			server := testDeployment()
			server.ResourceVersion = "43"
			tc.change(server)
			gv := schema.GroupVersion{Group: "apps", Version: "v1"}
			var patches []string
			client := &restfake.RESTClient{
				GroupVersion:         gv,
				NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
				Client: restfake.CreateHTTPClient(func(req *http.Request) (*http.Response, error) {
					h := http.Header{"Content-Type": []string{runtime.ContentTypeJSON}}
					respond := func(code int, body string) (*http.Response, error) {
						return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader(body))}, nil
					}
					if req.Method == http.MethodGet {
						out, err := runtime.Encode(scheme.Codecs.LegacyCodec(gv), server)
						if err != nil {
							return nil, err
						}
						return respond(http.StatusOK, string(out))
					}
					b, _ := io.ReadAll(req.Body)
					patches = append(patches, string(b))
					if !strings.Contains(string(b), `"resourceVersion":"43"`) {
						return respond(http.StatusConflict, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","message":"the object has been modified","code":409}`)
					}
					return respond(http.StatusOK, `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"ns"}}`)
				}),
			}
			w.Info = &resource.Info{Client: client, Namespace: "ns", Name: "web", Object: w.Object,
				Mapping: &meta.RESTMapping{Resource: gv.WithResource("deployments"), GroupVersionKind: gv.WithKind("Deployment"), Scope: meta.RESTScopeNamespace}}
			cs, _ := w.Containers([]string{"app"})
			p, err := BuildPatch(w, []Change{{Container: cs[0], PullPolicy: "Always"}}, false)
			if err != nil {
				t.Fatal(err)
			}
			err = Apply(p, false)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Fatalf("Apply: %v, want %q", err, tc.wantErr)
			}
			if len(patches) != tc.patches {
				t.Fatalf("%d patches sent, want %d: %q", len(patches), tc.patches, patches)
			}
			if tc.wantErr == "" && w.ResourceVersion != "43" {
				t.Fatalf("resourceVersion %q after the rebase", w.ResourceVersion)
			}
		})
	}
}
