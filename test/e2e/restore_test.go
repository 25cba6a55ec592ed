//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRestoreAfterSetImage: after refresh pinned :dev, the user points the container at :v2
// (kubectl set image). restore leaves :v2, says so, keeps the record and exits 0; restore
// --force puts the original back.
func TestRestoreAfterSetImage(t *testing.T) {
	ns := namespace(t)
	repo := "restore-" + ns
	pushImage(t, repo, "dev", "app")
	dev, v2 := image(repo, "dev"), image(repo, "v2")
	deployment(t, ns, "web", dev, 1, corev1.PullIfNotPresent)
	d2 := pushImage(t, repo, "dev", "app")
	pushImage(t, repo, "v2", "app")

	mustLivesync(t, "-n", ns, "refresh", "deploy/web", "--timeout", "2m")
	if got := getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0].Image; got != dev+"@"+d2 {
		t.Fatalf("image after refresh = %q", got)
	}
	patchImage(t, ns, "web", v2) // what kubectl set image deploy/web app=...:v2 does
	waitDeploymentReady(t, ns, "web")
	record := getDeployment(t, ns, "web").Annotations[originalAnnotation]

	for _, args := range [][]string{{"--dry-run"}, {"--timeout", "2m"}} {
		gen := getDeployment(t, ns, "web").Generation
		r := mustLivesync(t, append([]string{"-n", ns, "restore", "deploy/web"}, args...)...)
		want := `deployment/web: container "app": image changed since livesync pinned it (now ` + v2 + `); left as is, use --force to restore ` + dev + ` anyway`
		if !strings.Contains(r.stdout, want) {
			t.Errorf("restore %v output lacks %q:\n%s", args, want, r)
		}
		dep := getDeployment(t, ns, "web")
		if img := dep.Spec.Template.Spec.Containers[0].Image; img != v2 || dep.Generation != gen {
			t.Errorf("restore %v changed the deployment: image %q, generation %d -> %d", args, img, gen, dep.Generation)
		}
		if got := dep.Annotations[originalAnnotation]; got != record {
			t.Errorf("restore %v changed the record: %q -> %q", args, record, got)
		}
	}

	r := mustLivesync(t, "-n", ns, "restore", "deploy/web", "--force", "--timeout", "2m")
	if !strings.Contains(r.stdout, "restoring anyway (--force)") || !strings.Contains(r.stdout, "rolled out in") {
		t.Errorf("restore --force output:\n%s", r)
	}
	dep := getDeployment(t, ns, "web")
	if c := dep.Spec.Template.Spec.Containers[0]; c.Image != dev || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("after restore --force: image %q policy %q, want %q IfNotPresent", c.Image, c.ImagePullPolicy, dev)
	}
	if _, ok := dep.Annotations[originalAnnotation]; ok {
		t.Errorf("restore --force left the annotation")
	}
}

// TestMalformedRecord: an annotation of the wrong shape ("null" made refresh panic on a nil
// map) is one error line with a non-zero exit from every command that reads it, and the
// workload and its annotation stay as they were.
func TestMalformedRecord(t *testing.T) {
	ns := namespace(t)
	repo := "malformed-" + ns
	pushImage(t, repo, "dev", "app")
	deployment(t, ns, "web", image(repo, "dev"), 1, corev1.PullIfNotPresent)
	pushImage(t, repo, "dev", "app") // the tag moved: refresh would patch
	ctx := context.Background()
	d := getDeployment(t, ns, "web")
	d.Annotations = map[string]string{originalAnnotation: "null"}
	if _, err := e.client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	gen := getDeployment(t, ns, "web").Generation
	for _, args := range [][]string{
		{"refresh", "deploy/web"},
		{"pull-policy", "deploy/web", "Always"},
		{"restore", "deploy/web"},
		{"restore", "deploy/web", "--force"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := livesync(t, append([]string{"-n", ns}, args...)...)
			assertOneLineError(t, r, "annotation livesync.dev/original on deployment/web is not what livesync writes: want a JSON object of container records, got null: fix it, or remove it with kubectl annotate -n "+ns+" deployment/web livesync.dev/original-")
			if r.code != 1 {
				t.Errorf("exit code %d, want 1", r.code)
			}
		})
	}
	after := getDeployment(t, ns, "web")
	if after.Generation != gen || after.Annotations[originalAnnotation] != "null" {
		t.Errorf("a refused command changed the deployment: generation %d -> %d, annotation %q", gen, after.Generation, after.Annotations[originalAnnotation])
	}
}
