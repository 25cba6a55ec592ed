//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// TestWindowsBinaryUnderWine: the Windows build (kubectl-livesync.exe) run under wine syncs a
// tree into the cluster and follows an edit, a delete and a rename, checked as TestSyncLoop checks
// the Linux build; the modes that arrive are a Unix umask's, and a script keeps its exec bit. Its watcher is notify's ReadDirectoryChangesW backend (wine implements it over
// inotify), its paths Windows paths (Z:\ is wine's /). hack/e2e.sh builds the binary and the wine
// prefix (hack/wine.sh) and sets LIVESYNC_WINDOWS_BINARY and LIVESYNC_WINE.
func TestWindowsBinaryUnderWine(t *testing.T) {
	exe, wine := os.Getenv("LIVESYNC_WINDOWS_BINARY"), os.Getenv("LIVESYNC_WINE")
	if exe == "" || wine == "" {
		t.Fatal("LIVESYNC_WINDOWS_BINARY and LIVESYNC_WINE are unset: run through hack/e2e.sh, which builds the .exe and the wine prefix")
	}
	ns := namespace(t)
	repo := "win-" + ns
	pushImage(t, repo, "dev", "app")
	deployment(t, ns, "web", image(repo, "dev"), 1, corev1.PullIfNotPresent)
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")
	write(t, filepath.Join(local, "src/main.py"), "print('hi')")
	write(t, filepath.Join(local, "src/old.py"), "old")
	write(t, filepath.Join(local, "gone.txt"), "to be deleted")
	const sel, root = "app=web", "/app"
	// A script the container already has, executable, with the local content: nothing on
	// Windows says it is executable, so the sync must keep the container's exec bit, at the
	// initial sync and when an edit sends it (the local file is 0755 in Linux's view, which
	// the tree check compares).
	const script = "#!/bin/sh\necho run\n"
	write(t, filepath.Join(local, "run.sh"), script)
	must(t, os.Chmod(filepath.Join(local, "run.sh"), 0o755))
	pod := runningPods(t, ns, sel)[0].Name
	if r := kexec(t, ns, pod, "sh", "-c", `mkdir -p "$1" && printf "$2" >"$1/run.sh" && chmod 755 "$1/run.sh"`, "sh", root, script); r.code != 0 {
		t.Fatalf("seeding run.sh: %s", r)
	}

	s := sessiontest.NewSession(t, exe).Via(wine, "exec").
		Kubeconfig(winePath(kubeconfigFor([]string{"-n", ns}))).Namespace(ns).
		Args("deploy/web", "--sync-back", "gen/**").Map(winePath(local), root).Start()
	waitConverged(t, ns, sel, 1, local, root, 2*time.Minute)

	steps := []struct {
		name string
		do   func()
	}{
		{"edit", func() { write(t, filepath.Join(local, "index.html"), "v2, longer than before") }},
		{"edit a script", func() { write(t, filepath.Join(local, "run.sh"), script+"echo more\n") }},
		{"create in a new directory", func() { write(t, filepath.Join(local, "a/b/new.txt"), "new") }},
		{"delete", func() { must(t, os.Remove(filepath.Join(local, "gone.txt"))) }},
		{"rename a file", func() { must(t, os.Rename(filepath.Join(local, "src/old.py"), filepath.Join(local, "src/new.py"))) }},
		{"rename a directory", func() { must(t, os.Rename(filepath.Join(local, "a"), filepath.Join(local, "z"))) }},
		{"editor atomic save", func() {
			tmp := filepath.Join(local, "src/.main.py.swp")
			write(t, tmp, "print('saved')")
			must(t, os.Rename(tmp, filepath.Join(local, "src/main.py")))
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.do()
			waitConverged(t, ns, sel, 1, local, root, time.Minute)
		})
	}
	// Windows has no Unix modes (Go reports files 0666, directories 0777): what arrives must
	// still be 0644 and 0755, not writable by every user of the container.
	t.Run("modes", func(t *testing.T) {
		pod := runningPods(t, ns, sel)[0].Name
		r := kexec(t, ns, pod, "sh", "-c", `find "$1" -perm -o+w -exec ls -ld {} +`, "sh", root)
		if r.code != 0 || r.stdout != "" {
			t.Errorf("world-writable entries in the container: %s", r)
		}
		r = kexec(t, ns, pod, "sh", "-c", `ls -ld "$1/index.html" "$1/src"`, "sh", root)
		if !strings.HasPrefix(r.stdout, "-rw-r--r--") || !strings.Contains(r.stdout, "\ndrwxr-xr-x") {
			t.Errorf("index.html and src/ should be -rw-r--r-- and drwxr-xr-x: %s", r)
		}
	})
	// Sync-back writes on Windows: an executable the container makes comes home once, and
	// not again on every pass, though the Windows side cannot mark it executable.
	t.Run("sync-back of an executable", func(t *testing.T) {
		pod := runningPods(t, ns, sel)[0].Name
		if r := kexec(t, ns, pod, "sh", "-c", `mkdir -p "$1/gen" && printf tool >"$1/gen/tool.sh" && chmod 755 "$1/gen/tool.sh"`, "sh", root); r.code != 0 {
			t.Fatal(r)
		}
		home := func(rel, content string) func() (bool, error) {
			return func() (bool, error) {
				b, _ := os.ReadFile(filepath.Join(local, filepath.FromSlash(rel)))
				return string(b) == content, nil
			}
		}
		waitFor(t, "gen/tool.sh locally", time.Minute, home("gen/tool.sh", "tool"))
		// A later pass brings another file: by then a pass that took tool.sh as changed in the
		// container again would have brought it again.
		if r := kexec(t, ns, pod, "sh", "-c", `printf later >"$1/gen/later.txt"`, "sh", root); r.code != 0 {
			t.Fatal(r)
		}
		waitFor(t, "gen/later.txt locally", time.Minute, home("gen/later.txt", "later"))
		n := 0
		for _, ev := range s.Events() {
			if ev.Type == "synced-back" && slices.ContainsFunc(ev.Paths, func(p string) bool { return strings.HasSuffix(p, `gen\tool.sh`) }) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("gen/tool.sh came home %d times, want once:\n%s", n, s.Dump())
		}
	})
	sum := s.Stop()
	t.Logf("Windows binary under wine: %+v", sum)
}

// winePath is the Windows name wine gives the absolute Linux path p: Z: is /.
func winePath(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }
