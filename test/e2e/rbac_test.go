//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// documentedRole reads docs/rbac.yaml as users apply it.
func documentedRole(t *testing.T) *rbacv1.Role {
	t.Helper()
	raw, err := os.ReadFile("../../docs/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := yaml.UnmarshalStrict(raw, &role); err != nil {
		t.Fatalf("docs/rbac.yaml: %v", err)
	}
	return &role
}

// TestDocumentedRoleIsSufficient runs every command, a watching sync session included, as a
// user bound to docs/rbac.yaml and nothing else, and checks that each one did its work. (The
// whole suite runs as that user, see kubeconfigFor; this test walks through every command
// and checks that the identity really is restricted.)
func TestDocumentedRoleIsSufficient(t *testing.T) {
	ns := namespace(t)
	kubeconfig := kubeconfigFor([]string{"-n", ns})
	if kubeconfig == e.kubeconfig {
		t.Fatalf("no kubeconfig of the documented Role in %s", ns)
	}
	as := func(args ...string) result {
		t.Helper()
		r := run(t, e.binary, append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)...)
		if r.code != 0 {
			t.Fatalf("as the documented role, %s: %s", strings.Join(args, " "), r)
		}
		return r
	}
	// The identity is the Role's and no more: pods of another namespace are out of reach.
	if r := run(t, e.binary, "--kubeconfig", kubeconfig, "-n", "kube-system", "inspect", "-l", "e2e=none"); r.code == 0 || !strings.Contains(r.stderr, "forbidden") {
		t.Fatalf("the documented role may list pods in kube-system: %s", r)
	}

	repo := "rbac-" + ns
	pushImage(t, repo, "dev", "app")
	img := image(repo, "dev")
	deployment(t, ns, "web", img, 1, corev1.PullIfNotPresent)
	d2 := pushImage(t, repo, "dev", "app")

	as("inspect", "deploy/web", "-o", "json")
	if v := inspectJSON(t, "-n", ns, "deploy/web").Containers[0].Verdict; v != "stale" {
		t.Fatalf("verdict before refresh = %q, want stale", v)
	}

	as("refresh", "deploy/web", "--timeout", "2m")
	dep := getDeployment(t, ns, "web")
	if got, want := dep.Spec.Template.Spec.Containers[0].Image, img+"@"+d2; got != want {
		t.Fatalf("image after refresh as the documented role = %q, want %q", got, want)
	}
	wantOriginal := `{"image":"` + img + `","imagePullPolicy":"IfNotPresent"}`
	if got := dep.Annotations[originalAnnotation]; !strings.Contains(got, `"image":"`+img+`"`) || !strings.Contains(got, `"imagePullPolicy":"IfNotPresent"`) {
		t.Errorf("annotation after refresh = %q, want the original %s", got, wantOriginal)
	}

	as("pull-policy", "deploy/web", "Always", "--timeout", "2m")
	dep = getDeployment(t, ns, "web")
	if p := dep.Spec.Template.Spec.Containers[0].ImagePullPolicy; p != corev1.PullAlways {
		t.Fatalf("pull policy after pull-policy as the documented role = %q, want Always", p)
	}
	if got := dep.Annotations[originalAnnotation]; !strings.Contains(got, `"imagePullPolicy":"IfNotPresent"`) {
		t.Errorf("pull-policy rewrote the recorded original: %q", got)
	}
	settle(t, ns, "web")

	// A watching session: initial sync, a change, and a replacement pod found by watching pods.
	local := t.TempDir()
	write(t, filepath.Join(local, "f.txt"), "x")
	s := newSession(t, ns).Args("deploy/web", "--on-sync", "touch /tmp/on-sync-ran").Map(local, "/app").Start()
	waitConverged(t, ns, "app=web", 1, local, "/app", time.Minute)
	write(t, filepath.Join(local, "sub/g.txt"), "y")
	waitConverged(t, ns, "app=web", 1, local, "/app", time.Minute)
	old := runningPods(t, ns, "app=web")[0].Name
	if err := e.client.CoreV1().Pods(ns).Delete(context.Background(), old, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replacement pod", 2*time.Minute, func() (bool, error) {
		pods := runningPods(t, ns, "app=web")
		return len(pods) == 1 && pods[0].Name != old, nil
	})
	waitConverged(t, ns, "app=web", 1, local, "/app", 2*time.Minute)
	pod := runningPods(t, ns, "app=web")[0].Name
	waitFor(t, "--on-sync in the replacement pod", time.Minute, func() (bool, error) {
		return kexec(t, ns, pod, "test", "-e", "/tmp/on-sync-ran").code == 0, nil
	})
	s.Stop()
	// Nothing may be forbidden: client-go only logs a forbidden watch and falls back to
	// relisting, so stderr is where a missing verb shows. An "is gone" error is the documented
	// outcome of a pod deleted while a batch runs.
	if strings.Contains(s.Stderr(), "forbidden") {
		t.Errorf("something was forbidden to the documented role:\n%s", s.Dump())
	}
	for _, ev := range s.Events() {
		if msg := ev.Error; msg != "" && !strings.Contains(msg, "is gone") {
			t.Errorf("error event as the documented role: %s", ev.Line)
		}
	}

	as("restore", "deploy/web", "--timeout", "2m")
	dep = getDeployment(t, ns, "web")
	if c := dep.Spec.Template.Spec.Containers[0]; c.Image != img || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("after restore: image %q policy %q, want %q IfNotPresent", c.Image, c.ImagePullPolicy, img)
	}
	if _, ok := dep.Annotations[originalAnnotation]; ok {
		t.Errorf("restore left the annotation")
	}
}
