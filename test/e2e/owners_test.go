//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsapply "k8s.io/client-go/applyconfigurations/apps/v1"
	coreapply "k8s.io/client-go/applyconfigurations/core/v1"
	metaapply "k8s.io/client-go/applyconfigurations/meta/v1"
)

// helmMarks are the labels and annotations Helm puts on what it installs.
func helmMarks(ns string) (map[string]string, map[string]string) {
	return map[string]string{"app.kubernetes.io/managed-by": "Helm"}, map[string]string{"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": ns}
}

// applyAs server-side applies a one-container Deployment "web" running img as manager, the
// way Helm 4 installs and upgrades a chart (field manager "helm", conflicts not forced), with
// Helm's marks, and returns the apply's error.
func applyAs(t *testing.T, ns, manager, img string, force bool) error {
	t.Helper()
	labels, annotations := helmMarks(ns)
	return applyWeb(t, ns, "web", manager, img, labels, annotations, force)
}

// applyWeb server-side applies a one-container Deployment running img as manager, with the
// given labels and annotations on the Deployment.
func applyWeb(t *testing.T, ns, name, manager, img string, labels, annotations map[string]string, force bool) error {
	t.Helper()
	d := appsapply.Deployment(name, ns).
		WithLabels(labels).
		WithAnnotations(annotations).
		WithSpec(appsapply.DeploymentSpec().
			WithReplicas(1).
			WithSelector(metaapply.LabelSelector().WithMatchLabels(labelsFor(name))).
			WithTemplate(coreapply.PodTemplateSpec().
				WithLabels(labelsFor(name)).
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
			out = append(out, string(m.Operation)+" "+m.FieldsV1.GetRawString())
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

// TestOwnersNamed: inspect names the tool that owns a Helm-, a Flux- and an Argo CD-managed
// Deployment, and the managers of its image; refresh and pull-policy say first what the owner
// will do, go ahead on Helm's, and refuse Flux's and Argo CD's (which re-apply on their own)
// without --force, changing nothing, --dry-run included.
func TestOwnersNamed(t *testing.T) {
	ns := namespace(t)
	repo := "owners-" + ns
	pushImage(t, repo, "dev", "app")
	dev := image(repo, "dev")
	helmLabels, helmAnnotations := helmMarks(ns)
	for _, w := range []struct {
		name, manager       string
		labels, annotations map[string]string
		tool                string
	}{
		{"helm", "helm", helmLabels, helmAnnotations, "Helm"},
		{"flux", "kustomize-controller", map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}, nil, "Flux"},
		{"argo", "argocd-controller", nil, map[string]string{"argocd.argoproj.io/tracking-id": "shop:apps/Deployment:" + ns + "/argo"}, "Argo CD"},
	} {
		if err := applyWeb(t, ns, w.name, w.manager, dev, w.labels, w.annotations, true); err != nil {
			t.Fatal(err)
		}
		waitDeploymentReady(t, ns, w.name)
		rep := inspectJSON(t, "-n", ns, "deploy/"+w.name)
		if rep.Owner == nil || rep.Owner.Tool != w.tool || rep.Owner.Manager != w.manager {
			t.Errorf("%s: inspect owner = %+v, want %s (%s)", w.name, rep.Owner, w.tool, w.manager)
		}
		if m := rep.Containers[0].Managers["image"]; len(m) != 1 || m[0].Manager != w.manager || m[0].Operation != "Apply" {
			t.Errorf("%s: managers of the image = %+v", w.name, rep.Containers[0].Managers)
		}
		r := mustLivesync(t, "-n", ns, "inspect", "deploy/"+w.name)
		if !strings.Contains(r.stdout, "owned by "+w.tool+" ("+w.manager) {
			t.Errorf("%s: inspect's table does not name the owner:\n%s", w.name, r)
		}
	}
	pushImage(t, repo, "dev", "app") // the tag moved: refresh would pin it

	const fluxLine = `deployment/flux: Flux (kustomize-controller, Kustomization flux-system/apps) re-applies this field: the pin lasts until its next reconcile; hold it with "flux suspend kustomization apps -n flux-system" (and "flux resume kustomization apps -n flux-system" after restore)`
	for _, args := range [][]string{{"refresh", "deploy/flux"}, {"refresh", "deploy/flux", "--dry-run"}, {"pull-policy", "deploy/argo", "Always"}, {"pull-policy", "deploy/argo", "Always", "--dry-run"}} {
		name := args[1][len("deploy/"):]
		gen := getDeployment(t, ns, name).Generation
		r := livesync(t, append([]string{"-n", ns}, args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "re-applies what it owns: hold it first with ") || !strings.Contains(r.stderr, "then run again with --force") {
			t.Errorf("%v: want a refusal naming the hold and --force: %s", args, r)
		}
		if name == "flux" && !strings.Contains(r.stdout, fluxLine) {
			t.Errorf("%v: output lacks %q: %s", args, fluxLine, r)
		}
		if got := getDeployment(t, ns, name); got.Generation != gen || got.Annotations[originalAnnotation] != "" {
			t.Errorf("%v changed the deployment: generation %d -> %d", args, gen, got.Generation)
		}
	}
	r := mustLivesync(t, "-n", ns, "refresh", "deploy/flux", "--force", "--timeout", "2m")
	if !strings.Contains(r.stdout, fluxLine) || !strings.Contains(r.stdout, "rolled out in") {
		t.Errorf("refresh --force on Flux's:\n%s", r)
	}
	r = mustLivesync(t, "-n", ns, "pull-policy", "deploy/helm", "Always", "--timeout", "2m")
	if want := "deployment/helm: Helm (helm, release " + ns + "/web) sets this field again at the next helm upgrade; nothing reverts it before, and restore hands it back"; !strings.Contains(r.stdout, want) {
		t.Errorf("pull-policy on Helm's lacks %q:\n%s", want, r)
	}
}

// needTool fails the test when a tool hack/tools builds is not given (hack/e2e.sh gives it).
func needTool(t *testing.T, path, env string) {
	t.Helper()
	if path == "" {
		t.Fatalf("%s is not set: run hack/tools/build.sh and set it to the binary in the dir it prints (hack/e2e.sh does)", env)
	}
}

// reconcile runs lcreconcile (hack/tools), a GitOps controller's stand-in on Flux's own apply
// library, until the test ends: every interval it server-side applies the Deployment with img
// as manager, forcing ownership, and, as kustomize-controller, strips kubectl's ownership
// first, the way kustomize-controller reconciles a Kustomization (and Argo CD's self-heal
// re-applies an Application).
func reconcile(t *testing.T, ns, name, manager, img string, labels, annotations map[string]string, interval time.Duration) {
	t.Helper()
	needTool(t, e.reconciler, "LIVESYNC_RECONCILER")
	d := appsapply.Deployment(name, ns).WithLabels(labels).WithAnnotations(annotations).
		WithSpec(appsapply.DeploymentSpec().
			WithReplicas(1).
			WithSelector(metaapply.LabelSelector().WithMatchLabels(labelsFor(name))).
			WithTemplate(coreapply.PodTemplateSpec().
				WithLabels(labelsFor(name)).
				WithSpec(coreapply.PodSpec().
					WithTerminationGracePeriodSeconds(1).
					WithContainers(coreapply.Container().WithName("app").WithImage(img).WithImagePullPolicy(corev1.PullIfNotPresent)))))
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), name+".json")
	write(t, manifest, string(b))
	args := []string{"-kubeconfig", e.kubeconfig, "-f", manifest, "-manager", manager, "-interval", interval.String()}
	if manager == "kustomize-controller" {
		args = append(args, "-flux")
	}
	cmd := exec.Command(e.reconciler, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		t.Logf("%s (lcreconcile) said:\n%s", manager, out.String())
	})
}

// TestOwnersRevert: refresh --force on a workload a reconciler owns pins it, and the
// reconciler's next apply puts the tag back: refresh reports it by the manager's name within
// its grace and exits 1, and inspect shows the pin as reverted.
func TestOwnersRevert(t *testing.T) {
	for _, tc := range []struct {
		manager             string
		labels, annotations map[string]string
	}{
		{"kustomize-controller", map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}, nil},
		{"argocd-controller", nil, map[string]string{"argocd.argoproj.io/tracking-id": "shop:apps/Deployment:NS/web"}},
	} {
		t.Run(tc.manager, func(t *testing.T) {
			ns := namespace(t)
			repo := "revert-" + ns
			pushImage(t, repo, "dev", "app")
			dev := image(repo, "dev")
			for k, v := range tc.annotations {
				tc.annotations[k] = strings.ReplaceAll(v, "NS", ns)
			}
			if err := applyWeb(t, ns, "web", tc.manager, dev, tc.labels, tc.annotations, true); err != nil {
				t.Fatal(err)
			}
			waitDeploymentReady(t, ns, "web")
			pushImage(t, repo, "dev", "app") // the tag moved
			reconcile(t, ns, "web", tc.manager, dev, tc.labels, tc.annotations, 2*time.Second)
			r := livesync(t, "-n", ns, "refresh", "deploy/web", "--force", "--timeout", "2m")
			want := `deployment/web: container "app" image reverted by ` + tc.manager + ` `
			if r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "s after the pin (now "+dev+")") {
				t.Fatalf("refresh on a reconciled workload: want exit 1 and %q: %s", want, r)
			}
			rep := inspectJSON(t, "-n", ns, "deploy/web")
			if tc.manager == "kustomize-controller" && rep.Containers[0].Original == nil {
				// Flux strips the ownership of every manager named kubectl* (kubectl-livesync
				// included), and a later reconcile drops livesync's record with it: nothing is
				// left to call reverted, or to restore.
				return
			}
			if rv := rep.Containers[0].Reverted; len(rv) != 1 || rv[0].Field != "image" || rv[0].Manager != tc.manager {
				t.Errorf("inspect's reverted = %+v", rv)
			}
		})
	}
}

// TestOwnersFollowTagNoLoop: a session following the tag pins a push once; a reconciler then
// re-applies the tag every 2 s. The session does not pin again (that would be a rollout loop
// against the reconciler): it says once that --follow-tag stops, and goes on syncing files.
// Over 60 s the Deployment's generation rises by at most 2 (livesync's pin and the revert).
func TestOwnersFollowTagNoLoop(t *testing.T) {
	ns := namespace(t)
	repo := "noloop-" + ns
	pushImage(t, repo, "dev", "app")
	dev := image(repo, "dev")
	deployment(t, ns, "web", dev, 1, corev1.PullIfNotPresent)
	local := t.TempDir()
	write(t, filepath.Join(local, "app.txt"), "synced")
	s := newSession(t, ns).Args("deploy/web", "--follow-tag", "--interval", "2s").Map(local, "/app").Start()
	waitConverged(t, ns, "app=web", 1, local, "/app", time.Minute)
	gen := getDeployment(t, ns, "web").Generation
	d2 := pushImage(t, repo, "dev", "app")
	waitFor(t, "the pin of the new digest", 2*time.Minute, func() (bool, error) {
		return getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0].Image == dev+"@"+d2, nil
	})
	reconcile(t, ns, "web", "kustomize-controller", dev, nil, nil, 2*time.Second)
	pushImage(t, repo, "dev", "app") // another push the session must not pin against the reconciler
	deadline := time.Now().Add(60 * time.Second)
	noFight := func(until time.Time) {
		waitFor(t, "the session and the reconciler not to fight", time.Until(until)+30*time.Second, func() (bool, error) {
			if g := getDeployment(t, ns, "web").Generation; g > gen+2 {
				return false, fmt.Errorf("generation %d -> %d: livesync and the reconciler are fighting:\n%s", gen, g, s.Dump())
			}
			return time.Now().After(until), nil
		})
	}
	noFight(time.Now().Add(15 * time.Second))
	write(t, filepath.Join(local, "later.txt"), "still syncing")
	waitConverged(t, ns, "app=web", 1, local, "/app", time.Minute)
	noFight(deadline)
	s.Stop()
	if n := strings.Count(s.Dump(), "--follow-tag stops pinning"); n != 1 {
		t.Errorf("%d notices that --follow-tag stops, want 1:\n%s", n, s.Dump())
	}
}

// helm runs the Helm 4 CLI (hack/tools) against the suite's cluster.
func helm(t *testing.T, args ...string) result {
	t.Helper()
	needTool(t, e.helm, "LIVESYNC_HELM")
	return run(t, e.helm, append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
}

// TestHelmRoundTrip: a real Helm 4 (which installs server-side, field manager "helm") installs
// testdata/chart; refresh, pull-policy and restore follow; then helm upgrade with a new image
// succeeds without --force-conflicts, and livesync owns nothing. The control run does the same
// two writes with kubectl patch (pin, then the original back by hand): the upgrade fails with
// the conflict the first run guards against.
func TestHelmRoundTrip(t *testing.T) {
	t.Run("livesync", func(t *testing.T) {
		ns := namespace(t)
		repo := "helm-" + ns
		pushImage(t, repo, "dev", "app")
		pushImage(t, repo, "v2", "app")
		dev := image(repo, "dev")
		if r := helm(t, "install", "web", "testdata/chart", "-n", ns, "--set", "image="+dev, "--wait", "--timeout", "2m"); r.code != 0 {
			t.Fatalf("helm install: %s", r)
		}
		pushImage(t, repo, "dev", "app") // the tag moved
		mustLivesync(t, "-n", ns, "refresh", "deploy/web", "--timeout", "2m")
		mustLivesync(t, "-n", ns, "pull-policy", "deploy/web", "Always", "--timeout", "2m")
		r := mustLivesync(t, "-n", ns, "restore", "deploy/web", "--timeout", "2m")
		if want := `ownership handed back: container "app" image and imagePullPolicy to helm (Apply)`; !strings.Contains(r.stdout, want) {
			t.Errorf("restore output lacks %q:\n%s", want, r)
		}
		if r := helm(t, "upgrade", "web", "testdata/chart", "-n", ns, "--set", "image="+image(repo, "v2"), "--wait", "--timeout", "2m"); r.code != 0 {
			t.Fatalf("helm upgrade after restore: %s", r)
		}
		dep := getDeployment(t, ns, "web")
		if c := dep.Spec.Template.Spec.Containers[0]; c.Image != image(repo, "v2") || c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("after the upgrade: image %q policy %q", c.Image, c.ImagePullPolicy)
		}
		if left := livesyncEntries(dep); len(left) > 0 {
			t.Errorf("kubectl-livesync owns fields after the round trip: %q", left)
		}
	})
	t.Run("control-kubectl-patch", func(t *testing.T) {
		ns := namespace(t)
		repo := "helm-" + ns
		d := pushImage(t, repo, "dev", "app")
		dev := image(repo, "dev")
		if r := helm(t, "install", "web", "testdata/chart", "-n", ns, "--set", "image="+dev, "--wait", "--timeout", "2m"); r.code != 0 {
			t.Fatalf("helm install: %s", r)
		}
		for _, img := range []string{dev + "@" + d, dev} {
			patch := `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"` + img + `"}]}}}}`
			if r := run(t, e.kubectl, "--kubeconfig", e.kubeconfig, "-n", ns, "patch", "deploy/web", "-p", patch); r.code != 0 {
				t.Fatalf("kubectl patch: %s", r)
			}
		}
		r := helm(t, "upgrade", "web", "testdata/chart", "-n", ns, "--set", "image="+image(repo, "v2"), "--timeout", "2m")
		if r.code == 0 || !strings.Contains(r.stderr, `conflict with "kubectl-patch"`) {
			t.Fatalf("helm upgrade after a hand patch and its undo: want a conflict with \"kubectl-patch\": %s", r)
		}
	})
}
