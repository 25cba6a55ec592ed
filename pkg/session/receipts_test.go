package session

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/control"
	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/logs"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/restart"
)

// fakeLedger is what each container confirmed, set by the test: rel -> sha256 per target.
type fakeLedger struct {
	mu    sync.Mutex
	held  map[string]map[string][32]byte
	gen   map[string]uint64
	unsyn map[string]bool
}

func (f *fakeLedger) set(t filesync.Target, rel string, content string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held[t.Pod] == nil {
		f.held[t.Pod] = map[string][32]byte{}
	}
	f.held[t.Pod][rel] = sha256.Sum256([]byte(content))
	f.gen[t.Pod]++
}

func (f *fakeLedger) check(_ context.Context, t filesync.Target, wants []want) (receipt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unsyn[t.Pod] {
		return receipt{}, filesync.ErrNotSynced
	}
	r := receipt{gens: []uint64{f.gen[t.Pod]}}
	for _, w := range wants {
		sum, ok := f.held[t.Pod][w.rel]
		e := planner.Entry{Type: planner.TypeFile}
		if ok {
			e.Sum = &sum
		}
		if !holds(w, e, ok, true) {
			r.missing = w.local
			break
		}
	}
	return r, nil
}

func newTestReceipts(t *testing.T, mode restart.Mode, targets ...filesync.Target) (*receipts, *fakeLedger, string) {
	t.Helper()
	root := t.TempDir()
	l := &fakeLedger{held: map[string]map[string][32]byte{}, gen: map[string]uint64{}, unsyn: map[string]bool{}}
	cfg := Config{Sync: filesync.Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(root), Remote: "/app"}}}, Restart: mode}
	r := newReceipts(l, nil, func() []filesync.Target { return append([]filesync.Target(nil), targets...) }, cfg, nil,
		clocktesting.NewFakeClock(time.Unix(1000, 0)))
	return r, l, root
}

func write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

var (
	web1 = filesync.Target{Namespace: "dev", Pod: "web-1", Container: "app", ContainerID: "c1"}
	web2 = filesync.Target{Namespace: "dev", Pod: "web-2", Container: "app", ContainerID: "c2"}
)

// TestWaitSynced: a wait answers once every replica confirmed the local bytes as they were when
// it was asked, and names the replica that lacks them when its time is up.
func TestWaitSynced(t *testing.T) {
	r, l, root := newTestReceipts(t, restart.Mode{}, web1, web2)
	write(t, filepath.Join(root, "main.go"), "v2")
	l.set(web1, "main.go", "v2")
	l.set(web2, "main.go", "v1")

	ctx := context.Background()
	res := r.Wait(ctx, control.WaitRequest{For: control.ForSynced, Timeout: time.Nanosecond})
	if res.OK || res.Files != 1 || len(res.Targets) != 2 || !res.Targets[0].OK || res.Targets[1].OK ||
		!strings.Contains(res.Targets[1].Missing, "main.go") {
		t.Fatalf("before web-2 has it: %+v", res)
	}

	done := make(chan control.WaitResult)
	go func() {
		done <- r.Wait(ctx, control.WaitRequest{For: control.ForSynced, Paths: []string{filepath.Join(root, "main.go")}})
	}()
	// The wait hashed v2 when asked: a later local edit does not move its goal.
	l.set(web2, "main.go", "v2")
	r.observe(filesync.ReporterFunc(func(filesync.Event) {})).Report(filesync.Batch{})
	if res := <-done; !res.OK {
		t.Fatalf("after web-2 confirmed it: %+v", res)
	}

	res = r.Wait(ctx, control.WaitRequest{For: control.ForSynced, Paths: []string{"/elsewhere/x"}})
	if res.OK || !strings.Contains(res.Message, "not under any synced LOCAL") {
		t.Errorf("a path outside the mappings: %+v", res)
	}
}

// TestWaitNotSyncedSaysWhy: a replica that holds deletes back is named with the reason.
func TestWaitNotSyncedSaysWhy(t *testing.T) {
	r, l, root := newTestReceipts(t, restart.Mode{}, web1)
	write(t, filepath.Join(root, "a"), "x")
	l.unsyn["web-1"] = true
	r.observe(filesync.ReporterFunc(func(filesync.Event) {})).Report(filesync.Held{Target: web1, Deleted: 40, Examples: []string{"/app/lib"}, Reason: "the local root is empty"})
	res := r.Wait(context.Background(), control.WaitRequest{For: control.ForSynced, Timeout: time.Nanosecond})
	if res.OK || !strings.Contains(res.Targets[0].Missing, "deletes held back (40 entries, e.g. /app/lib): the local root is empty") {
		t.Errorf("got %+v", res)
	}
}

// TestWaitRestarted: bytes that landed count as restarted only once a --restart that started
// after them ended; a restart that started before a later batch does not cover it.
func TestWaitRestarted(t *testing.T) {
	r, l, root := newTestReceipts(t, restart.Mode{Kind: restart.Signal, Signal: "HUP", Num: 1}, web1)
	write(t, filepath.Join(root, "main.go"), "v1")
	l.set(web1, "main.go", "v1")
	ctx := context.Background()
	req := control.WaitRequest{For: control.ForRestarted, Timeout: time.Nanosecond}
	if res := r.Wait(ctx, req); res.OK || !strings.Contains(res.Targets[0].Missing, "has not run since they landed") {
		t.Fatalf("before any restart: %+v", res)
	}
	hook := r.afterSync(func(context.Context, filesync.Target) {})
	hook(ctx, web1)
	if res := r.Wait(ctx, req); !res.OK {
		t.Fatalf("after the restart: %+v", res)
	}
	// v2 lands while nothing restarts it yet.
	write(t, filepath.Join(root, "main.go"), "v2")
	l.set(web1, "main.go", "v2")
	if res := r.Wait(ctx, req); res.OK {
		t.Fatalf("v2 was not restarted: %+v", res)
	}
	// A restart that fails is the replica's problem.
	report := r.restarted(func(restart.Event) {})
	hook = r.afterSync(func(_ context.Context, t filesync.Target) {
		report(restart.Event{Target: t, Err: restart.ErrNotHandled})
	})
	hook(ctx, web1)
	if res := r.Wait(ctx, req); res.OK || !strings.Contains(res.Targets[0].Missing, "restart failed: does not handle the signal") {
		t.Fatalf("after a failed restart: %+v", res)
	}
	if res := r.Wait(ctx, control.WaitRequest{For: control.ForSynced}); !res.OK {
		t.Errorf("synced regardless: %+v", res)
	}
}

// TestWaitReady: a replica whose container exited is named with its exit status.
func TestWaitReady(t *testing.T) {
	r, l, root := newTestReceipts(t, restart.Mode{}, web1)
	write(t, filepath.Join(root, "main.go"), "v1")
	l.set(web1, "main.go", "v1")
	r.pods = func(context.Context, string, string) (*corev1.Pod, error) {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", ContainerID: "c1", RestartCount: 1,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}},
		}}}}, nil
	}
	res := r.Wait(context.Background(), control.WaitRequest{For: control.ForReady, Timeout: time.Nanosecond})
	want := "container not Ready: waiting (CrashLoopBackOff), last run exited with status 3 (Error), 1 restarts"
	if res.OK || res.Targets[0].Missing != want {
		t.Errorf("got %+v, want %q", res, want)
	}
}

// TestWaitNamesCrashedReplica: a wait for a restart that one replica's app did not survive
// names that replica with its exit status and its last lines, and only that one.
func TestWaitNamesCrashedReplica(t *testing.T) {
	r, l, root := newTestReceipts(t, restart.Mode{Kind: restart.Signal, Signal: "HUP", Num: 1}, web1, web2)
	write(t, filepath.Join(root, "main.go"), "v2")
	l.set(web1, "main.go", "v2")
	r.afterSync(func(context.Context, filesync.Target) {})(context.Background(), web1)
	r.pods = func(_ context.Context, _, name string) (*corev1.Pod, error) {
		cs := corev1.ContainerStatus{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
		if name == "web-2" {
			cs = corev1.ContainerStatus{Name: "app", RestartCount: 2,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}
		}
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}}}, nil
	}
	var asked []string
	r.logs = func(_ context.Context, _, pod, _ string, previous bool) string {
		asked = append(asked, pod)
		if !previous {
			t.Errorf("the logs of %s's current run were read, not of the run that crashed", pod)
		}
		return "reloading\nbad source: exiting"
	}
	res := r.Wait(context.Background(), control.WaitRequest{For: control.ForRestarted, Timeout: time.Nanosecond})
	if res.OK || len(res.Targets) != 2 || !res.Targets[0].OK {
		t.Fatalf("got %+v", res)
	}
	got := res.Targets[1].Missing
	for _, want := range []string{"does not hold the local bytes of", "exited with status 3 (Error)", "2 restarts", `its last lines: "reloading\nbad source: exiting"`} {
		if !strings.Contains(got, want) {
			t.Errorf("web-2: %q lacks %q", got, want)
		}
	}
	if len(asked) != 1 || asked[0] != "web-2" {
		t.Errorf("logs read for %v, want web-2 only", asked)
	}
}

// TestWaitCountsADownReplica: a replica whose container stopped (the engine no longer syncs into
// it) fails a wait while its pod is there, with the container's state; once the pod is gone (a
// rollout, a scale-down) the wait no longer counts it.
func TestWaitCountsADownReplica(t *testing.T) {
	r, l, root := newTestReceipts(t, restart.Mode{}, web1)
	write(t, filepath.Join(root, "main.go"), "v1")
	l.set(web1, "main.go", "v1")
	r.observe(filesync.ReporterFunc(func(filesync.Event) {})).Report(filesync.TargetRemoved{Target: web2})
	gone := false
	r.pods = func(_ context.Context, _, name string) (*corev1.Pod, error) {
		if name == "web-2" && gone {
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
		}
		cs := corev1.ContainerStatus{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
		if name == "web-2" {
			cs = corev1.ContainerStatus{Name: "app", RestartCount: 1,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}
		}
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}}}, nil
	}
	res := r.Wait(context.Background(), control.WaitRequest{For: control.ForSynced, Timeout: time.Nanosecond})
	want := "its container is not running: waiting (CrashLoopBackOff), 1 restarts"
	if res.OK || len(res.Targets) != 2 || res.Targets[1].Pod != "web-2" || res.Targets[1].Missing != want {
		t.Fatalf("got %+v, want web-2 missing: %q", res, want)
	}
	gone = true
	r.clk.(*clocktesting.FakeClock).Step(podFresh)
	if res := r.Wait(context.Background(), control.WaitRequest{For: control.ForSynced, Timeout: time.Second}); !res.OK || len(res.Targets) != 1 {
		t.Errorf("after the pod went: %+v", res)
	}
}

// TestWaitRestartedSurvives: a restart counts once the container it ran in still runs a second
// later (its incarnation unchanged); an app that exited on reload, its container replaced, is
// named as not having survived it.
func TestWaitRestartedSurvives(t *testing.T) {
	for _, tc := range []struct {
		name, after, want string
	}{
		{name: "survived", after: "mnt:[1]"},
		{name: "exited on reload", after: "mnt:[2]", want: "the container did not survive --restart: it ended after the restart, and another runs in its place"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, l, root := newTestReceipts(t, restart.Mode{Kind: restart.Signal, Signal: "HUP", Num: 1}, web1)
			clk := r.clk.(*clocktesting.FakeClock)
			inc, probes := "mnt:[1]", 0
			r.incarnation = func(context.Context, filesync.Target) (string, error) { probes++; return inc, nil }
			write(t, filepath.Join(root, "main.go"), "v2")
			l.set(web1, "main.go", "v2")
			r.afterSync(func(context.Context, filesync.Target) { inc = tc.after })(context.Background(), web1)
			req := control.WaitRequest{For: control.ForRestarted, Timeout: time.Nanosecond}
			if res := r.Wait(context.Background(), req); res.OK || !strings.Contains(res.Targets[0].Missing, "looking whether the app survived it") {
				t.Fatalf("right after the restart: %+v", res)
			}
			clk.Step(aliveAfter)
			for range 2 {
				res := r.Wait(context.Background(), req)
				if res.OK != (tc.want == "") || res.Targets[0].Missing != tc.want {
					t.Fatalf("a second after: %+v, want missing %q", res, tc.want)
				}
			}
			if probes != 2 {
				t.Errorf("%d probes of the container, want 2 (before the first restart, once after)", probes)
			}
		})
	}
}

// TestLogsSinceLastSync: the lines a client gets are those the containers wrote since the last
// batch, in order; a session without --logs says it has none to give.
func TestLogsSinceLastSync(t *testing.T) {
	r, _, _ := newTestReceipts(t, restart.Mode{}, web1)
	if l := r.Logs(context.Background()); l.Following || len(l.Lines) != 0 {
		t.Fatalf("without --logs: %+v", l)
	}
	clk := r.clk.(*clocktesting.FakeClock)
	say := r.logged(func(logs.Line) {})
	obs := r.observe(filesync.ReporterFunc(func(filesync.Event) {}))
	say(logs.Line{Pod: "web-1", Text: "old code"})
	clk.Step(time.Second)
	// web-2 applied the batch first and reloaded before the batch (seen 100ms ago) was done.
	say(logs.Line{Pod: "web-2", Text: "reloaded"})
	clk.Step(100 * time.Millisecond)
	obs.Report(filesync.Batch{Changed: 1, Targets: 2, Latency: 100 * time.Millisecond})
	say(logs.Line{Pod: "web-1", Text: "reloaded"})
	say(logs.Line{Pod: "web-1", Text: "panic: nil map"})
	l := r.Logs(context.Background())
	var got []string
	for _, line := range l.Lines {
		got = append(got, line.Text)
	}
	if !l.Following || l.LastSync.IsZero() || strings.Join(got, "|") != "reloaded|reloaded|panic: nil map" {
		t.Errorf("got %+v", l)
	}
}
