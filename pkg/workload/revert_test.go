package workload

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestWatchReverts: after a pin, a change of the pinned image by another manager is a revert
// named by that manager and by the time since the write; a status write, or livesync's own
// value written again, is none, and the watch ends when the grace has passed.
func TestWatchReverts(t *testing.T) {
	const pinned = "example.com/app:dev@sha256:abc"
	pin := func() (*Patch, *watch.FakeWatcher) {
		w := mustWorkload(t, testDeployment())
		cs, _ := w.Containers([]string{"app"})
		p, err := BuildPatch(w, []Change{{Container: cs[0], Image: pinned}}, false)
		if err != nil {
			t.Fatal(err)
		}
		fw := watch.NewFake()
		p.appliedVersion = "43"
		p.watch = func(_ context.Context, rv string) (watch.Interface, error) {
			if rv != "43" {
				t.Errorf("watch from %q, want the write's resourceVersion", rv)
			}
			return fw, nil
		}
		return p, fw
	}
	modified := func(img string, managers ...metav1.ManagedFieldsEntry) watch.Event {
		d := testDeployment()
		d.Spec.Template.Spec.Containers[0].Image = img
		d.ManagedFields = managers
		return watch.Event{Type: watch.Modified, Object: d}
	}
	statusOnly := func() watch.Event {
		d := testDeployment()
		d.Spec.Template.Spec.Containers[0].Image = pinned
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2}
		return watch.Event{Type: watch.Modified, Object: d}
	}

	t.Run("reverted by a reconciler", func(t *testing.T) {
		p, fw := pin()
		clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
		got := make(chan []Revert, 1)
		go func() {
			r, err := p.WatchReverts(context.Background(), RevertGrace, clk)
			if err != nil {
				t.Error(err)
			}
			got <- r
		}()
		waitForWaiter(clk)
		fw.Modify(statusOnly().Object)
		clk.Step(4 * time.Second)
		fw.Modify(modified("example.com/app:dev", entry("kustomize-controller", "Apply", "image"), entry(FieldManager, "Update", "imagePullPolicy")).Object)
		r := <-got
		if len(r) != 1 || r[0].Manager != "kustomize-controller" || r[0].Field != FieldImage || r[0].After != 4*time.Second {
			t.Fatalf("reverts = %+v", r)
		}
		if want := `container "app" image reverted by kustomize-controller 4s after the pin (now example.com/app:dev)`; r[0].String() != want {
			t.Errorf("%q, want %q", r[0].String(), want)
		}
		err := RevertedError(p.Workload, r)
		if !errors.Is(err, ErrReverted) || !strings.Contains(err.Error(), `hold it with "flux suspend kustomization NAME"`) {
			t.Errorf("error %v", err)
		}
	})
	t.Run("nobody reverts", func(t *testing.T) {
		p, fw := pin()
		clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
		got := make(chan []Revert, 1)
		go func() {
			r, _ := p.WatchReverts(context.Background(), RevertGrace, clk)
			got <- r
		}()
		waitForWaiter(clk)
		fw.Modify(statusOnly().Object)
		fw.Modify(modified(pinned, entry(FieldManager, "Update", "image")).Object)
		clk.Step(RevertGrace)
		if r := <-got; len(r) != 0 {
			t.Fatalf("reverts = %+v", r)
		}
	})
}

// waitForWaiter yields until the code under test waits on the clock.
func waitForWaiter(clk *clocktesting.FakeClock) {
	for !clk.HasWaiters() {
		runtime.Gosched()
	}
}
