//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// TestBadInput: every bad input gets one clear line on stderr, a non-zero exit, and the
// workload is left exactly as it was.
func TestBadInput(t *testing.T) {
	ns := namespace(t)
	repo := "bad-" + ns
	pushImage(t, repo, "dev", "app")
	rv := deployment(t, ns, "web", image(repo, "dev"), 1, corev1.PullIfNotPresent).ResourceVersion
	ctx := context.Background()
	if _, err := e.client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "svc"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, ClusterIP: corev1.ClusterIPNone},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Workloads whose registry cannot answer.
	deployment(t, ns, "unreachable", image(repo, "dev"), 1, corev1.PullIfNotPresent)
	patchImage(t, ns, "unreachable", "127.0.0.1:1/nothing:dev")

	// want is the whole class of the error: what failed and the fix docs/troubleshooting.md promises.
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"workload not found", []string{"refresh", "deploy/nope"}, []string{`deployment "nope" not found in namespace "` + ns + `": check the name, or pass -n NAMESPACE`}},
		{"pod not found", []string{"inspect", "nope"}, []string{`pod "nope" not found in namespace "` + ns + `": check the name, or pass -n NAMESPACE`}},
		{"kind without pod template", []string{"refresh", "svc/svc"}, []string{"service has no pod template: use a deployment, statefulset, daemonset, replicaset or pod"}},
		{"missing container", []string{"refresh", "deploy/web", "-c", "nope"}, []string{`container "nope" not found in deployment/web: it has app`}},
		{"invalid pull policy", []string{"pull-policy", "deploy/web", "Sometimes"}, []string{`invalid image pull policy "Sometimes": use Always, IfNotPresent or Never`}},
		{"name and selector", []string{"refresh", "deploy/web", "-l", "app=web"}, []string{`both a name ("deploy/web") and -l "app=web" were given: use one of them`}},
		{"no workload", []string{"refresh"}, []string{"name a workload (e.g. deploy/my-app, pod/web-0, or a pod name) or pass -l SELECTOR"}},
		{"registry unreachable", []string{"refresh", "deploy/unreachable"}, []string{`registry "127.0.0.1:1" unreachable`, "check the address and your network"}},
		{"invalid output", []string{"inspect", "deploy/web", "-o", "xml"}, []string{`invalid output format "xml": use table, json or yaml`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := workloadSpecs(t, ns)
			r := livesync(t, append([]string{"-n", ns}, tc.args...)...)
			assertSpecsUnchanged(t, ns, before)
			for _, w := range tc.want {
				assertOneLineError(t, r, w)
			}
		})
	}
	if got := getDeployment(t, ns, "web").ResourceVersion; got != rv {
		t.Errorf("bad input changed the deployment: resourceVersion %s -> %s", rv, got)
	}

	t.Run("tag missing", func(t *testing.T) {
		deployment(t, ns, "missing", image(repo, "dev"), 1, corev1.PullIfNotPresent)
		patchImage(t, ns, "missing", image(repo, "never-pushed"))
		// Its pods are failing to pull, so the controller keeps writing status: compare the
		// spec's generation, not the resourceVersion.
		before := getDeployment(t, ns, "missing").Generation
		r := livesync(t, "-n", ns, "refresh", "deploy/missing")
		assertOneLineError(t, r, `tag "never-pushed" not found in `+e.registry+"/"+repo+": push it, or check the image name")
		if after := getDeployment(t, ns, "missing"); after.Generation != before || after.Annotations[originalAnnotation] != "" {
			t.Errorf("refresh of a missing tag changed the deployment")
		}
		rep := inspectJSON(t, "-n", ns, "deploy/missing")
		if c := rep.Containers[0]; c.Verdict != "unknown" || c.RegistryError == "" {
			t.Errorf("inspect of a missing tag: verdict %q, registryError %q", c.Verdict, c.RegistryError)
		}
	})

	t.Run("rbac forbids the patch", func(t *testing.T) {
		kubeconfig := readOnlyKubeconfig(t, ns)
		pushImage(t, repo, "dev", "app")
		before := getDeployment(t, ns, "web").ResourceVersion
		r := run(t, e.binary, "--kubeconfig", kubeconfig, "-n", ns, "refresh", "deploy/web")
		assertOneLineError(t, r, `"patch" verb on deployments.apps`)
		if getDeployment(t, ns, "web").ResourceVersion != before {
			t.Errorf("a forbidden refresh changed the deployment")
		}
		// Reading is allowed: inspect works with the same identity.
		if r := run(t, e.binary, "--kubeconfig", kubeconfig, "-n", ns, "inspect", "deploy/web"); r.code != 0 {
			t.Errorf("inspect as a read-only user: %s", r)
		}
	})

	t.Run("rollout cannot finish", func(t *testing.T) {
		brokenRepo := "broken-" + ns
		pushImage(t, brokenRepo, "dev", "app")
		deployment(t, ns, "broken", image(brokenRepo, "dev"), 1, corev1.PullIfNotPresent)
		// The new :dev's manifest resolves, but its layer was never uploaded: pulls fail.
		pushImage(t, brokenRepo, "dev", "app", "--broken")
		r := livesync(t, "-n", ns, "refresh", "deploy/broken", "--timeout", "40s")
		if r.code == 0 || !strings.Contains(r.stderr, "ImagePullBackOff") && !strings.Contains(r.stderr, "ErrImagePull") {
			t.Fatalf("want an error naming ImagePullBackOff: %s", r)
		}
	})
}

// workloadSpecs records, per deployment of ns, what a command could change: the spec's
// generation, the pod template's images and pull policies, and the recorded original.
// (Deployments whose pods fail to pull keep getting status writes: resourceVersion moves.)
func workloadSpecs(t *testing.T, ns string) map[string]string {
	t.Helper()
	list, err := e.client.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range list.Items {
		v := fmt.Sprintf("generation %d, original %q", d.Generation, d.Annotations[originalAnnotation])
		for _, c := range d.Spec.Template.Spec.Containers {
			v += fmt.Sprintf(", %s=%s (%s)", c.Name, c.Image, c.ImagePullPolicy)
		}
		out[d.Name] = v
	}
	return out
}

func assertSpecsUnchanged(t *testing.T, ns string, before map[string]string) {
	t.Helper()
	after := workloadSpecs(t, ns)
	for name, b := range before {
		if a := after[name]; a != b {
			t.Errorf("deployment %s changed: %s -> %s", name, b, a)
		}
	}
}

func assertOneLineError(t *testing.T, r result, want string) {
	t.Helper()
	if r.code == 0 {
		t.Fatalf("want a non-zero exit: %s", r)
	}
	msg := strings.TrimSpace(r.stderr)
	if strings.Count(msg, "\n") != 0 || !strings.HasPrefix(msg, "error: ") {
		t.Errorf("want one line starting with \"error: \": %s", r)
	}
	if !strings.Contains(msg, want) {
		t.Errorf("want %q in the error: %s", want, r)
	}
}

// patchImage points a deployment's container at another image without waiting.
func patchImage(t *testing.T, ns, name, img string) {
	t.Helper()
	d, err := e.client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = img
	if _, err := e.client.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// readOnlyKubeconfig writes a kubeconfig for a ServiceAccount that may read deployments and
// pods but not patch them, nor exec into pods.
func readOnlyKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	return roleKubeconfig(t, ns, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets", "daemonsets"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		},
	})
}

// roleKubeconfig creates the Role, a ServiceAccount of the same name bound to it, and writes a
// kubeconfig that authenticates as that ServiceAccount.
func roleKubeconfig(t *testing.T, ns string, role *rbacv1.Role) string {
	t.Helper()
	ctx := context.Background()
	c := e.client
	name := role.Name
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.LoadFromFile(e.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "c", AuthInfo: name, Namespace: ns}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
