package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes/fake"
	restfake "k8s.io/client-go/rest/fake"
	"k8s.io/client-go/restmapper"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/kubectl/pkg/scheme"

	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

const (
	devImage    = "127.0.0.1:1/app:dev"
	pinnedImage = "127.0.0.1:1/app:dev@sha256:0000000000000000000000000000000000000000000000000000000000000001"
	userImage   = "127.0.0.1:1/app:v2"
	sideImage   = "127.0.0.1:1/side:dev"
	sidePinned  = "127.0.0.1:1/side:dev@sha256:0000000000000000000000000000000000000000000000000000000000000002"
)

// recorded is the annotation refresh writes after pinning app (and sidecar) to a digest.
const recorded = `{"app":{"image":"` + devImage + `","imagePullPolicy":"IfNotPresent","set":{"image":"` + pinnedImage + `","imagePullPolicy":"IfNotPresent"}},` +
	`"sidecar":{"image":"` + sideImage + `","imagePullPolicy":"IfNotPresent","set":{"image":"` + sidePinned + `","imagePullPolicy":"IfNotPresent"}}}`

// imageDeployment is deployment apps/web with containers app and sidecar at the given images
// (IfNotPresent) and the livesync annotation set to annotation ("" for none).
func imageDeployment(annotation, app, sidecar string) *appsv1.Deployment {
	d := deployment("apps", "web")
	d.Spec.Template.Spec.InitContainers = nil
	d.Spec.Template.Spec.Containers = []corev1.Container{
		{Name: "app", Image: app, ImagePullPolicy: corev1.PullIfNotPresent},
		{Name: "sidecar", Image: sidecar, ImagePullPolicy: corev1.PullIfNotPresent},
	}
	if annotation != "" {
		d.Annotations = map[string]string{workload.OriginalAnnotation: annotation}
	}
	return d
}

// runImageCommand runs one command against a fake cluster holding d and returns stdout, the
// deployment afterwards, the patches the command sent and its error.
func runImageCommand(t *testing.T, d *appsv1.Deployment, args ...string) (string, *appsv1.Deployment, []k8stesting.PatchActionImpl, error) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(d.DeepCopy())
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	g := &globalOptions{
		configFlags: genericclioptions.NewConfigFlags(false),
		IOStreams:   streams,
		client:      client,
		builder:     clientsetBuilder(client),
	}
	root := newCmdRoot(g)
	root.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	err := root.ExecuteContext(context.Background())
	after, gerr := client.AppsV1().Deployments("apps").Get(context.Background(), "web", metav1.GetOptions{})
	if gerr != nil {
		t.Fatal(gerr)
	}
	return out.String(), after, patchesOf(client), err
}

// patchesOf returns the patches the client received.
func patchesOf(client *fake.Clientset) []k8stesting.PatchActionImpl {
	var patches []k8stesting.PatchActionImpl
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchActionImpl); ok {
			patches = append(patches, p)
		}
	}
	return patches
}

// clientsetBuilder returns a resource builder whose REST clients serve GET and PATCH from the
// fake clientset's tracker, so what the builder resolves and what resource.Helper patches is
// what the typed client sees, and each patch is one of the client's actions.
func clientsetBuilder(client *fake.Clientset) func() *resource.Builder {
	// Only the versions a current API server prefers: the tracker keeps deployments under apps/v1.
	mapper := testrestmapper.TestOnlyStaticRESTMapper(scheme.Scheme, appsv1.SchemeGroupVersion, corev1.SchemeGroupVersion)
	return func() *resource.Builder {
		return resource.NewFakeBuilder(
			func(gv schema.GroupVersion) (resource.RESTClient, error) {
				return &restfake.RESTClient{
					GroupVersion:         gv,
					NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
					Client:               restfake.CreateHTTPClient(func(req *http.Request) (*http.Response, error) { return serveTracker(client, mapper, gv, req) }),
				}, nil
			},
			func() (meta.RESTMapper, error) { return mapper, nil },
			func() (restmapper.CategoryExpander, error) { return resource.FakeCategoryExpander, nil },
		)
	}
}

// serveTracker answers GET and PATCH of /namespaces/NS/RESOURCE[/NAME] through client.Invokes.
func serveTracker(client *fake.Clientset, mapper meta.RESTMapper, gv schema.GroupVersion, req *http.Request) (*http.Response, error) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	i := slices.Index(parts, "namespaces")
	if i < 0 || i+2 >= len(parts) {
		return nil, fmt.Errorf("unexpected request %s %s", req.Method, req.URL)
	}
	ns, gvr, name := parts[i+1], gv.WithResource(parts[i+2]), ""
	if i+3 < len(parts) {
		name = parts[i+3]
	}
	var action k8stesting.Action
	switch {
	case req.Method == http.MethodGet && name != "":
		action = k8stesting.NewGetAction(gvr, ns, name)
	case req.Method == http.MethodGet:
		gvk, err := mapper.KindFor(gvr)
		if err != nil {
			return nil, err
		}
		action = k8stesting.NewListAction(gvr, gvk, ns, metav1.ListOptions{})
	case req.Method == http.MethodPatch:
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		q := req.URL.Query()
		opts := metav1.PatchOptions{DryRun: q["dryRun"], FieldManager: q.Get("fieldManager")}
		action = k8stesting.NewPatchActionWithOptions(gvr, ns, name, types.PatchType(req.Header.Get("Content-Type")), body, opts)
	default:
		return nil, fmt.Errorf("unexpected request %s %s", req.Method, req.URL)
	}
	obj, err := client.Invokes(action, nil)
	code := http.StatusOK
	if status, ok := err.(apierrors.APIStatus); ok {
		s := status.Status()
		obj, code = &s, int(s.Code)
	} else if err != nil {
		return nil, err
	}
	if gvks, _, err := scheme.Scheme.ObjectKinds(obj); err == nil {
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: code, Header: jsonHeader(), Body: io.NopCloser(bytes.NewReader(b))}, nil
}

func images(d *appsv1.Deployment) []string {
	var out []string
	for _, c := range d.Spec.Template.Spec.Containers {
		out = append(out, c.Image)
	}
	return out
}

// TestRestoreLeavesWhatSomeoneElseChanged: after refresh pinned app and sidecar, someone ran
// `kubectl set image deploy/web app=app:v2`. restore puts sidecar back, leaves app as the user
// set it with one line saying so, keeps app's record for --force, and exits 0; --force puts
// app back too; --dry-run shows the same decisions and persists nothing.
func TestRestoreLeavesWhatSomeoneElseChanged(t *testing.T) {
	skipLine := `deployment/web: container "app": image changed since livesync pinned it (now ` + userImage + `); left as is, use --force to restore ` + devImage + ` anyway`
	cases := []struct {
		name       string
		args       []string
		wantOut    []string
		wantImages []string
		// wantRecord is the annotation after the command; "" means removed.
		wantRecord string
		dryRun     bool
	}{
		{
			name:       "changed container left, other restored",
			args:       []string{"restore", "deployment/web", "--no-wait"},
			wantOut:    []string{skipLine, `deployment/web: container "sidecar": image ` + sidePinned + ` -> ` + sideImage},
			wantImages: []string{userImage, sideImage},
			wantRecord: `{"app":{"image":"` + devImage + `","imagePullPolicy":"IfNotPresent","set":{"image":"` + pinnedImage + `","imagePullPolicy":"IfNotPresent"}}}`,
		},
		{
			name: "force",
			args: []string{"restore", "deployment/web", "--no-wait", "--force"},
			wantOut: []string{
				`deployment/web: container "app": image changed since livesync pinned it (now ` + userImage + `); restoring anyway (--force)`,
				`deployment/web: container "app": image ` + userImage + ` -> ` + devImage,
				`deployment/web: container "sidecar": image ` + sidePinned + ` -> ` + sideImage,
			},
			wantImages: []string{devImage, sideImage},
		},
		{
			name:    "dry run",
			args:    []string{"restore", "deployment/web", "--dry-run"},
			wantOut: []string{skipLine, `deployment/web: container "sidecar": image ` + sidePinned + ` -> ` + sideImage, "dry run, nothing changed"},
			dryRun:  true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := imageDeployment(recorded, userImage, sidePinned)
			out, after, patches, err := runImageCommand(t, d, tc.args...)
			if err != nil {
				t.Fatalf("restore: %v\n%s", err, out)
			}
			for _, want := range tc.wantOut {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if tc.dryRun {
				for _, p := range patches {
					if len(p.PatchOptions.DryRun) == 0 {
						t.Errorf("--dry-run sent a real patch: %s", p.GetPatch())
					}
				}
				return
			}
			if got := strings.Join(images(after), " "); got != strings.Join(tc.wantImages, " ") {
				t.Errorf("images after restore = %s, want %s", got, strings.Join(tc.wantImages, " "))
			}
			if got := after.Annotations[workload.OriginalAnnotation]; got != tc.wantRecord {
				t.Errorf("annotation after restore = %q, want %q", got, tc.wantRecord)
			}
		})
	}

	// Nothing restorable: no patch at all, the record stays whole, exit 0.
	d := imageDeployment(`{"app":{"image":"`+devImage+`","imagePullPolicy":"IfNotPresent","set":{"image":"`+pinnedImage+`","imagePullPolicy":"IfNotPresent"}}}`, userImage, sideImage)
	out, after, patches, err := runImageCommand(t, d, "restore", "deployment/web")
	if err != nil || len(patches) != 0 || after.Annotations[workload.OriginalAnnotation] != d.Annotations[workload.OriginalAnnotation] {
		t.Errorf("restore with only a changed container: err %v, %d patches, annotation %q", err, len(patches), after.Annotations[workload.OriginalAnnotation])
	}
	if !strings.Contains(out, skipLine) || !strings.Contains(out, "nothing restored; the record is kept for restore --force") {
		t.Errorf("output:\n%s", out)
	}
}

// TestRestoreLegacyRecord: an annotation written before "set" existed still restores a
// digest-pinned form of the original tag, and treats any other image as someone else's.
func TestRestoreLegacyRecord(t *testing.T) {
	legacy := `{"app":{"image":"` + devImage + `","imagePullPolicy":"IfNotPresent"}}`
	_, after, _, err := runImageCommand(t, imageDeployment(legacy, pinnedImage, sideImage), "restore", "deployment/web", "--no-wait")
	if err != nil || images(after)[0] != devImage || after.Annotations[workload.OriginalAnnotation] != "" {
		t.Errorf("legacy record over a pinned form: err %v, images %q, annotation %q", err, images(after), after.Annotations[workload.OriginalAnnotation])
	}
	out, after, _, err := runImageCommand(t, imageDeployment(legacy, userImage, sideImage), "restore", "deployment/web", "--no-wait")
	if err != nil || images(after)[0] != userImage || after.Annotations[workload.OriginalAnnotation] != legacy || !strings.Contains(out, "left as is") {
		t.Errorf("legacy record under another tag: err %v, images %q, annotation %q\n%s", err, images(after), after.Annotations[workload.OriginalAnnotation], out)
	}
}

// TestMalformedRecordRefused: an annotation of the wrong shape ("null" left refresh and
// pull-policy writing into a nil map) is one error line for every command that writes or reads
// it, and nothing is patched.
func TestMalformedRecordRefused(t *testing.T) {
	for _, raw := range []string{"null", "[]", `"x"`, `{"app":null}`} {
		for _, args := range [][]string{
			{"restore", "deployment/web"},
			{"restore", "deployment/web", "--force"},
			{"pull-policy", "deployment/web", "Always"},
			{"refresh", "deployment/web"},
			{"inspect", "deployment/web"},
		} {
			t.Run(raw+" "+strings.Join(args, " "), func(t *testing.T) {
				_, after, patches, err := runImageCommand(t, imageDeployment(raw, pinnedImage, sideImage), args...)
				if err == nil || !strings.Contains(err.Error(), "annotation livesync.dev/original on deployment/web is not what livesync writes") ||
					!strings.Contains(err.Error(), "kubectl annotate -n apps deployment/web livesync.dev/original-") {
					t.Errorf("error = %v", err)
				}
				if err != nil && strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				if len(patches) != 0 || after.Annotations[workload.OriginalAnnotation] != raw {
					t.Errorf("refused command patched: %d patches, annotation %q", len(patches), after.Annotations[workload.OriginalAnnotation])
				}
			})
		}
	}
}
