package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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
		func() (meta.RESTMapper, error) { return mapper, nil },
		func() (restmapper.CategoryExpander, error) { return resource.FakeCategoryExpander, nil },
	)
}

// serve handles GET /namespaces/NS/RESOURCE[/NAME].
func (f *fakeCluster) serve(req *http.Request) (*http.Response, error) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var ns, res, name string
	for i := 0; i+2 < len(parts); i++ {
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
		return &http.Response{StatusCode: http.StatusNotFound, Header: jsonHeader(), Body: io.NopCloser(strings.NewReader(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","message":"not found","code":404}`))}, nil
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
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: http.StatusOK, Header: jsonHeader(), Body: io.NopCloser(bytes.NewReader(b))}, nil
}

func jsonHeader() http.Header {
	h := http.Header{}
	h.Set("Content-Type", runtime.ContentTypeJSON)
	return h
}

func deployment(ns, name string, containers ...string) *appsv1.Deployment {
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init-" + name, Image: "busybox"}}}},
		},
	}
	for _, c := range containers {
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
	}
	return d
}

func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
}

// complete runs `kubectl-livesync __complete args...` against a fake cluster whose kubeconfig
// context "dev" defaults to namespace "apps", and returns the candidates and the directive line.
func complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cluster := &fakeCluster{t: t, objs: []runtime.Object{
		deployment("apps", "web", "app", "sidecar"),
		deployment("apps", "worker", "app"),
		deployment("other", "api", "api"),
		pod("apps", "web-7d9f-abcde"),
		pod("apps", "worker-5c4b-fghij"),
	}}
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	g := &globalOptions{
		configFlags: genericclioptions.NewConfigFlags(false),
		IOStreams:   streams,
		client: fake.NewClientset(
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}},
		),
		builder: cluster.builder,
	}
	root := newCmdRoot(g)
	root.SetArgs(append([]string{"__complete", "--kubeconfig", kubeconfig}, args...))
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("__complete %q: %v", args, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	comps, directive := lines[:len(lines)-1], lines[len(lines)-1]
	for i, c := range comps {
		comps[i], _, _ = strings.Cut(c, "\t") // drop descriptions
	}
	return comps, directive
}

func TestComplete(t *testing.T) {
	// Directives: 4 no file completion, 6 also no space after the candidate, 0 shell default
	// (paths), 1 error.
	kinds := []string{"daemonset/", "deployment/", "pod/", "replicaset/", "statefulset/"}
	cases := []struct {
		name      string
		args      []string
		want      []string
		directive string
	}{
		{"subcommands, kinds and pods", []string{""},
			append(append([]string{"check", "completion", "help", "init", "inspect", "mcp", "pull-policy", "refresh", "restore", "version", "wait"}, kinds...), "web-7d9f-abcde", "worker-5c4b-fghij"), ":6"},
		{"subcommand prefix", []string{"pu"}, []string{"pull-policy"}, ":4"},
		{"kind prefix", []string{"inspect", "dep"}, []string{"deployment/"}, ":6"},
		{"bare pod names get a space", []string{"inspect", "wo"}, []string{"worker-5c4b-fghij"}, ":4"},
		{"names after KIND/", []string{"inspect", "deployment/w"}, []string{"deployment/web", "deployment/worker"}, ":4"},
		{"names after KIND/ in -n", []string{"refresh", "-n", "other", "deployment/"}, []string{"deployment/api"}, ":4"},
		{"names after TYPE NAME", []string{"restore", "deployment", "we"}, []string{"web"}, ":4"},
		{"unknown kind", []string{"inspect", "secret/"}, nil, ":4"},
		{"nothing after the workload", []string{"inspect", "deployment/web", ""}, nil, ":4"},
		{"pull policies after the workload", []string{"pull-policy", "deployment/web", ""}, []string{"Always", "IfNotPresent", "Never"}, ":4"},
		{"pull policies after TYPE NAME", []string{"pull-policy", "deployment", "web", "I"}, []string{"IfNotPresent"}, ":4"},
		{"type or policy after -l", []string{"pull-policy", "-l", "app=web", ""}, []string{"daemonset", "deployment", "pod", "replicaset", "statefulset", "Always", "IfNotPresent", "Never"}, ":4"},
		{"local paths after the sync workload", []string{"deployment/web", ""}, nil, ":0"},
		{"local paths after a mapping", []string{"deployment/web", "./src:/app", ""}, nil, ":0"},
		{"containers, init included", []string{"inspect", "deployment/web", "-c", ""}, []string{"init-web", "app", "sidecar"}, ":4"},
		{"containers of TYPE NAME", []string{"refresh", "deployment", "worker", "-c", ""}, []string{"init-worker", "app"}, ":4"},
		{"containers of the sync workload", []string{"deployment/web", "./src:/app", "-c", "s"}, []string{"sidecar"}, ":4"},
		{"containers of a bare pod", []string{"inspect", "web-7d9f-abcde", "-c", ""}, []string{"main"}, ":4"},
		{"no containers without a workload", []string{"inspect", "-c", ""}, nil, ":4"},
		{"no containers of a missing workload", []string{"inspect", "deployment/nope", "-c", ""}, nil, ":4"},
		{"namespaces", []string{"-n", ""}, []string{"apps", "kube-system", "other"}, ":4"},
		{"namespaces by prefix", []string{"inspect", "--namespace", "o"}, []string{"other"}, ":4"},
		{"contexts from the kubeconfig", []string{"--context", ""}, []string{"dev", "prod"}, ":4"},
		{"clusters", []string{"--cluster", "p"}, []string{"prod"}, ":4"},
		{"users", []string{"--user", ""}, []string{"alice"}, ":4"},
		{"inspect formats", []string{"inspect", "-o", ""}, []string{"table", "json", "yaml"}, ":4"},
		{"version formats", []string{"version", "-o", ""}, []string{"json"}, ":4"},
		{"shells", []string{"completion", ""}, []string{"bash", "zsh", "fish", "powershell"}, ":4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, directive := complete(t, tc.args...)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") || directive != tc.directive {
				t.Errorf("__complete %q = %q %s, want %q %s", tc.args, got, directive, tc.want, tc.directive)
			}
		})
	}
}

func TestCompletionScripts(t *testing.T) {
	// Each script must register for the binary's name, not for "livesync", and ask it for
	// completions through __complete.
	want := map[string]string{
		"bash":       "complete -o default -F __start_kubectl-livesync kubectl-livesync",
		"zsh":        "#compdef kubectl-livesync",
		"fish":       "complete -c kubectl-livesync",
		"powershell": "Register-ArgumentCompleter -CommandName 'kubectl-livesync'",
	}
	for shell, line := range want {
		t.Run(shell, func(t *testing.T) {
			out, _, err := execute(t, "completion", shell)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, line) || !strings.Contains(out, "__complete") {
				t.Errorf("completion %s lacks %q or __complete:\n%.400s", shell, line, out)
			}
		})
	}
	if _, _, err := execute(t, "completion", "tcsh"); err == nil || !strings.Contains(err.Error(), "invalid argument") {
		t.Errorf("completion tcsh: err = %v", err)
	}
	// The root keeps its name afterwards: help still says kubectl livesync.
	out, _, _ := execute(t, "--help")
	if !strings.Contains(out, "kubectl livesync") {
		t.Errorf("help after completion lost the display name")
	}
}
