package inspect

import (
	"context"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

const dev = "127.0.0.1:5000/app:dev"

// planRefresh plans a refresh of deployment ns/web, whose container app has image img, with
// pods running the given imageIDs and a registry that serves reg.
func planRefresh(t *testing.T, img string, reg fakeResolver, names []string, imageIDs ...string) (*RefreshPlan, error) {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: img, ImagePullPolicy: corev1.PullIfNotPresent}}}},
		},
	}
	client := fake.NewClientset()
	for i, id := range imageIDs {
		p := pod("web-"+string(rune('a'+i)), id)
		if _, err := client.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := workload.FromObject(d)
	if err != nil {
		t.Fatal(err)
	}
	return PlanRefresh(context.Background(), client, reg, w, names, nil)
}

func TestPlanRefresh(t *testing.T) {
	moved := fakeResolver{dev: d2}
	cases := []struct {
		name     string
		img      string
		imageIDs []string
		wantPin  string // "" for no change
		stale    bool
		behind   bool
		lines    []string
		quiet    []string
	}{
		{
			name: "moved tag", img: dev, imageIDs: []string{"127.0.0.1:5000/app@" + d1},
			wantPin: dev + "@" + d2, stale: true,
			lines: []string{
				`deployment/web: container "app": sha256:111111111111 -> sha256:222222222222`,
				`deployment/web: pinning container "app" to ` + dev + "@" + d2,
			},
		},
		{
			name: "pinned spec moved", img: dev + "@" + d1,
			wantPin: dev + "@" + d2, stale: true,
			lines: []string{
				`deployment/web: container "app": sha256:111111111111 -> sha256:222222222222`,
				`deployment/web: pinning container "app" to ` + dev + "@" + d2,
			},
		},
		{
			name: "unchanged tag", img: dev, imageIDs: []string{"127.0.0.1:5000/app@" + d2},
			lines: []string{
				`deployment/web: container "app": current, ` + dev + ` serves sha256:222222222222`,
				"deployment/web: already current, nothing changed",
			},
			quiet: []string{},
		},
		{
			name: "already pinned, rollout behind", img: dev + "@" + d2, imageIDs: []string{"127.0.0.1:5000/app@" + d1, "127.0.0.1:5000/app@" + d2},
			stale: true, behind: true,
			lines: []string{`deployment/web: container "app": sha256:111111111111 -> sha256:222222222222`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := planRefresh(t, tc.img, moved, nil, tc.imageIDs...)
			if err != nil {
				t.Fatal(err)
			}
			if p.Stale() != tc.stale || p.RolloutBehind() != tc.behind {
				t.Errorf("Stale() = %v, RolloutBehind() = %v; want %v, %v", p.Stale(), p.RolloutBehind(), tc.stale, tc.behind)
			}
			var pins []string
			for _, ch := range p.Changes {
				pins = append(pins, ch.Image)
			}
			if tc.wantPin == "" && len(pins) != 0 || tc.wantPin != "" && !reflect.DeepEqual(pins, []string{tc.wantPin}) {
				t.Errorf("changes pin %q, want %q", pins, tc.wantPin)
			}
			if tc.stale && p.Digests["app"] != d2 {
				t.Errorf("digests = %v, want app on %s", p.Digests, d2)
			}
			if got := p.Lines(false); !reflect.DeepEqual(got, tc.lines) {
				t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.lines, "\n"))
			}
			wantQuiet := tc.quiet
			if wantQuiet == nil {
				wantQuiet = tc.lines
			}
			if got := p.Lines(true); len(got)+len(wantQuiet) > 0 && !reflect.DeepEqual(got, wantQuiet) {
				t.Errorf("quiet lines: %q, want %q", got, wantQuiet)
			}
			patch, err := p.Patch()
			if err != nil || (patch != nil) != (tc.wantPin != "") {
				t.Fatalf("Patch() = %v, %v", patch, err)
			}
			if patch != nil && !strings.Contains(string(patch.Data), `"image":"`+tc.wantPin+`"`) {
				t.Errorf("patch %s does not pin %s", patch.Data, tc.wantPin)
			}
		})
	}
}

func TestPlanRefreshRefuses(t *testing.T) {
	if _, err := planRefresh(t, dev, fakeResolver{}, nil); err == nil ||
		err.Error() != `deployment/web: container "app": tag not found` {
		t.Errorf("registry error: %v", err)
	}
	if _, err := planRefresh(t, "127.0.0.1:5000/app@"+d1, fakeResolver{}, []string{"app"}); err == nil ||
		!strings.Contains(err.Error(), "nothing to refresh: every chosen image is pinned to a digest without a tag") {
		t.Errorf("only untagged containers named: %v", err)
	}
	p, err := planRefresh(t, "127.0.0.1:5000/app@"+d1, fakeResolver{}, nil)
	if err != nil || p.Stale() || !strings.Contains(strings.Join(p.Lines(true), "\n"), "no tag to follow") {
		t.Errorf("untagged container, none named: %v, %+v", err, p)
	}
}

// TestPlanRefreshImageVolume: a moved image volume is pinned in the same plan as a moved
// container; a bare Pod's moved volume is refused.
func TestPlanRefreshImageVolume(t *testing.T) {
	const vol = "127.0.0.1:5000/data:dev"
	spec := corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: dev}},
		Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: vol}}}},
	}
	running := pod("web-a", "127.0.0.1:5000/app@"+d1)
	running.Status.ContainerStatuses[0].VolumeMounts = []corev1.VolumeMountStatus{{Name: "data",
		VolumeStatus: &corev1.VolumeStatus{Image: &corev1.ImageVolumeStatus{ImageRef: "127.0.0.1:5000/data@" + d1}}}}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{Spec: spec},
		},
	}
	client := fake.NewClientset(running)
	w, err := workload.FromObject(d)
	if err != nil {
		t.Fatal(err)
	}
	p, err := PlanRefresh(context.Background(), client, fakeResolver{dev: d2, vol: d2}, w, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Changes) != 2 || p.Changes[1].Container.Key() != "volume/data" || p.Changes[1].Image != vol+"@"+d2 {
		t.Fatalf("changes = %+v, want the container and the image volume pinned", p.Changes)
	}
	lines := strings.Join(p.Lines(false), "\n")
	if !strings.Contains(lines, `deployment/web: image volume "data": sha256:111111111111 -> sha256:222222222222`) ||
		!strings.Contains(lines, `pinning image volume "data" to `+vol+"@"+d2) {
		t.Errorf("lines:\n%s", lines)
	}
	if _, ok := p.Digests["data"]; ok {
		t.Errorf("an image volume is not a container to wait for: %v", p.Digests)
	}
	// Only the volume moved: still stale, still patched.
	p, err = PlanRefresh(context.Background(), client, fakeResolver{dev: d1, vol: d2}, w, nil, nil)
	if err != nil || !p.Stale() || p.RolloutBehind() || len(p.Changes) != 1 || !p.Changes[0].Container.Volume {
		t.Errorf("only the volume moved: %+v, %v", p, err)
	}
	// -c app leaves the volume alone.
	if p, err := PlanRefresh(context.Background(), client, fakeResolver{dev: d2, vol: d2}, w, []string{"app"}, nil); err != nil || len(p.Changes) != 1 || p.Changes[0].Container.Volume {
		t.Errorf("-c app: %+v, %v", p, err)
	}

	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-a", Namespace: "ns"}, Spec: spec}
	wp, err := workload.FromObject(bare)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PlanRefresh(context.Background(), client, fakeResolver{dev: d1, vol: d2}, wp, nil, nil); err == nil || !strings.Contains(err.Error(), "a Pod's volumes cannot be changed") {
		t.Errorf("bare pod with a moved volume: %v", err)
	}
}

// TestPlanRefreshUnreportedVolume: a kubelet that reports no image volume digest (1.37.2, gate
// on or off) leaves inspect unknown with a note, and refresh pins the volume to know it.
func TestPlanRefreshUnreportedVolume(t *testing.T) {
	const vol = "127.0.0.1:5000/data:dev"
	spec := corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: dev}},
		Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: vol}}}},
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: corev1.PodTemplateSpec{Spec: spec}}}
	w, err := workload.FromObject(d)
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(pod("web-a", "127.0.0.1:5000/app@"+d2))
	imgs, _ := w.Images(nil, nil)
	rep, err := Build(context.Background(), client, fakeResolver{dev: d2, vol: d2}, w, imgs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := rep.ImageVolumes[0]; v.Verdict != "unknown" || !strings.Contains(strings.Join(v.Notes, "\n"), "no pod reports the digest this image volume mounts") {
		t.Errorf("inspect: %+v", v)
	}
	p, err := PlanRefresh(context.Background(), client, fakeResolver{dev: d2, vol: d2}, w, nil, nil)
	if err != nil || !p.Stale() || len(p.Changes) != 1 || p.Changes[0].Image != vol+"@"+d2 ||
		!strings.Contains(strings.Join(p.Lines(false), "\n"), `image volume "data": (digest not reported) -> sha256:222222222222`) {
		t.Errorf("refresh: %+v, %v", p, err)
	}
}
