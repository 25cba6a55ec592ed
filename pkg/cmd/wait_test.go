//go:build !windows

package cmd

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/control"
)

// waitSession is a session's control surface with a fixed answer to every wait.
type waitSession struct {
	answer control.WaitResult
	asked  chan control.WaitRequest
}

func (s *waitSession) Status(context.Context) control.Status { return control.Status{} }

func (s *waitSession) Logs(context.Context) control.Logs { return control.Logs{} }

func (s *waitSession) Wait(_ context.Context, req control.WaitRequest) control.WaitResult {
	s.asked <- req
	r := s.answer
	r.For = req.For
	return r
}

// serveSession registers a session that syncs root under XDG_STATE_HOME (which the test sets)
// and serves s until the test ends.
func serveSession(t *testing.T, root, name string, s *waitSession) {
	t.Helper()
	state := filepath.Join(os.Getenv("XDG_STATE_HOME"), "kubectl-livesync")
	ctx, cancel := context.WithCancel(context.Background())
	reg, err := control.Register(ctx, state, control.Info{Name: name, Workload: "deployment/web", Roots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { control.Serve(ctx, reg.Listener, s); close(done) }()
	t.Cleanup(func() { cancel(); <-done; _ = reg.Close() })
}

// TestWait: exit 0 with one line when every replica is there, 1 naming the replica that is
// not, 2 in one line when no session syncs here; paths are sent resolved.
func TestWait(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	root, _ := filepath.EvalSymlinks(t.TempDir())
	other := t.TempDir()

	out, errOut, code := runIn(t, root, "wait")
	assertOneLine(t, out, errOut, "no kubectl livesync session is running: start one")
	if code != ExitUsage {
		t.Errorf("no session: exit %d, want %d", code, ExitUsage)
	}

	ok := &waitSession{asked: make(chan control.WaitRequest, 1), answer: control.WaitResult{OK: true, Workload: "deployment/web", Files: 2,
		Targets: []control.TargetWait{{Pod: "web-1", OK: true}, {Pod: "web-2", OK: true}}}}
	serveSession(t, root, "", ok)
	out, errOut, code = runIn(t, root, "wait", "--for=restarted", "main.go", "--timeout", "5s")
	if code != 0 || errOut != "" || out != "restarted: deployment/web (2 replicas) restarted with the local bytes of 2 files in 0s\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if req := <-ok.asked; req.For != control.ForRestarted || len(req.Paths) != 1 || req.Paths[0] != filepath.Join(root, "main.go") || req.Timeout.Seconds() != 5 {
		t.Errorf("asked %+v", req)
	}

	out, errOut, code = runIn(t, other, "wait")
	assertOneLine(t, out, errOut, "no kubectl livesync session is running for "+other)
	if code != ExitUsage {
		t.Errorf("elsewhere: exit %d, want %d", code, ExitUsage)
	}

	t.Setenv("XDG_STATE_HOME", t.TempDir())
	bad := &waitSession{asked: make(chan control.WaitRequest, 1), answer: control.WaitResult{Workload: "deployment/web", Name: "web", Files: 1,
		Targets: []control.TargetWait{{Namespace: "dev", Pod: "web-1", Container: "app", OK: true},
			{Namespace: "dev", Pod: "web-2", Container: "app", Missing: "does not hold the local bytes of main.go yet; the container: waiting (CrashLoopBackOff)"}}}}
	serveSession(t, root, "web", bad)
	out, errOut, code = runIn(t, other, "wait", "--entry", "web", "-o", "json", "--timeout", "1s")
	<-bad.asked
	var res control.WaitResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.OK || len(res.Targets) != 2 {
		t.Errorf("stdout %q: %v", out, err)
	}
	want := `error: wait: deployment/web (entry "web"): 1 of 2 replicas not synced after 1s: dev/web-2/app does not hold the local bytes of main.go yet; the container: waiting (CrashLoopBackOff)`
	if code != ExitFailed || strings.TrimSpace(errOut) != want {
		t.Errorf("exit %d, stderr\n%s\nwant\n%s", code, errOut, want)
	}

	_, errOut, code = runIn(t, root, "wait", "--for=soon")
	if code != ExitUsage || !strings.Contains(errOut, `invalid --for "soon"`) {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}
