package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/fakeexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// exitCode is a remote command's exit status, as client-go reports it.
type exitCode int

func (c exitCode) Error() string   { return fmt.Sprintf("command terminated with exit code %d", int(c)) }
func (c exitCode) ExitStatus() int { return int(c) }

// fakePods answers execs the way a container does: the app container has tar or not, and a
// helper's probe finds the target as uid:gid, reachable or not.
type fakePods struct {
	fakeexec.Executor
	hasTar    bool
	hasSh     bool // without tar: sh runs and `command -v tar` fails
	uid, gid  int
	reachable func(helper string) bool
}

func (f *fakePods) PersistentStreams() bool { return true }

func newFakePods(hasTar bool, uid, gid int) *fakePods {
	f := &fakePods{hasTar: hasTar, uid: uid, gid: gid, reachable: func(string) bool { return true }}
	f.Respond = func(c fakeexec.Call) fakeexec.Response {
		script := strings.Join(c.Argv, " ")
		switch {
		case c.Target.Container == "app" && strings.Contains(script, "command -v tar"):
			if !f.hasTar && f.hasSh {
				return fakeexec.Response{Err: exitCode(127)}
			}
			if !f.hasTar {
				return fakeexec.Response{Err: errors.New(`OCI runtime exec failed: exec failed: unable to start container process: exec: "sh": executable file not found in $PATH: unknown`)}
			}
		case strings.HasPrefix(c.Target.Container, "livesync-helper-") && strings.Contains(script, "livesync-probe"):
			a := "ok"
			if !f.reachable(c.Target.Container) {
				a = "denied"
			}
			return fakeexec.Response{Stdout: fmt.Sprintf("P 1 4242 %d %d %s\n", f.uid, f.gid, a)}
		}
		return fakeexec.Response{}
	}
	return f
}

var helperTestTarget = remote.Target{Namespace: "ns", Pod: "p", Container: "app", ContainerID: "c://1"}

func runExec(t *testing.T, x *HelperExecutor) error {
	t.Helper()
	return x.Exec(context.Background(), helperTestTarget, []string{"sh", "-c", "tar -x", "livesync", "/app"}, nil, io.Discard, io.Discard)
}

// TestHelperExecutorRoutes: auto execs into a container with tar itself, and through a
// helper into one without; ephemeral always uses a helper, never never; the helper's argv
// works on /proc/PID/root and a root helper restores the target's owner.
func TestHelperExecutorRoutes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mode       HelperMode
		hasTar     bool
		wantHelper bool
	}{
		{"auto with tar", HelperAuto, true, false},
		{"auto without tar", HelperAuto, false, true},
		{"auto with sh, without tar", HelperAuto, false, true},
		{"ephemeral with tar", HelperEphemeral, true, true},
		{"never without tar", HelperNever, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newAPIServer(t, targetPod(nil, nil))
			s.kubelet = startRunning
			pods := newFakePods(tc.hasTar, 65532, 0)
			pods.hasSh = strings.Contains(tc.name, "with sh")
			var mu sync.Mutex
			var events []filesync.HelperUsed
			x := &HelperExecutor{Pods: pods, Helpers: &Helpers{Client: s.client, Image: helperImage}, Mode: tc.mode,
				Reporter: filesync.ReporterFunc(func(ev filesync.Event) {
					mu.Lock()
					defer mu.Unlock()
					events = append(events, ev.(filesync.HelperUsed))
				})}
			for range 2 {
				if err := runExec(t, x); err != nil {
					t.Fatal(err)
				}
			}
			calls := pods.Calls()
			last := calls[len(calls)-1]
			if !tc.wantHelper {
				if last.Target != helperTestTarget || last.Argv[2] != "tar -x" || len(s.patches()) != 0 || len(events) != 0 || x.Owner(helperTestTarget) != nil {
					t.Fatalf("direct: last call %+v, %d patches, events %+v", last, len(s.patches()), events)
				}
				return
			}
			if last.Target.Container != "livesync-helper-1" || !strings.Contains(last.Argv[2], "LIVESYNC_PID=1 LIVESYNC_START=4242\n") ||
				!strings.Contains(last.Argv[2], "LIVESYNC_OWNER=65532:0") || !strings.HasSuffix(last.Argv[2], "tar -x") {
				t.Errorf("through the helper: last call %+v", last)
			}
			if o := x.Owner(helperTestTarget); o == nil || *o != (remote.Owner{UID: 65532, GID: 0}) {
				t.Errorf("Owner = %+v, want 65532:0", o)
			}
			if len(s.patches()) != 1 || len(events) != 1 || events[0].Name != "livesync-helper-1" || !events[0].Owner || events[0].UID != 65532 {
				t.Errorf("%d patches, events %+v; want one helper, reported once", len(s.patches()), events)
			}
			// The decision is made once per container: probes ran once.
			probes := 0
			for _, c := range calls {
				if strings.Contains(strings.Join(c.Argv, " "), "livesync-probe") {
					probes++
				}
			}
			if probes != 1 {
				t.Errorf("%d probes for two execs, want 1", probes)
			}
		})
	}
}

// TestHelperExecutorLearnsGroup: a same-user helper whose gid was a guess can't reach the
// target; the probe's gid gets a second helper with it, which can.
func TestHelperExecutorLearnsGroup(t *testing.T) {
	s := newAPIServer(t, targetPod(&corev1.SecurityContext{RunAsUser: ptr.To(int64(65532))}, nil))
	s.admit, s.kubelet = podSecurity("baseline"), startRunning
	pods := newFakePods(false, 65532, 0)
	pods.reachable = func(helper string) bool { return helper == "livesync-helper-2" }
	x := &HelperExecutor{Pods: pods, Helpers: &Helpers{Client: s.client, Image: helperImage}, Mode: HelperAuto}
	if err := runExec(t, x); err != nil {
		t.Fatal(err)
	}
	last := pods.Calls()[len(pods.Calls())-1]
	if last.Target.Container != "livesync-helper-2" || strings.Contains(last.Argv[2], "LIVESYNC_OWNER") {
		t.Errorf("last call %+v, want through livesync-helper-2 without an owner", last)
	}
}

// TestHelperExecutorErrors: a helper that can't reach the target, or can't be added, is an
// ErrHelper (not retried) with one line saying what to set; the container keeps that answer,
// so retries add no more helpers.
func TestHelperExecutorErrors(t *testing.T) {
	s := newAPIServer(t, targetPod(nil, nil))
	s.admit, s.kubelet = podSecurity("baseline"), startRunning
	pods := newFakePods(false, 65532, 0)
	pods.reachable = func(string) bool { return false }
	x := &HelperExecutor{Pods: pods, Helpers: &Helpers{Client: s.client, Image: helperImage}, Mode: HelperAuto}
	err := runExec(t, x)
	if !errors.Is(err, remote.ErrHelper) || !strings.Contains(err.Error(), "runAsUser: 65532 and runAsGroup: 0") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v, want one ErrHelper line naming runAsUser", err)
	}
	n, patches := len(pods.Calls()), len(s.patches())
	if err := runExec(t, x); !errors.Is(err, remote.ErrHelper) || len(pods.Calls()) != n || len(s.patches()) != patches {
		t.Errorf("second exec: %v after %d more calls and %d more patches; want the same error, and nothing asked again", err, len(pods.Calls())-n, len(s.patches())-patches)
	}

	s = newAPIServer(t, targetPod(nil, nil))
	s.admit = podSecurity("restricted")
	x = &HelperExecutor{Pods: newFakePods(false, 65532, 0), Helpers: &Helpers{Client: s.client, Image: helperImage}, Mode: HelperAuto}
	if err := runExec(t, x); !errors.Is(err, remote.ErrHelper) || !strings.Contains(err.Error(), "restricted") {
		t.Errorf("restricted without a uid: %v", err)
	}
}

// TestHelperExecutorForgetsDeadHelper: a transport failure through the helper drops the
// route, so the next exec looks for a live helper again.
func TestHelperExecutorForgetsDeadHelper(t *testing.T) {
	s := newAPIServer(t, targetPod(nil, nil))
	s.kubelet = startRunning
	pods := newFakePods(false, 65532, 0)
	x := &HelperExecutor{Pods: pods, Helpers: &Helpers{Client: s.client, Image: helperImage}, Mode: HelperAuto}
	if err := runExec(t, x); err != nil {
		t.Fatal(err)
	}
	pods.Responses = []fakeexec.Response{{Err: errors.New(`container not found ("livesync-helper-1")`)}}
	if err := runExec(t, x); err == nil {
		t.Fatal("want the transport error")
	}
	if x.Owner(helperTestTarget) != nil {
		t.Error("the route survived a dead helper")
	}
	if err := runExec(t, x); err != nil {
		t.Fatal(err)
	}
	if len(s.patches()) != 1 {
		t.Errorf("%d patches: the live helper should be reused", len(s.patches()))
	}
}

// TestHelperExecutorAsksOncePerImage: auto's probe runs once per image: a restarted container
// of the same imageID is not asked again.
func TestHelperExecutorAsksOncePerImage(t *testing.T) {
	p := targetPod(nil, nil)
	p.Status.ContainerStatuses[0].ImageID = "reg/app@sha256:1"
	s := newAPIServer(t, p)
	pods := newFakePods(true, 0, 0)
	x := &HelperExecutor{Pods: pods, Helpers: &Helpers{Client: s.client, Image: helperImage}, Mode: HelperAuto}
	probes := func() int {
		n := 0
		for _, c := range pods.Calls() {
			if strings.Contains(strings.Join(c.Argv, " "), "command -v tar") {
				n++
			}
		}
		return n
	}
	if err := runExec(t, x); err != nil {
		t.Fatal(err)
	}
	restarted := s.pod(t)
	restarted.Status.ContainerStatuses[0].ContainerID = "c://2"
	if _, err := s.client.CoreV1().Pods("ns").UpdateStatus(context.Background(), restarted, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t2 := helperTestTarget
	t2.ContainerID = "c://2"
	if err := x.Exec(context.Background(), t2, []string{"sh", "-c", "tar -x", "livesync", "/app"}, nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if n := probes(); n != 1 {
		t.Errorf("%d tool probes for two containers of one image, want 1", n)
	}
}

// TestHelperExecutorReprobes: an exec that finds the target's process gone or replaced (helper.sh's
// check: exit status 75 and its marker) drops the route and probes again; with nothing sent on stdin it
// runs again at once, through the new process, and the marker stays out of its output. With an archive
// on stdin the error is transient for the engine to send the batch again, and the next exec goes to the
// new process.
func TestHelperExecutorReprobes(t *testing.T) {
	for _, withStdin := range []bool{false, true} {
		t.Run(fmt.Sprintf("stdin %v", withStdin), func(t *testing.T) {
			s := newAPIServer(t, targetPod(nil, nil))
			s.kubelet = startRunning
			pods := newFakePods(false, 65532, 0)
			var mu sync.Mutex
			pid := "7"
			pods.Respond = func(c fakeexec.Call) fakeexec.Response {
				script := strings.Join(c.Argv, " ")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case strings.Contains(script, "command -v tar"):
					return fakeexec.Response{Err: exitCode(127)}
				case strings.Contains(script, "livesync-probe"):
					return fakeexec.Response{Stdout: "P " + pid + " 1500 65532 0 ok\n"}
				case strings.Contains(script, "LIVESYNC_PID=7 "):
					// The worker it pinned exited; the main process is 9.
					pid = "9"
					return fakeexec.Response{Stderr: "livesync: helper target moved: process 7 that started at 1500 is gone\n", Err: exitCode(75)}
				}
				return fakeexec.Response{Stdout: "done"}
			}
			x := &HelperExecutor{Pods: pods, Helpers: &Helpers{Client: s.client, Image: helperImage}, Mode: HelperAuto}
			var stdin io.Reader
			if withStdin {
				stdin = strings.NewReader("tar")
			}
			var out, errb strings.Builder
			err := x.Exec(context.Background(), helperTestTarget, []string{"sh", "-c", "tar -x", "livesync", "/app"}, stdin, &out, &errb)
			if withStdin {
				var ee remote.ExitError
				if err == nil || errors.As(err, &ee) || !remote.IsTransient(err) {
					t.Fatalf("with stdin: err %v, want a transient error that is no exit status", err)
				}
				if x.Owner(helperTestTarget) != nil {
					t.Error("the route to process 7 survived")
				}
				out.Reset()
				err = x.Exec(context.Background(), helperTestTarget, []string{"sh", "-c", "tar -x", "livesync", "/app"}, strings.NewReader("tar"), &out, &errb)
			}
			if err != nil || out.String() != "done" || errb.String() != "" {
				t.Fatalf("Exec = %v, stdout %q, stderr %q; want it done through process 9, without the marker", err, out.String(), errb.String())
			}
			calls := pods.Calls()
			probes := 0
			for _, c := range calls {
				if strings.Contains(strings.Join(c.Argv, " "), "livesync-probe") {
					probes++
				}
			}
			last := calls[len(calls)-1]
			if probes != 2 || !strings.Contains(last.Argv[2], "LIVESYNC_PID=9 ") || len(s.patches()) != 1 {
				t.Errorf("%d probes, %d patches, last call %q; want one more probe, the same helper, and the exec through process 9", probes, len(s.patches()), last.Argv[2])
			}
		})
	}
}
