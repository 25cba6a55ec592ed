//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const originalAnnotation = "livesync.dev/original"

// TestSeedScenario is the product's reason to exist: a moved :dev tag under IfNotPresent is
// seen as stale, pinned by digest, rolled out to every replica, and restored.
func TestSeedScenario(t *testing.T) {
	ns := namespace(t)
	repo := "seed-" + ns
	d1 := pushImage(t, repo, "dev", "app")
	img := image(repo, "dev")
	deployment(t, ns, "web", img, 2, corev1.PullIfNotPresent)

	d2 := pushImage(t, repo, "dev", "app")
	if d1 == d2 {
		t.Fatalf("the new :dev has the old digest %s", d1)
	}

	rep := inspectJSON(t, "-n", ns, "deploy/web")
	c := rep.Containers[0]
	if rep.Workload.Kind != "Deployment" || rep.Workload.Name != "web" || rep.Workload.Namespace != ns {
		t.Errorf("workload = %+v", rep.Workload)
	}
	if c.Verdict != "stale" || c.RegistryDigest != d2 || c.Tag != "dev" || c.EffectivePullPolicy != "IfNotPresent" {
		t.Fatalf("inspect before refresh: %+v", c)
	}
	if len(c.Pods) != 2 || c.Pods[0].Digest != d1 || c.Pods[1].Digest != d1 {
		t.Fatalf("pods before refresh: %+v", c.Pods)
	}

	r := mustLivesync(t, "-n", ns, "refresh", "deploy/web", "--timeout", "2m")
	if !strings.Contains(r.stdout, d2[:19]) || !strings.Contains(r.stdout, "rolled out in") {
		t.Errorf("refresh output lacks the new digest or the rollout time:\n%s", r)
	}
	dep := getDeployment(t, ns, "web")
	if got, want := dep.Spec.Template.Spec.Containers[0].Image, img+"@"+d2; got != want {
		t.Fatalf("image after refresh = %q, want %q", got, want)
	}
	if !strings.Contains(dep.Annotations[originalAnnotation], `"image":"`+img+`"`) {
		t.Errorf("annotation = %q", dep.Annotations[originalAnnotation])
	}
	pods := runningPods(t, ns, "app=web")
	if len(pods) != 2 {
		t.Fatalf("%d running pods after refresh, want 2", len(pods))
	}
	for _, p := range pods {
		if id := p.Status.ContainerStatuses[0].ImageID; !strings.HasSuffix(id, d2) {
			t.Errorf("pod %s runs %s, want %s", p.Name, id, d2)
		}
	}
	rep = inspectJSON(t, "-n", ns, "deploy/web")
	if v := rep.Containers[0].Verdict; v != "pinned" {
		t.Errorf("verdict after refresh = %q, want pinned", v)
	}
	if o := rep.Containers[0].Original; o == nil || o.Image != img || o.ImagePullPolicy != "IfNotPresent" {
		t.Errorf("original after refresh = %+v", o)
	}

	// A second refresh has nothing to do. The controller may still write status while old
	// pods terminate, so compare the spec's generation, not the resourceVersion.
	gen := dep.Generation
	r = mustLivesync(t, "-n", ns, "refresh", "deploy/web")
	if !strings.Contains(r.stdout, "already current") {
		t.Errorf("second refresh: %s", r)
	}
	if got := getDeployment(t, ns, "web").Generation; got != gen {
		t.Errorf("second refresh changed the deployment: generation %d -> %d", gen, got)
	}

	mustLivesync(t, "-n", ns, "restore", "deploy/web", "--timeout", "2m")
	dep = getDeployment(t, ns, "web")
	ctr := dep.Spec.Template.Spec.Containers[0]
	if ctr.Image != img || ctr.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("after restore: image %q policy %q", ctr.Image, ctr.ImagePullPolicy)
	}
	if _, ok := dep.Annotations[originalAnnotation]; ok {
		t.Errorf("restore left the annotation")
	}
	r = mustLivesync(t, "-n", ns, "restore", "deploy/web")
	if !strings.Contains(r.stdout, "nothing recorded") {
		t.Errorf("restore without a record: %s", r)
	}
}

// TestPullPolicyAndDryRun: pull-policy records the original, restore puts it back, and every
// --dry-run leaves the object untouched.
func TestPullPolicyAndDryRun(t *testing.T) {
	ns := namespace(t)
	repo := "policy-" + ns
	pushImage(t, repo, "dev", "app")
	img := image(repo, "dev")
	rv := deployment(t, ns, "web", img, 1, corev1.PullIfNotPresent).ResourceVersion
	pushImage(t, repo, "dev", "app")

	// --dry-run sends the patch with dryRun=All: an admission policy that refuses it must be
	// reported, which a client-side dry run could not do.
	lift := admissionGuard(t, ns, "web")
	for _, args := range [][]string{{"pull-policy", "deploy/web", "Always"}, {"refresh", "deploy/web"}} {
		r := livesync(t, append([]string{"-n", ns, "--dry-run"}, args...)...)
		assertOneLineError(t, r, guardMessage)
	}
	lift()

	r := mustLivesync(t, "-n", ns, "pull-policy", "deploy/web", "Always", "--dry-run")
	if !strings.Contains(r.stdout, "dry run") {
		t.Errorf("dry run output: %s", r)
	}
	mustLivesync(t, "-n", ns, "refresh", "deploy/web", "--dry-run")
	if got := getDeployment(t, ns, "web").ResourceVersion; got != rv {
		t.Fatalf("--dry-run changed the deployment: resourceVersion %s -> %s", rv, got)
	}

	mustLivesync(t, "-n", ns, "pull-policy", "deploy/web", "Always", "--timeout", "2m")
	settle(t, ns, "web")
	dep := getDeployment(t, ns, "web")
	if p := dep.Spec.Template.Spec.Containers[0].ImagePullPolicy; p != corev1.PullAlways {
		t.Fatalf("policy after pull-policy = %s", p)
	}
	rv = dep.ResourceVersion
	lift = admissionGuard(t, ns, "web")
	assertOneLineError(t, livesync(t, "-n", ns, "restore", "deploy/web", "--dry-run"), guardMessage)
	lift()
	mustLivesync(t, "-n", ns, "restore", "deploy/web", "--dry-run")
	if got := getDeployment(t, ns, "web").ResourceVersion; got != rv {
		t.Fatalf("restore --dry-run changed the deployment")
	}
	mustLivesync(t, "-n", ns, "restore", "deploy/web", "--timeout", "2m")
	dep = getDeployment(t, ns, "web")
	if p := dep.Spec.Template.Spec.Containers[0].ImagePullPolicy; p != corev1.PullIfNotPresent {
		t.Errorf("policy after restore = %s", p)
	}
	if _, ok := dep.Annotations[originalAnnotation]; ok {
		t.Errorf("restore left the annotation")
	}
}

// TestOtherKinds refreshes a StatefulSet, a DaemonSet and a bare Pod.
func TestOtherKinds(t *testing.T) {
	ns := namespace(t)
	repo := "kinds-" + ns
	pushImage(t, repo, "dev", "app")
	img := image(repo, "dev")
	ctx := context.Background()
	labels := labelsFor("k")
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec(img, corev1.PullIfNotPresent)}
	sel := &metav1.LabelSelector{MatchLabels: labels}
	if _, err := e.client.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "sts"},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: sel, Template: tmpl},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dsLabels := labelsFor("d")
	dsTmpl := tmpl.DeepCopy()
	dsTmpl.Labels = dsLabels
	if _, err := e.client.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ds"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: dsLabels}, Template: *dsTmpl},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bare", Labels: map[string]string{"app": "bare"}},
		Spec:       podSpec(img, corev1.PullIfNotPresent),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The DaemonSet runs a pod on each node.
	want := map[string]int{"app=k": 1, "app=bare": 1}
	waitFor(t, "the DaemonSet's nodes", time.Minute, func() (bool, error) {
		ds, err := e.client.AppsV1().DaemonSets(ns).Get(ctx, "ds", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want["app=d"] = int(ds.Status.DesiredNumberScheduled)
		return ds.Status.ObservedGeneration == ds.Generation && want["app=d"] > 0, nil
	})
	// allOn says whether want[sel] pods of sel run, ready, on an image whose ID ends in digest.
	allOn := func(sel, digest string) bool {
		pods := runningPods(t, ns, sel)
		if len(pods) != want[sel] {
			return false
		}
		for _, p := range pods {
			if len(p.Status.ContainerStatuses) != 1 || !p.Status.ContainerStatuses[0].Ready ||
				!strings.HasSuffix(p.Status.ContainerStatuses[0].ImageID, digest) {
				return false
			}
		}
		return true
	}
	for _, sel := range []string{"app=k", "app=d", "app=bare"} {
		waitFor(t, "pods "+sel+" ready", 2*time.Minute, func() (bool, error) { return allOn(sel, ""), nil })
	}
	d2 := pushImage(t, repo, "dev", "app")
	for _, tc := range []struct {
		args []string
		sel  string
	}{
		{[]string{"sts/sts"}, "app=k"},
		{[]string{"daemonset", "ds"}, "app=d"},
		{[]string{"bare"}, "app=bare"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"-n", ns, "refresh", "--timeout", "2m"}, tc.args...)
			mustLivesync(t, args...)
			waitFor(t, "pods "+tc.sel+" on the new digest", time.Minute, func() (bool, error) { return allOn(tc.sel, d2), nil })
			rep := inspectJSON(t, append([]string{"-n", ns}, tc.args...)...)
			if v := rep.Containers[0].Verdict; v != "pinned" {
				t.Errorf("verdict = %s, want pinned", v)
			}
		})
	}
	// A bare Pod's pull policy is immutable: refused, nothing changed.
	before := podSpecs(t, ns, "bare")
	r := livesync(t, "-n", ns, "pull-policy", "pod/bare", "Always")
	if r.code == 0 || !strings.Contains(r.stderr, "cannot be changed") {
		t.Errorf("pull-policy on a bare pod: %s", r)
	}
	if after := podSpecs(t, ns, "bare"); after != before {
		t.Errorf("a refused pull-policy changed the pod: %s -> %s", before, after)
	}
}

// podSpecs records what a command could change in a pod: its containers' images and pull
// policies and its annotations. (The kubelet writes status: resourceVersion moves.)
func podSpecs(t *testing.T, ns, name string) string {
	t.Helper()
	p, err := e.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v := fmt.Sprintf("annotations %v", p.Annotations)
	for _, c := range p.Spec.Containers {
		v += fmt.Sprintf(", %s=%s (%s)", c.Name, c.Image, c.ImagePullPolicy)
	}
	return v
}

// TestKubectlPluginDiscovery runs the binary as `kubectl livesync` through the real kubectl.
func TestKubectlPluginDiscovery(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(e.binary, filepath.Join(dir, "kubectl-livesync")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	r := run(t, e.kubectl, "livesync", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "kubectl livesync") {
		t.Fatalf("kubectl livesync --help: %s", r)
	}
	r = run(t, e.kubectl, "plugin", "list")
	if !strings.Contains(r.stdout, "kubectl-livesync") {
		t.Errorf("kubectl plugin list: %s", r)
	}
	r = run(t, e.kubectl, "livesync", "version")
	if r.code != 0 || !strings.Contains(r.stdout, "kubectl-livesync") {
		t.Errorf("kubectl livesync version: %s", r)
	}
}
