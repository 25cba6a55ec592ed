//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestDocumentedRoleIsSufficient applies docs/rbac.yaml as it is and runs every command as a
// user bound to nothing else.
func TestDocumentedRoleIsSufficient(t *testing.T) {
	ns := namespace(t)
	raw, err := os.ReadFile("../../docs/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := yaml.UnmarshalStrict(raw, &role); err != nil {
		t.Fatalf("docs/rbac.yaml: %v", err)
	}
	kubeconfig := roleKubeconfig(t, ns, &role)
	as := func(args ...string) result {
		t.Helper()
		r := run(t, e.binary, append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)...)
		if r.code != 0 {
			t.Fatalf("as the documented role, %s: %s", strings.Join(args, " "), r)
		}
		return r
	}

	repo := "rbac-" + ns
	pushImage(t, repo, "dev", "app")
	img := image(repo, "dev")
	deployment(t, ns, "web", img, 1, corev1.PullIfNotPresent)
	pushImage(t, repo, "dev", "app")
	as("inspect", "deploy/web", "-o", "json")
	as("refresh", "deploy/web", "--timeout", "2m")
	as("pull-policy", "deploy/web", "Always", "--timeout", "2m")
	local := t.TempDir()
	write(t, filepath.Join(local, "f.txt"), "x")
	as("deploy/web", local+":/app", "--once", "--on-sync", "true")
	waitConverged(t, ns, "app=web", 1, local, "/app", time.Minute)
	as("restore", "deploy/web", "--timeout", "2m")
	if got := getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0].Image; got != img {
		t.Errorf("image after restore = %q", got)
	}
}
