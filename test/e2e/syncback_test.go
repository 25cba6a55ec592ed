//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestSyncBack: with --sync-back, a lockfile a command in the oldest pod writes and a
// directory a generator makes there come home (content, mode) and go on to the other
// replica; what the other replica writes never comes back, and is replaced by the
// source's; a container-side symlink under a listed path is never followed.
func TestSyncBack(t *testing.T) {
	ns := namespace(t)
	repo := "syncback-" + ns
	pushImage(t, repo, "dev", "app")
	deployment(t, ns, "web", image(repo, "dev"), 2, corev1.PullIfNotPresent)
	local := t.TempDir()
	write(t, filepath.Join(local, "package-lock.json"), "v1")
	write(t, filepath.Join(local, "src/main.py"), "print('hi')")
	const sel, root = "app=web", "/app"

	s := newSession(t, ns).Args("deploy/web", "--sync-back", "package-lock.json", "--sync-back", "gen/**").Map(local, root).Start()
	waitConverged(t, ns, sel, 2, local, root, 2*time.Minute)
	// The tracker hands the pods over one by one: the last target-added (or
	// sync-back-source) that names a source is the oldest pod's.
	var source, other string
	pods := map[string]bool{}
	for _, ev := range s.Events() {
		if ev.Target != nil && (ev.Type == "target-added" && ev.SyncBack == "source" || ev.Type == "sync-back-source") {
			source = ev.Target.Pod
		}
		if ev.Type == "target-added" && ev.Target != nil {
			pods[ev.Target.Pod] = true
		}
	}
	for p := range pods {
		if p != source {
			other = p
		}
	}
	if source == "" || other == "" {
		t.Fatalf("target-added names no source and one other replica:\n%s", s.Dump())
	}

	// The other replica writes the lockfile first: it never comes back.
	if r := kexec(t, ns, other, "sh", "-c", "printf 'from the other replica' > /app/package-lock.json"); r.code != 0 {
		t.Fatal(r)
	}
	if r := kexec(t, ns, source, "sh", "-c", "printf v2 > /app/package-lock.json && chmod 600 /app/package-lock.json && mkdir -p /app/gen/sub && printf generated > /app/gen/sub/x.go"); r.code != 0 {
		t.Fatal(r)
	}
	waitFor(t, "the lockfile and the generated file locally", time.Minute, func() (bool, error) {
		b, _ := os.ReadFile(filepath.Join(local, "package-lock.json"))
		g, _ := os.ReadFile(filepath.Join(local, "gen/sub/x.go"))
		return string(b) == "v2" && string(g) == "generated", nil
	})
	if fi, err := os.Stat(filepath.Join(local, "package-lock.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lockfile mode: %v %v", fi, err)
	}
	ev, err := s.Next("synced-back", time.Minute)
	if err != nil || ev.Target == nil || ev.Target.Pod != source || len(ev.Paths) == 0 {
		t.Fatalf("synced-back event %+v: %v\n%s", ev, err, s.Dump())
	}
	// The other replica gets the source's version, uploaded like a local change.
	waitFor(t, "the source's lockfile in "+other, time.Minute, func() (bool, error) {
		r := kexec(t, ns, other, "cat", "/app/package-lock.json")
		return r.code == 0 && r.stdout == "v2", nil
	})
	waitConverged(t, ns, sel, 2, local, root, time.Minute)

	// A symlink under a listed path that points at /etc/passwd: not followed, nothing written.
	if r := kexec(t, ns, source, "ln", "-s", "/etc/passwd", "/app/gen/passwd"); r.code != 0 {
		t.Fatal(r)
	}
	waitFor(t, "the symlink refused", time.Minute, func() (bool, error) {
		for _, ev := range s.Events() {
			if ev.Type == "error" && strings.HasSuffix(ev.Path, "gen/passwd") {
				return true, nil
			}
		}
		return false, nil
	})
	if _, err := os.Lstat(filepath.Join(local, "gen/passwd")); !os.IsNotExist(err) {
		t.Fatalf("gen/passwd came back: %v", err)
	}
	s.Stop()
}
