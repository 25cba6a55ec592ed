//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSyncLoop is the heart of the product: every change, deletes included, reaches every
// replica, and new pods, restarted containers and scaled-up replicas get the tree.
func TestSyncLoop(t *testing.T) {
	ns := namespace(t)
	repo := "sync-" + ns
	pushImage(t, repo, "dev", "app")
	deployment(t, ns, "web", image(repo, "dev"), 2, corev1.PullIfNotPresent)
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")
	write(t, filepath.Join(local, "src/main.py"), "print('hi')")
	const sel, root = "app=web", "/app"

	s := newSession(t, ns).Args("deploy/web").Map(local, root).Start()
	waitConverged(t, ns, sel, 2, local, root, 2*time.Minute)

	steps := []struct {
		name string
		do   func()
	}{
		{"create nested, odd names, a 5 MB binary, an executable and a symlink", func() {
			write(t, filepath.Join(local, "a/b/c/deep.txt"), "deep")
			write(t, filepath.Join(local, "with space.txt"), "space")
			write(t, filepath.Join(local, "ünïcødé-名前.txt"), "unicode")
			write(t, filepath.Join(local, "new\nline.txt"), "newline")
			write(t, filepath.Join(local, `quote's "and" $dollar.txt`), "quotes")
			big := make([]byte, 5<<20)
			_, _ = rand.Read(big)
			if err := os.WriteFile(filepath.Join(local, "big.bin"), big, 0o644); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(local, "run.sh"), "#!/bin/sh\necho run\n")
			_ = os.Chmod(filepath.Join(local, "run.sh"), 0o755)
			_ = os.Symlink("src/main.py", filepath.Join(local, "link.py"))
		}},
		{"modify", func() { write(t, filepath.Join(local, "index.html"), "v2, longer than before") }},
		{"delete a file", func() { _ = os.Remove(filepath.Join(local, "with space.txt")) }},
		{"rename a file", func() { _ = os.Rename(filepath.Join(local, "index.html"), filepath.Join(local, "home.html")) }},
		{"rename a directory", func() { _ = os.Rename(filepath.Join(local, "a"), filepath.Join(local, "z")) }},
		{"delete a directory tree", func() { _ = os.RemoveAll(filepath.Join(local, "z/b")) }},
		{"file becomes a directory", func() {
			_ = os.Remove(filepath.Join(local, "run.sh"))
			write(t, filepath.Join(local, "run.sh/inner"), "now a dir")
		}},
		{"editor atomic save", func() {
			tmp := filepath.Join(local, "src/.main.py.swp")
			write(t, tmp, "print('saved')")
			_ = os.Rename(tmp, filepath.Join(local, "src/main.py"))
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.do()
			waitConverged(t, ns, sel, 2, local, root, time.Minute)
		})
	}

	// Containers that went away (a deleted pod, a restart) must be reported as removed.
	var gone []string
	t.Run("a deleted pod's replacement gets the tree", func(t *testing.T) {
		pods := runningPods(t, ns, sel)
		gone = append(gone, pods[0].Status.ContainerStatuses[0].ContainerID)
		if err := e.client.CoreV1().Pods(ns).Delete(context.Background(), pods[0].Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitConverged(t, ns, sel, 2, local, root, 2*time.Minute)
	})

	t.Run("a restarted container is re-synced", func(t *testing.T) {
		pod := runningPods(t, ns, sel)[0]
		before := pod.Status.ContainerStatuses[0].RestartCount
		gone = append(gone, pod.Status.ContainerStatuses[0].ContainerID)
		kexec(t, ns, pod.Name, "kill", "1")
		waitFor(t, "the container to restart", 2*time.Minute, func() (bool, error) {
			p, err := e.client.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			st := p.Status.ContainerStatuses[0]
			return st.RestartCount > before && st.State.Running != nil, nil
		})
		waitConverged(t, ns, sel, 2, local, root, 2*time.Minute)
	})

	t.Run("scale 2 to 3", func(t *testing.T) {
		scale, err := e.client.AppsV1().Deployments(ns).GetScale(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		scale.Spec.Replicas = 3
		if _, err := e.client.AppsV1().Deployments(ns).UpdateScale(context.Background(), "web", scale, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitConverged(t, ns, sel, 3, local, root, 2*time.Minute)
	})

	t.Run("10,000 files in one burst", func(t *testing.T) {
		for i := range 10000 {
			write(t, filepath.Join(local, fmt.Sprintf("burst/d%02d/f%05d.txt", i%50, i)), fmt.Sprint(i))
		}
		waitConverged(t, ns, sel, 3, local, root, 5*time.Minute)
	})

	running := runningPods(t, ns, sel)
	s.Stop()
	// Five containers ran during the session: the first two, the deleted pod's replacement,
	// the restarted container and the scaled-up replica. Each was added and synced; the two
	// that went away were removed.
	added, synced, removed := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, ev := range s.Events() {
		id := ev.ContainerID()
		switch ev.Type {
		case "target-added":
			added[id] = true
		case "initial-sync":
			if ev.Error == "" {
				synced[id] = true
			}
		case "target-removed":
			removed[id] = true
		}
	}
	if s.Count("batch") < len(steps) {
		t.Errorf("%d batch events for %d steps that each changed files", s.Count("batch"), len(steps))
	}
	var ids []string
	for _, p := range running {
		ids = append(ids, p.Status.ContainerStatuses[0].ContainerID)
	}
	ids = append(ids, gone...)
	if len(ids) != 5 {
		t.Fatalf("want 5 containers (3 running, 2 gone), got %v", ids)
	}
	for _, id := range ids {
		if !added[id] || !synced[id] {
			t.Errorf("container %s: target-added %v, initial-sync %v; want both", id, added[id], synced[id])
		}
	}
	for _, id := range gone {
		if !removed[id] {
			t.Errorf("container %s went away without a target-removed event", id)
		}
	}
	if len(added) != 5 || len(synced) != 5 || len(removed) != 2 {
		t.Errorf("%d containers added, %d synced, %d removed; want 5, 5, 2", len(added), len(synced), len(removed))
	}
	if t.Failed() {
		t.Logf("events:\n%s", s.Dump())
	}
}

// TestSyncMirrorOnSyncDryRun: --initial=mirror removes extraneous files, --on-sync runs with
// the changed paths, --dry-run changes nothing.
func TestSyncMirrorOnSyncDryRun(t *testing.T) {
	ns := namespace(t)
	repo := "mirror-" + ns
	pushImage(t, repo, "dev", "app")
	deployment(t, ns, "web", image(repo, "dev"), 1, corev1.PullIfNotPresent)
	pod := runningPods(t, ns, "app=web")[0].Name
	kexec(t, ns, pod, "sh", "-c", "mkdir -p /app/old && echo stale > /app/old/extra && echo keep > /app/keep.txt")
	local := t.TempDir()
	write(t, filepath.Join(local, "keep.txt"), "keep\n")
	write(t, filepath.Join(local, "new.txt"), "new")

	r := mustLivesync(t, "-n", ns, "deploy/web", local+":/app", "--initial=mirror", "--dry-run")
	if !strings.Contains(r.stdout, "/app/new.txt") || !strings.Contains(r.stdout, "/app/old") {
		t.Errorf("dry run does not list the copy and the delete:\n%s", r)
	}
	if rt, _ := remoteTree(ns, pod, "app", "/app"); rt["old/extra"] == "" || rt["new.txt"] != "" {
		t.Fatalf("--dry-run changed the container: %v", rt)
	}

	mustLivesync(t, "-n", ns, "deploy/web", local+":/app", "--initial=mirror", "--once",
		"--on-sync", `printf '%s' "$LIVESYNC_CHANGED" > /tmp/on-sync.out`)
	waitConverged(t, ns, "app=web", 1, local, "/app", 30*time.Second)
	out := kexec(t, ns, pod, "cat", "/tmp/on-sync.out")
	if !strings.Contains(out.stdout, "/app/new.txt") {
		t.Errorf("--on-sync did not see the changed paths: %s", out)
	}
}

// TestSyncErrors: missing tar (with --helper never, or a helper image that can't be pulled)
// and a permission problem are reported with the fix, and --once exits non-zero.
func TestSyncErrors(t *testing.T) {
	ns := namespace(t)
	local := t.TempDir()
	write(t, filepath.Join(local, "f.txt"), "x")

	notar := "notar-" + ns
	pushImage(t, notar, "dev", "app-notar")
	deployment(t, ns, "notar", image(notar, "dev"), 1, corev1.PullIfNotPresent)
	r := livesync(t, "-n", ns, "deploy/notar", local+":/app", "--once", "--helper", "never")
	if r.code == 0 || !strings.Contains(r.stderr, "tar not found") {
		t.Errorf("want a tar-not-found error and a non-zero exit: %s", r)
	}
	// With a helper image no node can pull: one line naming it, and one helper, not one per retry.
	missing := image("no-such-helper-"+ns, "dev")
	r = livesync(t, "-n", ns, "deploy/notar", local+":/app", "--once", "--helper-image", missing)
	if r.code == 0 || !strings.Contains(r.stderr, "cannot start image "+strconv.Quote(missing)) {
		t.Errorf("want one line naming the helper image that can't be pulled: %s", r)
	}
	if got := ephemeralNames(t, ns, runningPods(t, ns, "app=notar")[0].Name); len(got) != 1 {
		t.Errorf("ephemeral containers after a failed helper: %v, want one", got)
	}

	nonroot := "nonroot-" + ns
	pushImage(t, nonroot, "dev", "app-nonroot")
	deployment(t, ns, "nonroot", image(nonroot, "dev"), 1, corev1.PullIfNotPresent)
	r = livesync(t, "-n", ns, "deploy/nonroot", local+":/app-root-owned/sub", "--once")
	if r.code == 0 || !strings.Contains(r.stderr, "ermission denied") || !strings.Contains(r.stderr, "1000") {
		t.Errorf("want a permission error naming uid 1000: %s", r)
	}
	// The same container syncs fine into a directory its user owns.
	mustLivesync(t, "-n", ns, "deploy/nonroot", local+":/home/app/src", "--once")

	// A user who may read pods but not exec into them is told which RBAC verbs are missing.
	r = run(t, e.binary, "--kubeconfig", readOnlyKubeconfig(t, ns), "-n", ns, "deploy/nonroot", local+":/home/app/src", "--once")
	if r.code == 0 || !strings.Contains(r.stderr, "pods/exec") {
		t.Errorf("want an error naming pods/exec: %s", r)
	}
}

// TestSyncFollowTag: a push of a new :dev during a session is pinned and rolled out, and the
// new pods get the synced files.
func TestSyncFollowTag(t *testing.T) {
	ns := namespace(t)
	repo := "follow-" + ns
	pushImage(t, repo, "dev", "app")
	img := image(repo, "dev")
	deployment(t, ns, "web", img, 1, corev1.PullIfNotPresent)
	local := t.TempDir()
	write(t, filepath.Join(local, "app.txt"), "synced")

	s := newSession(t, ns).Args("deploy/web", "--follow-tag", "--interval", "2s").Map(local, "/app").Start()
	waitConverged(t, ns, "app=web", 1, local, "/app", time.Minute)
	d2 := pushImage(t, repo, "dev", "app")
	waitFor(t, "the deployment pinned to the new digest", 2*time.Minute, func() (bool, error) {
		return getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0].Image == img+"@"+d2, nil
	})
	waitFor(t, "the new pod on the new digest", 2*time.Minute, func() (bool, error) {
		pods := runningPods(t, ns, "app=web")
		return len(pods) == 1 && len(pods[0].Status.ContainerStatuses) == 1 &&
			strings.HasSuffix(pods[0].Status.ContainerStatuses[0].ImageID, d2), nil
	})
	waitConverged(t, ns, "app=web", 1, local, "/app", time.Minute)
	s.Stop()
	if s.Count("refresh") == 0 {
		t.Errorf("no refresh event:\n%s", s.Dump())
	}
}
