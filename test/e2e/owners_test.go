//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsapply "k8s.io/client-go/applyconfigurations/apps/v1"
	coreapply "k8s.io/client-go/applyconfigurations/core/v1"
	metaapply "k8s.io/client-go/applyconfigurations/meta/v1"
)

// applyAs server-side applies a one-container Deployment "web" running img as manager, the
// way Helm 4 installs and upgrades a chart (field manager "helm", conflicts not forced), and
// returns the apply's error.
func applyAs(t *testing.T, ns, manager, img string, force bool) error {
	t.Helper()
	d := appsapply.Deployment("web", ns).
		WithLabels(map[string]string{"app.kubernetes.io/managed-by": "Helm"}).
		WithAnnotations(map[string]string{"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": ns}).
		WithSpec(appsapply.DeploymentSpec().
			WithReplicas(1).
			WithSelector(metaapply.LabelSelector().WithMatchLabels(labelsFor("web"))).
			WithTemplate(coreapply.PodTemplateSpec().
				WithLabels(labelsFor("web")).
				WithSpec(coreapply.PodSpec().
					WithTerminationGracePeriodSeconds(1).
					WithContainers(coreapply.Container().WithName("app").WithImage(img).WithImagePullPolicy(corev1.PullIfNotPresent)))))
	_, err := e.client.AppsV1().Deployments(ns).Apply(context.Background(), d, metav1.ApplyOptions{FieldManager: manager, Force: force})
	return err
}

// livesyncEntries lists the managedFields entries of kubectl-livesync, as "Operation fields".
func livesyncEntries(d *appsv1.Deployment) []string {
	var out []string
	for _, m := range d.ManagedFields {
		if m.Manager == "kubectl-livesync" {
			out = append(out, string(m.Operation)+" "+string(m.FieldsV1.Raw))
		}
	}
	return out
}

// TestOwnersHandBack: a Deployment applied server-side by "helm" is refreshed, given another
// pull policy and restored by livesync; the same apply with a new image then succeeds without
// forcing conflicts, and no entry of livesync is left. The control run makes the same two
// writes with kubectl patch (pin, then put the original back by hand) and shows the conflict
// the first run guards against.
func TestOwnersHandBack(t *testing.T) {
	t.Run("livesync", func(t *testing.T) {
		ns := namespace(t)
		repo := "owners-" + ns
		pushImage(t, repo, "dev", "app")
		pushImage(t, repo, "v2", "app")
		dev := image(repo, "dev")
		if err := applyAs(t, ns, "helm", dev, false); err != nil {
			t.Fatal(err)
		}
		waitDeploymentReady(t, ns, "web")
		pushImage(t, repo, "dev", "app") // the tag moved: refresh pins it
		mustLivesync(t, "-n", ns, "refresh", "deploy/web", "--timeout", "2m")
		mustLivesync(t, "-n", ns, "pull-policy", "deploy/web", "Always", "--timeout", "2m")
		if c := getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0]; !strings.HasPrefix(c.Image, dev+"@sha256:") || c.ImagePullPolicy != corev1.PullAlways {
			t.Fatalf("after refresh and pull-policy: image %q policy %q", c.Image, c.ImagePullPolicy)
		}
		r := mustLivesync(t, "-n", ns, "restore", "deploy/web", "--timeout", "2m")
		if want := `deployment/web: ownership handed back: container "app" image and imagePullPolicy to helm (Apply)`; !strings.Contains(r.stdout, want) {
			t.Errorf("restore output lacks %q:\n%s", want, r)
		}
		dep := getDeployment(t, ns, "web")
		if c := dep.Spec.Template.Spec.Containers[0]; c.Image != dev || c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Fatalf("after restore: image %q policy %q", c.Image, c.ImagePullPolicy)
		}
		if left := livesyncEntries(dep); len(left) > 0 {
			t.Errorf("kubectl-livesync still owns fields after restore: %q", left)
		}
		if err := applyAs(t, ns, "helm", image(repo, "v2"), false); err != nil {
			t.Fatalf("the owner's next apply after restore: %v", err)
		}
		if img := getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0].Image; img != image(repo, "v2") {
			t.Errorf("image after the owner's apply = %q", img)
		}
	})
	t.Run("control-kubectl-patch", func(t *testing.T) {
		ns := namespace(t)
		repo := "owners-" + ns
		d := pushImage(t, repo, "dev", "app")
		dev := image(repo, "dev")
		if err := applyAs(t, ns, "helm", dev, false); err != nil {
			t.Fatal(err)
		}
		for _, img := range []string{dev + "@" + d, dev} {
			patch := `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"` + img + `"}]}}}}`
			if r := run(t, e.kubectl, "--kubeconfig", e.kubeconfig, "-n", ns, "patch", "deploy/web", "-p", patch); r.code != 0 {
				t.Fatalf("kubectl patch: %s", r)
			}
		}
		err := applyAs(t, ns, "helm", image(repo, "v2"), false)
		if err == nil || !strings.Contains(err.Error(), `conflict with "kubectl-patch"`) {
			t.Fatalf("the owner's apply after a hand patch and its undo: %v, want a conflict with \"kubectl-patch\"", err)
		}
	})
}
