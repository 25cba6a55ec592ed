//go:build e2e

// Package e2e drives the built kubectl-livesync binary, as a user would, against a real
// cluster: the local one hack/e2e.sh brings up, or any cluster named by KUBECONFIG together
// with LIVESYNC_E2E_REGISTRY (a registry that both this machine and the nodes reach).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// env is what the suite needs from its environment.
type env struct {
	kubeconfig string
	registry   string // host[:port] as both this machine and the nodes reach it
	binary     string // kubectl-livesync under test
	kubectl    string // a real kubectl, for plugin discovery ("" skips nothing: the test fails)
	lcimage    string // image builder/pusher from hack/localcluster
	helm       string // the Helm 4 CLI from hack/tools ("" until a test needs it)
	reconciler string // lcreconcile from hack/tools, a GitOps reconciler stand-in
	client     kubernetes.Interface
}

var e env

func TestMain(m *testing.M) {
	// Sessions started directly (livesync, promises) keep their saved state here, not in the
	// user's cache; sessiontest gives each of its sessions a directory of its own.
	state, err := os.MkdirTemp("", "livesync-e2e-state-")
	if err == nil {
		err = os.Setenv("XDG_STATE_HOME", state)
	}
	if err == nil {
		err = setup()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(state)
	os.Exit(code)
}

func setup() error {
	e.kubeconfig = os.Getenv("KUBECONFIG")
	e.registry = os.Getenv("LIVESYNC_E2E_REGISTRY")
	if e.kubeconfig == "" || e.registry == "" {
		return fmt.Errorf("KUBECONFIG and LIVESYNC_E2E_REGISTRY must be set (hack/e2e.sh sets them for the local cluster)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	e.binary = envOr("LIVESYNC_BINARY", filepath.Join(root, "bin/kubectl-livesync"))
	e.kubectl = os.Getenv("LIVESYNC_KUBECTL")
	e.lcimage = os.Getenv("LIVESYNC_LCIMAGE")
	e.helm, e.reconciler = os.Getenv("LIVESYNC_HELM"), os.Getenv("LIVESYNC_RECONCILER")
	for _, p := range []string{e.binary, e.kubectl, e.lcimage} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("need LIVESYNC_BINARY, LIVESYNC_KUBECTL and LIVESYNC_LCIMAGE: %w", err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		return err
	}
	e.client, err = kubernetes.NewForConfig(cfg)
	return err
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// result is one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// roleKubeconfigs maps each test namespace to a kubeconfig of a ServiceAccount bound to
// docs/rbac.yaml alone there: docs/rbac.md promises that Role is enough for every command, so the
// suite runs the binary as that user. Setup and independent checks use the admin kubeconfig.
var roleKubeconfigs sync.Map

// kubeconfigFor returns the kubeconfig to run kubectl-livesync args with: the documented
// Role's when args name a test namespace (-n), else the admin's.
func kubeconfigFor(args []string) string {
	for i, a := range args {
		var ns string
		switch {
		case (a == "-n" || a == "--namespace") && i+1 < len(args):
			ns = args[i+1]
		case strings.HasPrefix(a, "--namespace="):
			ns = strings.TrimPrefix(a, "--namespace=")
		case strings.HasPrefix(a, "-n") && len(a) > 2 && !strings.HasPrefix(a, "--"):
			ns = strings.TrimPrefix(strings.TrimPrefix(a, "-n"), "=")
		default:
			continue
		}
		if kc, ok := roleKubeconfigs.Load(ns); ok {
			return kc.(string)
		}
	}
	return e.kubeconfig
}

// livesync runs kubectl-livesync as the user of the documented Role in the namespace args name
// (see kubeconfigFor).
func livesync(t *testing.T, args ...string) result {
	t.Helper()
	return run(t, e.binary, append([]string{"--kubeconfig", kubeconfigFor(args)}, args...)...)
}

// mustLivesync runs kubectl-livesync and fails the test on a non-zero exit.
func mustLivesync(t *testing.T, args ...string) result {
	t.Helper()
	r := livesync(t, args...)
	if r.code != 0 {
		t.Fatalf("kubectl-livesync %s: %s", strings.Join(args, " "), r)
	}
	return r
}

func run(t *testing.T, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if err != nil {
		var ee *exec.ExitError
		if !asExit(err, &ee) {
			t.Fatalf("running %s %v: %v", bin, args, err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

func asExit(err error, ee **exec.ExitError) bool {
	return errors.As(err, ee)
}

// pushImage builds an image of the given kind ("app", "app-gnu", "app-notar", "app-nodd", "app-nonroot") with a
// marker that makes its digest unique, pushes it as repo:tag and returns the digest.
func pushImage(t *testing.T, repo, tag, kind string, extra ...string) string {
	t.Helper()
	marker := fmt.Sprintf("%s-%d", t.Name(), rand.Int64())
	args := append([]string{"build", "--registry", e.registry, "--kind", kind, "--marker", marker}, extra...)
	args = append(args, repo+":"+tag)
	r := run(t, e.lcimage, args...)
	if r.code != 0 {
		t.Fatalf("pushing %s:%s: %s", repo, tag, r)
	}
	d := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(d, "sha256:") {
		t.Fatalf("pushing %s:%s printed no digest: %s", repo, tag, r)
	}
	return d
}

// image returns the full reference of a repository in the suite's registry.
func image(repo, tag string) string { return e.registry + "/" + repo + ":" + tag }

// namespace creates a namespace for one test and deletes it when the test ends.
func namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("e2e-%s-%04d", strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())), rand.IntN(10000))
	if len(name) > 63 {
		name = name[len(name)-63:]
		name = strings.TrimLeft(name, "-")
	}
	ctx := context.Background()
	_, err := e.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	// Pods are rejected until the namespace's default ServiceAccount exists.
	waitFor(t, "default ServiceAccount in "+name, time.Minute, func() (bool, error) {
		_, err := e.client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	t.Cleanup(func() {
		roleKubeconfigs.Delete(name)
		zero := int64(0)
		_ = e.client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	roleKubeconfigs.Store(name, roleKubeconfig(t, name, documentedRole(t)))
	return name
}

// podSpec is a one-container spec running img.
func podSpec(img string, policy corev1.PullPolicy) corev1.PodSpec {
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers: []corev1.Container{{
			Name: "app", Image: img, ImagePullPolicy: policy,
		}},
	}
}

func labelsFor(name string) map[string]string { return map[string]string{"app": name} }

// deployment creates a Deployment and waits until its pods are available.
func deployment(t *testing.T, ns, name, img string, replicas int32, policy corev1.PullPolicy) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor(name)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)},
				Spec:       podSpec(img, policy),
			},
		},
	}
	ctx := context.Background()
	if _, err := e.client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment: %v", err)
	}
	waitDeploymentReady(t, ns, name)
	return getDeployment(t, ns, name)
}

func getDeployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := e.client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting deployment: %v", err)
	}
	return d
}

func waitDeploymentReady(t *testing.T, ns, name string) {
	t.Helper()
	waitFor(t, "deployment "+name+" available", 2*time.Minute, func() (bool, error) {
		d, err := e.client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want := *d.Spec.Replicas
		s := d.Status
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want, nil
	})
}

// settle waits until a deployment is available and its old pods are gone, so the controller
// has nothing left to write and the resourceVersion stays put.
func settle(t *testing.T, ns, name string) {
	t.Helper()
	waitDeploymentReady(t, ns, name)
	want := int(*getDeployment(t, ns, name).Spec.Replicas)
	waitFor(t, "old pods of "+name+" gone", 2*time.Minute, func() (bool, error) {
		list, err := e.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + name})
		return err == nil && len(list.Items) == want, err
	})
	waitDeploymentReady(t, ns, name)
}

// runningPods lists the pods matching the selector that are not terminating.
func runningPods(t *testing.T, ns, selector string) []corev1.Pod {
	t.Helper()
	list, err := e.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// waitFor polls cond every 250ms until it holds, failing the test after timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond()
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// inspectReport is the documented JSON of `inspect -o json` (a subset the tests read).
type inspectReport struct {
	Workload struct {
		Kind, Namespace, Name string
	} `json:"workload"`
	Containers []struct {
		Name                string `json:"name"`
		Init                bool   `json:"init"`
		Image               string `json:"image"`
		Tag                 string `json:"tag"`
		PinnedDigest        string `json:"pinnedDigest"`
		PullPolicy          string `json:"pullPolicy"`
		EffectivePullPolicy string `json:"effectivePullPolicy"`
		RegistryDigest      string `json:"registryDigest"`
		RegistryError       string `json:"registryError"`
		Verdict             string `json:"verdict"`
		Pods                []struct {
			Name, Node, Digest string
			Ready              bool
			Pull               string // how the image got onto the node: "pulled" or "already present"
		} `json:"pods"`
		Original *struct {
			Image           string `json:"image"`
			ImagePullPolicy string `json:"imagePullPolicy"`
		} `json:"original"`
		Managers map[string][]struct {
			Manager   string `json:"manager"`
			Operation string `json:"operation"`
		} `json:"managers"`
		Reverted []struct {
			Field   string `json:"field"`
			Manager string `json:"manager"`
		} `json:"reverted"`
	} `json:"containers"`
	Owner *struct {
		Tool       string `json:"tool"`
		Manager    string `json:"manager"`
		Reconciles bool   `json:"reconciles"`
	} `json:"owner"`
}

func inspectJSON(t *testing.T, args ...string) inspectReport {
	t.Helper()
	r := mustLivesync(t, append([]string{"inspect", "-o", "json"}, args...)...)
	var rep inspectReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("inspect -o json printed invalid JSON: %v\n%s", err, r)
	}
	return rep
}
