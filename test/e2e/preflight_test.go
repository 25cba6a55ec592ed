//go:build e2e

package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// statListing describes every entry under the roots in a container: name, mode, owner, size,
// mtime; a dry run must leave it as it was.
func statListing(t *testing.T, ns, pod string, roots ...string) string {
	t.Helper()
	r := kexec(t, ns, pod, append([]string{"find"}, append(roots, "-exec", "stat", "-c", "%n %a %u:%g %s %Y", "{}", "+")...)...)
	if r.code != 0 || r.stdout == "" {
		t.Fatalf("listing %v: %s", roots, r)
	}
	return r.stdout
}

// dryRunEvents returns a dry run's dry-run events by remote directory.
func dryRunEvents(t *testing.T, stdout string) map[string]sessiontest.Event {
	t.Helper()
	out := map[string]sessiontest.Event{}
	for _, ev := range sessiontest.ParseEvents(stdout) {
		if ev.Type == "dry-run" {
			if ev.Preflight == nil {
				t.Fatalf("a dry-run event without a preflight: %s", ev.Line)
			}
			out[ev.Remote] = ev
		}
	}
	return out
}

// TestPreflight: --dry-run says per container and mapping how a real run would sync it, as
// which uid, and whether the remote directory is writable, and changes nothing: into the
// root-owned directory of a container that runs as uid 1000 it is not writable (with the hint
// --helper ephemeral), into the user's home it is. A distroless container's helper is only
// added by a real run: the preflight says so, and the dry run still exits 0.
func TestPreflight(t *testing.T) {
	ns := namespace(t)
	repo := "preflight-nonroot-" + ns
	pushImage(t, repo, "dev", "app-nonroot")
	deployment(t, ns, "web", image(repo, "dev"), 1, corev1.PullIfNotPresent)
	pod := runningPods(t, ns, "app=web")[0].Name
	local := t.TempDir()
	write(t, filepath.Join(local, "main.go"), "package main")
	write(t, filepath.Join(local, "static/app.css"), "body{}")
	before := statListing(t, ns, pod, "/app-root-owned", "/home/app")

	r := mustLivesync(t, "-n", ns, "deploy/web", local+":/app-root-owned", local+":/home/app", "--dry-run")
	target := ns + "/" + pod + "/app"
	for _, want := range []string{
		"dry run " + target + " /app-root-owned: would copy 3, delete 0; via stream as uid 1000 gid 1000; /app-root-owned NOT writable as uid 1000: ",
		"dry run " + target + " /home/app: would copy 3, delete 0; via stream as uid 1000 gid 1000; /home/app writable\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the dry run does not say %q:\n%s", want, r)
		}
	}
	if !strings.Contains(r.stdout, "--helper ephemeral") {
		t.Errorf("no hint to use --helper ephemeral:\n%s", r)
	}

	r = mustLivesync(t, "-n", ns, "deploy/web", local+":/app-root-owned/sub", local+":/home/app/src", "--dry-run", "-o", "json")
	evs := dryRunEvents(t, r.stdout)
	if pf := evs["/app-root-owned/sub"].Preflight; pf == nil || pf.UID != "1000" || pf.GID != "1000" || pf.Root != "missing" || pf.Writable ||
		pf.Transport != "stream" || pf.Helper || !pf.Tar || !strings.Contains(pf.Hint, "--helper ephemeral") || pf.Error != "" {
		t.Errorf("into /app-root-owned/sub: %s", evs["/app-root-owned/sub"].Line)
	}
	if pf := evs["/home/app/src"].Preflight; pf == nil || pf.UID != "1000" || pf.Root != "missing" || !pf.Writable || pf.Hint != "" {
		t.Errorf("into /home/app/src: %s", evs["/home/app/src"].Line)
	}
	for _, ev := range sessiontest.ParseEvents(r.stdout) {
		if (ev.Type == "target-added" || ev.Type == "initial-sync") && ev.Transport != "stream" {
			t.Errorf("a dry run's %s event does not say the stream a real run would use: %s", ev.Type, ev.Line)
		}
	}
	if after := statListing(t, ns, pod, "/app-root-owned", "/home/app"); after != before {
		t.Errorf("the dry runs changed the container:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	drepo := "preflight-distroless-" + ns
	pushImage(t, drepo, "dev", "distroless")
	deploymentWith(t, ns, "nosh", image(drepo, "dev"), func(*corev1.PodSpec) {})
	r = mustLivesync(t, "-n", ns, "deploy/nosh", local+":/app", "--helper-image", helperImage(t), "--dry-run", "-o", "json")
	ev := dryRunEvents(t, r.stdout)["/app"]
	if ev.Preflight == nil || !strings.Contains(ev.Preflight.Error, "helper") || len(ev.Copy) != 3 {
		t.Errorf("into a distroless container: %s\n%s", ev.Line, r)
	}
	if got := ephemeralNames(t, ns, runningPods(t, ns, "app=nosh")[0].Name); len(got) != 0 {
		t.Errorf("the dry run added ephemeral containers %v", got)
	}
}
