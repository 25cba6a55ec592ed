package cmd

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes/fake"
	restfake "k8s.io/client-go/rest/fake"
	"k8s.io/client-go/restmapper"
	"k8s.io/kubectl/pkg/scheme"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster: {server: "https://127.0.0.1:1"}
- name: prod
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: alice
  user: {token: x}
contexts:
- name: dev
  context: {cluster: dev, user: alice, namespace: apps}
- name: prod
  context: {cluster: prod, user: alice}
current-context: dev
`

// fakeCluster answers the resource builder's GETs from objects, keyed by namespace.
type fakeCluster struct {
	t    *testing.T
	objs []runtime.Object
}

func (f *fakeCluster) builder() *resource.Builder {
	mapper := testrestmapper.TestOnlyStaticRESTMapper(scheme.Scheme)
	return resource.NewFakeBuilder(
		func(gv schema.GroupVersion) (resource.RESTClient, error) {
			return &restfake.RESTClient{
				GroupVersion:         gv,
				NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
				Client:               restfake.CreateHTTPClient(f.serve),
			}, nil
		},
		func() (meta RESTMapper, err error) { return mapper, nil },
		func() (restmapper.CategoryExpander, error) { return resource.FakeCategoryExpander, nil },
	)
}

// RESTMapper is the return type resource.NewFakeBuilder expects; named to keep the literal short.
type RESTMapper = interface {
	testrestmapperRESTMapper
}

// serve handles GET /namespaces/NS/RESOURCE[/NAME].
func (f *fakeCluster) serve(req *http.Request) (*http.Response, error) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var ns, res, name string
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "namespaces" {
			ns, res = parts[i+1], parts[i+2]
			if i+3 < len(parts) {
				name = parts[i+3]
			}
			break
		}
	}
	var items []runtime.Object
	for _, o := range f.objs {
		m, _ := meta.Accessor(o)
		kind := strings.ToLower(o.GetObjectKind().GroupVersionKind().Kind) + "s"
		if m.GetNamespace() == ns && kind == res && (name == "" || m.GetName() == name) {
			items = append(items, o)
		}
	}
	var body runtime.Object
	switch {
	case name != "" && len(items) == 1:
		body = items[0]
	case name != "":
		return &http.Response{StatusCode: http.StatusNotFound, Header: jsonHeader(), Body: io.NopCloser(strings.NewReader(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))}, nil
	case res == "pods":
		l := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		for _, o := range items {
			l.Items = append(l.Items, *o.(*corev1.Pod))
		}
		body = l
	default:
		l := &appsv1.DeploymentList{TypeMeta: metav1.TypeMeta{Kind: "DeploymentList", APIVersion: "apps/v1"}}
		for _, o := range items {
			l.Items = append(l.Items, *o.(*appsv1.Deployment))
		}
		body = l
	}
	var buf bytes.Buffer
	if err := scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion).Encode(body, &buf); err != nil {
		f.t.Fatal(err)
	}
	return &http.Response{StatusCode: http.StatusOK, Header: jsonHeader(), Body: io.NopCloser(&buf)}, nil
}
