//go:build e2e

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// TestOnSyncOffTheBatchPath: an --on-sync command never holds up a sync. A background process
// that keeps the command's output open holds the pods/exec stream until --on-sync-timeout; then
// livesync closes it (the process keeps running in the container), --once exits, and a watching
// session applies edits all the while.
func TestOnSyncOffTheBatchPath(t *testing.T) {
	ns := namespace(t)
	repo := "onsync-" + ns
	pushImage(t, repo, "dev", "app")
	deployment(t, ns, "web", image(repo, "dev"), 1, corev1.PullIfNotPresent)
	pod := runningPods(t, ns, "app=web")[0].Name
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")

	t.Run("a detached background process ends the run at once", func(t *testing.T) {
		start := time.Now()
		r := mustLivesync(t, "-n", ns, "deploy/web", local+":/app", "--once", "-o", "json",
			"--on-sync", "sleep 600 >/dev/null 2>&1 &")
		ev := onlyEvent(t, r, "on-sync")
		if ev.ExitCode == nil || *ev.ExitCode != 0 || ev.Error != "" {
			t.Errorf("on-sync = %s, want exit 0", ev.Line)
		}
		t.Logf("--once with a detached on-sync: %s, on-sync %vms", time.Since(start).Round(time.Millisecond), ev.DurationMs)
	})

	t.Run("a background process holding the streams is cut off, --once exits", func(t *testing.T) {
		write(t, filepath.Join(local, "index.html"), "v2")
		start := time.Now()
		r := mustLivesync(t, "-n", ns, "deploy/web", local+":/app", "--once", "-o", "json",
			"--on-sync", "echo started; sleep 600 &", "--on-sync-timeout", "5s")
		took := time.Since(start)
		ev := onlyEvent(t, r, "on-sync")
		if !strings.Contains(ev.Error, "timed out after 5s") {
			t.Errorf("on-sync = %s, want a timeout", ev.Line)
		}
		waitConverged(t, ns, "app=web", 1, local, "/app", 30*time.Second)
		t.Logf("--once with a stream-holding on-sync and --on-sync-timeout 5s: %s (output %q)", took.Round(time.Millisecond), ev.Output)
		// Closing the exec does not stop what the command started.
		if out := kexec(t, ns, pod, "sh", "-c", "ps | grep -c '[s]leep 600'"); strings.TrimSpace(out.stdout) == "0" {
			t.Errorf("the background process did not survive the closed exec: %s", out)
		}
	})

	t.Run("a watching session applies edits while on-sync hangs", func(t *testing.T) {
		s := newSession(t, ns).Args("deploy/web", "--on-sync", "sleep 600 &", "--on-sync-timeout", "5m").Map(local, "/app").Start()
		s.Timeout(time.Minute).WaitSynced().Edit("index.html", "v3").Edit("new.txt", "new")
		waitConverged(t, ns, "app=web", 1, local, "/app", time.Minute)
		if n := s.Count("on-sync"); n != 0 {
			t.Errorf("%d on-sync runs ended before the edit arrived; the first one should still hang:\n%s", n, s.Dump())
		}
		// Ctrl-C with an on-sync run in flight (and one coalesced behind it) still exits cleanly.
		s.Stop()
	})
}

// onlyEvent returns the one NDJSON event of a type in r's stdout.
func onlyEvent(t *testing.T, r result, typ string) sessiontest.Event {
	t.Helper()
	var found []sessiontest.Event
	for _, ev := range sessiontest.ParseEvents(r.stdout) {
		if ev.Invalid {
			t.Fatalf("not JSON: %q", ev.Line)
		}
		if ev.Type == typ {
			found = append(found, ev)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s events, want 1: %s", len(found), typ, r)
	}
	return found[0]
}
