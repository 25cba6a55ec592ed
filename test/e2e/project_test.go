//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// docsLivesyncYAML is the two-service livesync.yaml of docs/livesync-yaml.md, as written there.
func docsLivesyncYAML(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "livesync-yaml.md")) // go test runs in test/e2e
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)# Several workloads from one file.*?```yaml\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/livesync-yaml.md has no livesync.yaml example under \"# Several workloads from one file\"")
	}
	return string(m[1])
}

// TestLivesyncYAML runs docs/livesync-yaml.md's two-service livesync.yaml as written (its namespaces made
// the test's) from a subdirectory of the checkout: both services get their trees and every
// edit, deletes included; an entry whose workload is missing is reported and does not stop the
// others; Ctrl-C stops both cleanly; --once prints one summary and fails for the missing one.
func TestLivesyncYAML(t *testing.T) {
	backend, frontend := namespace(t), namespace(t)
	repo := "project-" + backend
	pushImage(t, repo, "dev", "app")
	deployment(t, backend, "api", image(repo, "dev"), 1, corev1.PullIfNotPresent)
	deployment(t, frontend, "web", image(repo, "dev"), 2, corev1.PullIfNotPresent)

	checkout := t.TempDir()
	apiDir, webDir := filepath.Join(checkout, "api"), filepath.Join(checkout, "web")
	write(t, filepath.Join(apiDir, "main.py"), "print('v1')")
	write(t, filepath.Join(webDir, "index.html"), "v1")
	write(t, filepath.Join(webDir, "app.js.map"), "excluded by the entry")
	yaml := docsLivesyncYAML(t)
	yaml = strings.Replace(yaml, "namespace: backend", "namespace: "+backend, 1)
	yaml = strings.Replace(yaml, "namespace: frontend", "namespace: "+frontend, 1)
	yaml += "  - name: gone\n    workload: deploy/gone\n    namespace: " + backend + "\n    mappings:\n      - ./api:/app\n"
	file := filepath.Join(checkout, "livesync.yaml")
	write(t, file, yaml)

	s := sessiontest.NewSession(t, e.binary).Kubeconfig(e.kubeconfig).Dir(webDir).Start()
	gone := s.WaitMatch("the missing entry's error", func(ev sessiontest.Event) bool {
		return ev.Type == "error" && ev.Entry == "gone"
	})
	if !strings.Contains(gone.Error, `"gone" not found`) {
		t.Errorf("the missing entry's error: %q", gone.Error)
	}
	waitConverged(t, backend, "app=api", 1, apiDir, "/app", 2*time.Minute)
	_ = os.Remove(filepath.Join(webDir, "app.js.map")) // the entry excludes *.map: the tree to compare has none
	waitConverged(t, frontend, "app=web", 2, webDir, "/usr/share/nginx/html", 2*time.Minute)
	write(t, filepath.Join(webDir, "app.js.map"), "still excluded")

	write(t, filepath.Join(apiDir, "main.py"), "print('v2')")
	write(t, filepath.Join(apiDir, "lib/util.py"), "x = 1")
	write(t, filepath.Join(webDir, "about.html"), "about")
	if err := os.Remove(filepath.Join(webDir, "index.html")); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, backend, "app=api", 1, apiDir, "/app", time.Minute)
	_ = os.Remove(filepath.Join(webDir, "app.js.map"))
	waitConverged(t, frontend, "app=web", 2, webDir, "/usr/share/nginx/html", time.Minute)

	s.Stop()
	entries := map[string]bool{}
	for _, ev := range s.Events() {
		if ev.Entry == "" {
			t.Errorf("an event of a livesync.yaml run without its entry: %s", ev.Line)
		}
		entries[ev.Entry] = true
	}
	if !entries["api"] || !entries["web"] || !entries["gone"] {
		t.Errorf("entries with events: %v", entries)
	}

	// --once, text output: lines carry their entry, one summary, and the missing entry fails the run.
	r := livesync(t, "--file", file, "--once")
	if r.code == 0 || !strings.Contains(r.stderr, "1 of 3 entries of "+file+" failed (gone)") {
		t.Fatalf("--once with a missing workload: %s", r)
	}
	if n := strings.Count(r.stderr, "livesync: "); n != 1 {
		t.Errorf("%d summary lines, want 1:\n%s", n, r.stderr)
	}
	for _, want := range []string{"[api] synced ", "[web] synced ", "[gone] error: "} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("--once output lacks %q:\n%s", want, r)
		}
	}
}
