package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// waitTicker returns once something waits on clk, failing the test after 10s.
func waitTicker(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("nothing ticks")
		}
		runtime.Gosched()
	}
}

// TestRunFollowsTag: with --follow-tag each tick re-reads the workload and refreshes it
// quietly; a failed poll is a warning and the next tick tries again.
func TestRunFollowsTag(t *testing.T) {
	f := newFixture(t, runningPod("web-1"))
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	f.cfg.FollowTag, f.cfg.Interval, f.deps.Clock = true, 30*time.Second, clk
	polls := 0
	f.images.fail = func(string) error {
		if polls++; polls == 1 {
			return errors.New("registry unreachable")
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, f.cfg, f.deps) }()
	f.j.waitFor(t, "watching 1 roots")
	for i := range 2 {
		waitTicker(t, clk)
		clk.Step(f.cfg.Interval)
		f.j.waitFor(t, "refresh deployment/web [app] quiet=true")
		if i == 0 {
			f.j.waitFor(t, "refreshed warning: following the tag: registry unreachable")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var resolves, warnings int
	for _, l := range f.j.all() {
		switch {
		case l == "resolve":
			resolves++
		case strings.HasPrefix(l, "refreshed warning"):
			warnings++
		}
	}
	if resolves != 3 || warnings != 1 {
		t.Errorf("%d reads of the workload and %d warnings, want 3 (start, two ticks) and 1:\n%s", resolves, warnings, strings.Join(f.j.all(), "\n"))
	}
}

func TestChooseContainers(t *testing.T) {
	w, err := workload.FromObject(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: "sidecar"}}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	selected := workload.ForSelector("ns", labels.SelectorFromSet(labels.Set{"app": "web"}))
	selectedRunning := workload.ForSelector("ns", labels.SelectorFromSet(labels.Set{"app": "web"}))
	selectedRunning.Spec = w.Spec
	for _, tt := range []struct {
		name    string
		w       *workload.Workload
		names   []string
		want    []string
		note    string
		wantErr string
	}{
		{name: "default", w: w, want: []string{"app"}, note: `Defaulted container "app" out of: app, sidecar`},
		{name: "named", w: w, names: []string{"sidecar"}, want: []string{"sidecar"}},
		{name: "named twice", w: w, names: []string{"sidecar", "app", "sidecar"}, want: []string{"sidecar", "app"}},
		{name: "missing", w: w, names: []string{"app", "nope"}, wantErr: `container "nope" not found in deployment/web: it has app, sidecar`},
		// -l alone: the tracker checks each pod, and picks each one's default when no pod ran.
		{name: "-l, no pod yet", w: selected, want: nil},
		{name: "-l, named", w: selectedRunning, names: []string{"nope", "nope"}, want: []string{"nope"}},
		{name: "-l, default of the first pod", w: selectedRunning, want: []string{"app"}, note: `Defaulted container "app"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var notes bytes.Buffer
			got, err := chooseContainers(tt.w, tt.names, &notes)
			switch {
			case tt.wantErr != "":
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("err = %v, want %s", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case !slices.Equal(got, tt.want):
				t.Errorf("containers %q, want %q", got, tt.want)
			}
			if !strings.Contains(notes.String(), tt.note) || tt.note == "" && notes.Len() > 0 {
				t.Errorf("note %q, want %q", notes.String(), tt.note)
			}
		})
	}
}

// TestFollowTagStopsAfterRevert: once another writer reverted a pin, --follow-tag says so
// once and pins nothing more (each new push would be a rollout the reconciler undoes again);
// the session goes on syncing files.
func TestFollowTagStopsAfterRevert(t *testing.T) {
	f := newFixture(t, runningPod("web-1"))
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	f.cfg.FollowTag, f.cfg.Interval, f.deps.Clock = true, 30*time.Second, clk
	f.images.fail = func(string) error {
		return fmt.Errorf("deployment/web: container \"app\" image reverted by kustomize-controller 3s after the pin (now app:dev): %w: hold it with \"flux suspend kustomization apps\", then run again", workload.ErrReverted)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, f.cfg, f.deps) }()
	f.j.waitFor(t, "watching 1 roots")
	waitTicker(t, clk)
	clk.Step(f.cfg.Interval)
	f.j.waitFor(t, "refreshed --follow-tag stops pinning: deployment/web: container \"app\" image reverted by kustomize-controller")
	// Following has stopped: later ticks pin nothing; the session runs on until Ctrl-C.
	for range 3 {
		clk.Step(f.cfg.Interval)
	}
	select {
	case err := <-done:
		t.Fatalf("the session ended: %v", err)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var refreshes, said int
	for _, l := range f.j.all() {
		switch {
		case strings.HasPrefix(l, "refresh "):
			refreshes++
		case strings.HasPrefix(l, "refreshed --follow-tag stops pinning"):
			said++
		}
	}
	if refreshes != 1 || said != 1 {
		t.Errorf("%d refreshes and %d notices, want 1 and 1:\n%s", refreshes, said, strings.Join(f.j.all(), "\n"))
	}
}
