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
	"k8s.io/apimachinery/pkg/runtime"
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
)

// imageCluster is a fake cluster for the image commands: one fake clientset behind both the
// typed client and the resource builder, and the command's stdout.
type imageCluster struct {
	g      *globalOptions
	client *fake.Clientset
	out    *bytes.Buffer
}

func newImageCluster(objs ...runtime.Object) *imageCluster {
	for i := range objs {
		objs[i] = objs[i].DeepCopyObject()
	}
	client := fake.NewClientset(objs...)
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	g := &globalOptions{
		configFlags: genericclioptions.NewConfigFlags(false),
		IOStreams:   streams,
		namespace:   "apps",
		client:      client,
		builder:     clientsetBuilder(client),
	}
	return &imageCluster{g: g, client: client, out: out}
}

// execute runs args through the root command, against a kubeconfig whose context defaults to
// namespace apps.
func (c *imageCluster) execute(t *testing.T, args ...string) error {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	root := newCmdRoot(c.g)
	root.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	return root.ExecuteContext(context.Background())
}

// deployment returns deployment apps/web as the cluster has it now.
func (c *imageCluster) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	d, err := c.client.AppsV1().Deployments("apps").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// runImageCommand runs one command against a fake cluster holding d and returns stdout, the
// deployment afterwards, the patches the command sent and its error.
func runImageCommand(t *testing.T, d *appsv1.Deployment, args ...string) (string, *appsv1.Deployment, []k8stesting.PatchActionImpl, error) {
	t.Helper()
	c := newImageCluster(d)
	err := c.execute(t, args...)
	return c.out.String(), c.deployment(t), patchesOf(c.client), err
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
