package filesync

import (
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

const nobody = 65534

// asNobody runs the calling top-level test again in a child process as uid
// and gid 65534 when the tests run as root, which reads and writes anything;
// it returns true where the test body should run (in that child, or when not
// root), false in the parent, which only reports the child's outcome.
func asNobody(t *testing.T) bool {
	t.Helper()
	if os.Getuid() != 0 {
		return true
	}
	// The test binary sits in a directory only root may enter: run a copy.
	exe, err := os.Executable()
	must(t, err)
	dir := t.TempDir()
	must(t, os.Chmod(dir, 0o755))
	must(t, os.Chmod(filepath.Dir(dir), 0o755))
	bin := filepath.Join(dir, "sync.test")
	src, err := os.Open(exe)
	must(t, err)
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	must(t, err)
	_, err = io.Copy(dst, src)
	must(t, err)
	must(t, dst.Close())

	cmd := exec.Command(bin, "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	t.Logf("as uid %d:\n%s", nobody, out)
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("as uid %d: %v", nobody, err)
	}
	return false
}

// nonRootExecutors returns the busybox and GNU executors running as uid
// 65534, and a sandbox directory that user owns for remote roots.
func nonRootExecutors(t *testing.T) (map[string]*localExecutor, string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to run the remote side as another user")
	}
	exs := executors(t)
	attr := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	for _, ex := range exs {
		ex.SysProcAttr = attr
		if ex.Bin != "" {
			// busybox(t) made the applet directory 0700 for root.
			must(t, os.Chmod(ex.Bin, 0o755))
			must(t, os.Chmod(filepath.Dir(ex.Bin), 0o755))
		}
	}
	sandbox := t.TempDir()
	must(t, os.Chmod(filepath.Dir(sandbox), 0o755))
	must(t, os.Chown(sandbox, nobody, nobody))
	return exs, sandbox
}

// A local directory that cannot be listed is left alone in the container,
// with everything under it, and reported; mirror used to delete its remote
// children. Root lists any directory, so this runs as uid 65534.
func TestMirrorLeavesUnreadableDirsAlone(t *testing.T) {
	if !asNobody(t) {
		return
	}
	ex := busybox(t)
	local, remote := t.TempDir(), t.TempDir()
	writeTree(t, local, map[string]string{"ok": "ok", "secret/s": "s", "secret/sub/t": "t"})
	writeTree(t, remote, map[string]string{"ok": "ok", "secret/keep": "k", "secret/sub/t": "old", "other": "o"})
	must(t, os.Chmod(filepath.Join(local, "secret"), 0))
	t.Cleanup(func() { os.Chmod(filepath.Join(local, "secret"), 0o755) })

	is, rec := onceSync(t, ex, Config{
		Mappings: []planner.Mapping{{Local: planner.LocalPath(local), Remote: planner.RemotePath(remote)}}, Initial: planner.InitialMirror,
	})
	if is.Err != nil {
		t.Fatal(is.Err)
	}
	want := map[string]string{
		"ok": "file -rw-r--r-- ok", "secret": "dir -rwxr-xr-x", "secret/keep": "file -rw-r--r-- k",
		"secret/sub": "dir -rwxr-xr-x", "secret/sub/t": "file -rw-r--r-- old",
	}
	if got := readTree(t, remote); !maps.Equal(got, want) {
		t.Errorf("remote = %q, want %q", got, want)
	}
	errs := rec.errors()
	if len(errs) != 1 {
		t.Fatalf("reported %v, want one warning about secret", errs)
	}
	assertOneLine(t, errs[0].Err, filepath.Join(local, "secret"), "permission denied")
}

// A read-only local directory (0555) reaches a container whose user is not
// root: busybox tar created it read-only before its children and failed.
// Directories are sent writable and get their mode after their contents,
// also when a later batch adds a file to one that exists.
func TestNonRootReadOnlyDirs(t *testing.T) {
	exs, sandbox := nonRootExecutors(t)
	for name, ex := range exs {
		t.Run(name, func(t *testing.T) {
			local := t.TempDir()
			remote := filepath.Join(sandbox, name, "app")
			writeTree(t, local, map[string]string{"ro/sub/f": "f", "ro/g": "g", "locked/x": "x", "plain/y": "y"})
			for _, d := range []string{"ro/sub", "ro"} {
				must(t, os.Chmod(filepath.Join(local, d), 0o555))
			}
			must(t, os.Chmod(filepath.Join(local, "locked"), 0o500))
			m := testMapping(t, local, remote, nil)
			idx := planner.NewIndex()
			syncOnce(t, ex, m, idx)
			assertSameTree(t, local, remote)

			// A new file in an existing read-only directory.
			must(t, os.Chmod(filepath.Join(local, "ro/sub"), 0o755))
			writeTree(t, local, map[string]string{"ro/sub/new": "n"})
			must(t, os.Chmod(filepath.Join(local, "ro/sub"), 0o555))
			p, err := planner.Changes(m, idx, []string{"ro/sub/new"}, false)
			must(t, err)
			res, err := apply(t.Context(), ex, testTarget, m, &sending{Plan: p}, tarstream.Options{})
			must(t, err)
			idx.Apply(p, res.Result)
			assertSameTree(t, local, remote)
		})
	}
}
