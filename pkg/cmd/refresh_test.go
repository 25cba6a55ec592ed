package cmd

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/image"
	"github.com/livesync-dev/kubectl-livesync/pkg/inspect"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

const (
	digest1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	digest2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	digestS = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
)

// registry is a fake registry: the digest each tag (repo:tag) serves; any other is an error.
type registry map[string]string

func (r registry) Resolve(_ context.Context, ref image.Reference) (string, error) {
	if d, ok := r[ref.WithoutDigest()]; ok {
		return d, nil
	}
	return "", errors.New("MANIFEST_UNKNOWN: manifest unknown")
}

func (r registry) Describe(ctx context.Context, ref image.Reference) (image.Digests, error) {
	d, err := r.Resolve(ctx, ref)
	return image.Digests{Manifests: []string{d}}, err
}

// Serves: the fake registry serves every digest except those listed under "gone@DIGEST".
func (r registry) Serves(_ context.Context, _ image.Reference, digest string) (bool, error) {
	_, gone := r["gone@"+digest]
	return !gone, nil
}

func (r registry) IsIndex(string) bool { return false }

// webPod is a pod of deployment apps/web running app on appDigest and sidecar on digestS.
func webPod(appDigest string) *corev1.Pod {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "apps", Labels: map[string]string{"app": "web"}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "app", ImageID: "127.0.0.1:1/app@" + appDigest, ContainerID: "containerd://a", State: running},
			{Name: "sidecar", ImageID: "127.0.0.1:1/side@" + digestS, ContainerID: "containerd://s", State: running},
		}},
	}
}

// runRefresh runs refresh deployment/web --no-wait (plus args) with reg as the registry.
func runRefresh(t *testing.T, d *appsv1.Deployment, reg registry, pod *corev1.Pod, args ...string) (*imageCluster, error) {
	t.Helper()
	c := newImageCluster(d, pod)
	o := &RefreshOptions{g: c.g, args: []string{"deployment/web"}, mutate: mutateOptions{noWait: true}}
	o.registry.newResolver = func(context.Context, *globalOptions, *workload.Workload) (inspect.Resolver, error) { return reg, nil }
	for _, a := range args {
		switch a {
		case "--dry-run":
			o.mutate.dryRun = true
		default:
			o.target.containers = append(o.target.containers, a)
		}
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	return c, o.Run(context.Background())
}

func TestRefresh(t *testing.T) {
	pinned2 := devImage + "@" + digest2
	cases := []struct {
		name      string
		app       string
		runs      string
		reg       registry
		wantOut   []string
		wantApp   string // image of app after; "" when nothing may be patched
		wantError string
	}{
		{
			name: "moved tag", app: devImage, runs: digest1, reg: registry{devImage: digest2, sideImage: digestS},
			wantOut: []string{
				`deployment/web: container "app": sha256:111111111111 -> sha256:222222222222`,
				`deployment/web: container "sidecar": current, ` + sideImage + ` serves sha256:aaaaaaaaaaaa`,
				`deployment/web: pinning container "app" to ` + pinned2,
				"deployment/web patched; not waiting for the rollout (--no-wait)",
			},
			wantApp: pinned2,
		},
		{
			name: "unchanged tag", app: devImage, runs: digest1, reg: registry{devImage: digest1, sideImage: digestS},
			wantOut: []string{"deployment/web: already current, nothing changed"},
		},
		{
			name: "already pinned, rollout behind", app: pinned2, runs: digest1, reg: registry{devImage: digest2, sideImage: digestS},
			wantOut: []string{
				`deployment/web: container "app": sha256:111111111111 -> sha256:222222222222`,
				"deployment/web: the spec already pins the new digest; its rollout is in progress",
			},
		},
		{
			name: "registry error", app: devImage, runs: digest1, reg: registry{sideImage: digestS},
			wantError: `deployment/web: container "app": MANIFEST_UNKNOWN: manifest unknown`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := runRefresh(t, imageDeployment("", tc.app, sideImage), tc.reg, webPod(tc.runs))
			if tc.wantError != "" {
				if err == nil || err.Error() != tc.wantError {
					t.Errorf("error = %v, want %q", err, tc.wantError)
				}
			} else if err != nil {
				t.Fatalf("refresh: %v\n%s", err, c.out)
			}
			for _, want := range tc.wantOut {
				if !strings.Contains(c.out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, c.out)
				}
			}
			patches, after := patchesOf(c.client), c.deployment(t)
			if tc.wantApp == "" {
				if len(patches) != 0 {
					t.Errorf("%d patches, want none: %s", len(patches), patches[0].GetPatch())
				}
				return
			}
			if got := images(after); got[0] != tc.wantApp || got[1] != sideImage {
				t.Errorf("images after refresh = %q, want app %s and sidecar unchanged", got, tc.wantApp)
			}
			o, err := (&workload.Workload{Annotations: after.Annotations}).Originals()
			if err != nil || o["app"].Image != tc.app || o["app"].Set == nil || o["app"].Set.Image != tc.wantApp || len(o) != 1 {
				t.Errorf("record after refresh = %+v, %v", o, err)
			}
		})
	}
}

// TestRefreshDryRun: the patch is sent with dryRun=All, and the output says nothing changed.
func TestRefreshDryRun(t *testing.T) {
	c, err := runRefresh(t, imageDeployment("", devImage, sideImage), registry{devImage: digest2, sideImage: digestS}, webPod(digest1), "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	patches := patchesOf(c.client)
	if len(patches) != 1 || strings.Join(patches[0].PatchOptions.DryRun, ",") != metav1.DryRunAll || patches[0].PatchOptions.FieldManager != workload.FieldManager {
		t.Errorf("patches = %+v, want one with dryRun=All", patches)
	}
	if !strings.Contains(c.out.String(), "deployment/web: dry run, nothing changed; the API server accepted the patch") {
		t.Errorf("output:\n%s", c.out)
	}
}

// movingRegistry is a registry whose tags move while refresh --watch polls it.
type movingRegistry struct {
	mu   sync.Mutex
	tags registry
}

func (r *movingRegistry) Resolve(ctx context.Context, ref image.Reference) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tags.Resolve(ctx, ref)
}

func (r *movingRegistry) Describe(ctx context.Context, ref image.Reference) (image.Digests, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tags.Describe(ctx, ref)
}

func (r *movingRegistry) Serves(ctx context.Context, ref image.Reference, digest string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tags.Serves(ctx, ref, digest)
}

func (r *movingRegistry) IsIndex(string) bool { return false }

func (r *movingRegistry) push(tag, digest string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tags[tag] = digest
}

// TestRefreshWatchFollows: --watch says it watches, then pins the tag each tick it moved, on
// workload.Follow's ticker, without repeating "already current" while nothing moves.
func TestRefreshWatchFollows(t *testing.T) {
	reg := &movingRegistry{tags: registry{devImage: digest1, sideImage: digestS}}
	c := newImageCluster(imageDeployment("", devImage, sideImage), webPod(digest1))
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	o := &RefreshOptions{g: c.g, args: []string{"deployment/web"}, mutate: mutateOptions{noWait: true}, watch: true, interval: time.Second, clock: clk}
	o.registry.newResolver = func(context.Context, *globalOptions, *workload.Workload) (inspect.Resolver, error) { return reg, nil }
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- o.Run(ctx) }()
	tick := func() {
		for !clk.HasWaiters() {
			runtime.Gosched()
		}
		clk.Step(time.Second)
	}
	tick() // nothing moved
	reg.push(devImage, digest2)
	tick()
	for len(patchesOf(c.client)) == 0 {
		runtime.Gosched()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("refresh --watch: %v", err)
	}
	if got := images(c.deployment(t))[0]; got != devImage+"@"+digest2 {
		t.Errorf("app after the tag moved = %s, want it pinned to %s", got, digest2)
	}
	out := c.out.String()
	if n := strings.Count(out, "already current"); n != 1 || !strings.Contains(out, "watching the registry every 1s; Ctrl-C to stop") ||
		!strings.Contains(out, `deployment/web: pinning container "app" to `+devImage+"@"+digest2) {
		t.Errorf("output (want one \"already current\", before watching):\n%s", out)
	}
}
