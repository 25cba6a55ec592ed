package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes/fake"
	restfake "k8s.io/client-go/rest/fake"
	"k8s.io/client-go/restmapper"
	"k8s.io/kubectl/pkg/scheme"
)

// listBuilder returns a resource builder whose LISTs of pods and deployments answer with the
// objects of that kind that match the request's label selector.
func listBuilder(t *testing.T, objs ...runtime.Object) *resource.Builder {
	serve := func(req *http.Request) (*http.Response, error) {
		sel, err := labels.Parse(req.URL.Query().Get("labelSelector"))
		if err != nil {
			t.Errorf("request %s: %v", req.URL, err)
		}
		var list runtime.Object
		pods := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		deploys := &appsv1.DeploymentList{TypeMeta: metav1.TypeMeta{Kind: "DeploymentList", APIVersion: "apps/v1"}}
		switch {
		case strings.HasSuffix(req.URL.Path, "/pods"):
			list = pods
		case strings.HasSuffix(req.URL.Path, "/deployments"):
			list = deploys
		default:
			t.Errorf("unexpected request %s", req.URL)
		}
		for _, o := range objs {
			switch o := o.(type) {
			case *corev1.Pod:
				if sel.Matches(labels.Set(o.Labels)) {
					pods.Items = append(pods.Items, *o)
				}
			case *appsv1.Deployment:
				if sel.Matches(labels.Set(o.Labels)) {
					deploys.Items = append(deploys.Items, *o)
				}
			}
		}
		b, err := json.Marshal(list)
		if err != nil {
			return nil, err
		}
		h := http.Header{}
		h.Set("Content-Type", runtime.ContentTypeJSON)
		return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(bytes.NewReader(b))}, nil
	}
	mapper := testrestmapper.TestOnlyStaticRESTMapper(scheme.Scheme)
	return resource.NewFakeBuilder(
		func(gv schema.GroupVersion) (resource.RESTClient, error) {
			return &restfake.RESTClient{GroupVersion: gv, NegotiatedSerializer: scheme.Codecs.WithoutConversion(), Client: restfake.CreateHTTPClient(serve)}, nil
		},
		func() (meta.RESTMapper, error) { return mapper, nil },
		func() (restmapper.CategoryExpander, error) { return resource.FakeCategoryExpander, nil },
	)
}

func labelledPod(name, app string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": app}}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
	}
	return p
}

// runningIn returns p with its first container running.
func runningIn(p *corev1.Pod) *corev1.Pod {
	p.Status = runningPod(p.Name, "c://"+p.Name).Status
	p.Status.ContainerStatuses[0].Name = p.Spec.Containers[0].Name
	return p
}

func labelledDeployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"tier": "front"}},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
	}
}

// TestResolveTarget: -l without a TYPE is a selector target unless it picks exactly one pod;
// with a TYPE it must pick one workload.
func TestResolveTarget(t *testing.T) {
	objs := []runtime.Object{
		labelledPod("web-1", "web", "side", "app"), labelledPod("web-2", "web", "app"), labelledPod("db-0", "db", "db"),
		labelledDeployment("web"), labelledDeployment("api"),
	}
	for _, tt := range []struct {
		name, selector string
		args           []string
		ref            string
		containers     string // the spec's containers
		wantErr        string
	}{
		{name: "no pod yet", selector: "app=later", ref: "pods/app=later"},
		{name: "one pod", selector: "app=db", ref: "pod/db-0", containers: "db"},
		{name: "several pods", selector: "app=web", ref: "pods/app=web", containers: "side,app"},
		{name: "several deployments", args: []string{"deployments"}, selector: "tier=front,app!=x", wantErr: `-l "tier=front,app!=x" matches 2 workloads (deployment/web, deployment/api): sync one at a time`},
		{name: "no deployment", args: []string{"deployments"}, selector: "tier=back", wantErr: `nothing matches: no deployments match -l "tier=back" in namespace "ns"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, err := ResolveTarget(listBuilder(t, objs...), "ns", tt.args, tt.selector)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("error = %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range w.Spec.Containers {
				names = append(names, c.Name)
			}
			if w.Ref() != tt.ref || strings.Join(names, ",") != tt.containers || w.Namespace != "ns" {
				t.Errorf("got %s in %q with containers %q, want %s with %q", w.Ref(), w.Namespace, names, tt.ref, tt.containers)
			}
		})
	}
}

// TestTrackerFollowsSelector: a selector target's pods are the ones its selector picks; with
// none the wait names the selector, and each pod that comes gets its default container synced.
func TestTrackerFollowsSelector(t *testing.T) {
	// The fake clientset filters lists by label but not watches: the pod of another app is
	// there from the start.
	client := fake.NewClientset(runningIn(labelledPod("db-0", "db", "db")))
	w := ForSelector("ns", labels.SelectorFromSet(labels.Set{"app": "web"}))
	sink, rep := recordingSink(make(chan string, 16)), recordingReporter(make(chan string, 16))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&Tracker{Client: client, Workload: w, Sink: sink, Reporter: rep}).Run(ctx, nil)
	if got := rep.next(t); got != "waiting pods/app=web NoPods" {
		t.Fatalf("first report %q", got)
	}
	if why := NoPodsReason(ctx, client, w); why.Message != `no pod matches the selector app=web in namespace "ns" yet` {
		t.Errorf("no pods: %q", why.Message)
	}
	if _, err := client.CoreV1().Pods("ns").Create(ctx, runningIn(labelledPod("web-1", "web", "app")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := sink.next(t); got != "add web-1 c://web-1" {
		t.Errorf("target %q, want web-1's default container", got)
	}
}
