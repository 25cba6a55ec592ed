//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSyncStream: batches go through one kept-open exec per container, which
// says so in its events; a restarted container gets a new stream and the tree;
// and when the plugin is killed (kill -9) or stopped (Ctrl-C), no process of
// the loop is left in the container 10 s later.
func TestSyncStream(t *testing.T) {
	ns := namespace(t)
	repo := "stream-" + ns
	pushImage(t, repo, "dev", "app")
	deployment(t, ns, "web", image(repo, "dev"), 1, corev1.PullIfNotPresent)
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")
	const sel, root = "app=web", "/app"

	s := newSession(t, ns).Args("deploy/web").Map(local, root).Start()
	waitConverged(t, ns, sel, 1, local, root, 2*time.Minute)
	pod := runningPods(t, ns, sel)[0].Name
	waitFor(t, "the stream's loop in the container", 30*time.Second, func() (bool, error) {
		return loops(t, ns, pod) == 1, nil
	})
	for i := range 5 {
		write(t, filepath.Join(local, "index.html"), "v"+strconv.Itoa(i+2))
		write(t, filepath.Join(local, "dir with space/f"+strconv.Itoa(i)), "x")
		waitConverged(t, ns, sel, 1, local, root, time.Minute)
	}
	// One loop, however many batches (its subshells end with each batch).
	waitFor(t, "one loop after 5 batches", 10*time.Second, func() (bool, error) { return loops(t, ns, pod) == 1, nil })

	t.Run("a killed loop is replaced and the next edit arrives", func(t *testing.T) {
		r := kexec(t, ns, pod, "sh", "-c", `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <"$f" 2>/dev/null | grep -q 'livesync-strea[m] *$' && kill -9 "$(basename "$(dirname "$f")")"; done; true`)
		if r.code != 0 {
			t.Fatalf("killing the loop: %s", r)
		}
		waitFor(t, "the loop to be gone", 10*time.Second, func() (bool, error) { return loops(t, ns, pod) == 0, nil })
		write(t, filepath.Join(local, "after-loop-killed"), "k")
		waitConverged(t, ns, sel, 1, local, root, time.Minute)
		waitFor(t, "a new loop", 10*time.Second, func() (bool, error) { return loops(t, ns, pod) == 1, nil })
	})

	t.Run("a restarted container gets a new stream and the tree", func(t *testing.T) {
		p := runningPods(t, ns, sel)[0]
		before := p.Status.ContainerStatuses[0].RestartCount
		kexec(t, ns, pod, "kill", "1")
		waitFor(t, "the container to restart", 2*time.Minute, func() (bool, error) {
			p, err := e.client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			st := p.Status.ContainerStatuses[0]
			return st.RestartCount > before && st.State.Running != nil, nil
		})
		waitConverged(t, ns, sel, 1, local, root, 2*time.Minute)
		write(t, filepath.Join(local, "after-restart"), "y")
		waitConverged(t, ns, sel, 1, local, root, time.Minute)
	})

	for _, ev := range s.Events() {
		switch ev.Type {
		case "target-added", "initial-sync":
			if ev.Transport != "stream" {
				t.Errorf("%s event with transport %q, want stream", ev.Type, ev.Transport)
			}
		}
	}
	if n := s.Count("initial-sync"); n < 2 {
		t.Errorf("%d initial syncs, want one per container (2)", n)
	}

	t.Run("kill -9 of the plugin leaves no loop", func(t *testing.T) {
		s.Kill()
		waitFor(t, "no loop left in the container", 10*time.Second, func() (bool, error) {
			return loops(t, ns, pod) == 0, nil
		})
	})

	t.Run("Ctrl-C leaves no loop", func(t *testing.T) {
		s := newSession(t, ns).Args("deploy/web").Map(local, root).Start()
		write(t, filepath.Join(local, "after-kill"), "z")
		waitConverged(t, ns, sel, 1, local, root, 2*time.Minute)
		waitFor(t, "the stream's loop in the container", 30*time.Second, func() (bool, error) {
			return loops(t, ns, pod) == 1, nil
		})
		s.Stop()
		waitFor(t, "no loop left in the container", 10*time.Second, func() (bool, error) {
			return loops(t, ns, pod) == 0, nil
		})
	})
	t.Run("--transport exec keeps no loop and says so", func(t *testing.T) {
		s := newSession(t, ns).Args("deploy/web", "--transport", "exec").Map(local, root).Start()
		write(t, filepath.Join(local, "via-exec"), "e")
		waitConverged(t, ns, sel, 1, local, root, 2*time.Minute)
		if n := loops(t, ns, pod); n != 0 {
			t.Errorf("%d stream loops in the container with --transport exec", n)
		}
		s.Stop()
		for _, ev := range s.Events() {
			if (ev.Type == "target-added" || ev.Type == "initial-sync") && ev.Transport != "exec" {
				t.Errorf("%s event with transport %q, want exec", ev.Type, ev.Transport)
			}
		}
	})
	if t.Failed() {
		t.Logf("events:\n%s", s.Dump())
	}
}

// loops counts the processes in the pod's container whose command line is the
// stream's loop (its $0 is livesync-stream; the loop's own subshells have
// none while it is idle). The pattern's brackets keep this probe from matching
// itself.
func loops(t *testing.T, ns, pod string) int {
	t.Helper()
	r := kexec(t, ns, pod, "sh", "-c", `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <"$f" 2>/dev/null | grep -q 'livesync-strea[m] *$' && echo x; done; true`)
	if r.code != 0 {
		t.Fatalf("listing processes in %s: %s", pod, r)
	}
	return strings.Count(r.stdout, "x")
}

// TestSyncStreamFallbackExec: in an image without dd (app-nodd: tar, dash as
// sh, no dd) the stream's loop can't read its frames, so every batch goes
// through an exec of its own: edits still arrive, initial-sync says
// transport "exec" (target-added says "stream", the transport batches try
// first), and no loop is left running in the container.
func TestSyncStreamFallbackExec(t *testing.T) {
	ns := namespace(t)
	repo := "nodd-" + ns
	pushImage(t, repo, "dev", "app-nodd")
	deployment(t, ns, "nodd", image(repo, "dev"), 1, corev1.PullIfNotPresent)
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")
	const sel, root = "app=nodd", "/app"

	s := newSession(t, ns).Args("deploy/nodd").Map(local, root).Start()
	defer s.Stop()
	waitConverged(t, ns, sel, 1, local, root, 2*time.Minute)
	pod := runningPods(t, ns, sel)[0].Name
	if r := kexec(t, ns, pod, "sh", "-c", "command -v dd || echo none"); strings.TrimSpace(r.stdout) != "none" {
		t.Fatalf("app-nodd has dd: %s", r)
	}
	for i := range 3 {
		write(t, filepath.Join(local, "index.html"), "v"+strconv.Itoa(i+2))
		write(t, filepath.Join(local, "dir with space/f"+strconv.Itoa(i)), "x")
		waitConverged(t, ns, sel, 1, local, root, time.Minute)
	}
	if n := loops(t, ns, pod); n != 0 {
		t.Errorf("%d stream loops in a container without dd, want 0", n)
	}
	added, initial := 0, 0
	for _, ev := range s.Events() {
		switch ev.Type {
		case "target-added":
			added++
			if ev.Transport != "stream" {
				t.Errorf("target-added with transport %q, want stream (the one tried first)", ev.Transport)
			}
		case "initial-sync":
			initial++
			if ev.Transport != "exec" {
				t.Errorf("initial-sync with transport %q, want exec", ev.Transport)
			}
		}
	}
	if added != 1 || initial != 1 {
		t.Errorf("%d target-added and %d initial-sync events, want 1 each", added, initial)
	}
	if t.Failed() {
		t.Logf("events:\n%s", s.Dump())
	}
}
