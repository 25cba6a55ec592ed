//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// newSession is a session of the binary under test in namespace ns, run as the documented
// Role's user there; the test adds the workload, the mappings and flags, and starts it.
func newSession(t *testing.T, ns string) *sessiontest.Session {
	return sessiontest.NewSession(t, e.binary).Kubeconfig(kubeconfigFor([]string{"-n", ns})).Namespace(ns)
}

// tree maps a slash-separated relative path to "d", "l:TARGET" or "f:MODE:SHA256".
type tree map[string]string

func (tr tree) diff(other tree) string {
	var out []string
	for k, v := range tr {
		if o, ok := other[k]; !ok {
			out = append(out, fmt.Sprintf("missing in container: %q", k))
		} else if o != v {
			out = append(out, fmt.Sprintf("differs: %q local %s container %s", k, v, o))
		}
	}
	for k := range other {
		if _, ok := tr[k]; !ok {
			out = append(out, fmt.Sprintf("extra in container: %q", k))
		}
	}
	sort.Strings(out)
	if len(out) > 10 {
		out = append(out[:10], fmt.Sprintf("... %d more", len(out)-10))
	}
	return strings.Join(out, "\n")
}

// localTree reads a local directory the way the container should see it.
func localTree(t *testing.T, root string) tree {
	t.Helper()
	tr := tree{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			tr[rel] = "l:" + target
		case info.IsDir():
			tr[rel] = "d"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			tr[rel] = fmt.Sprintf("f:%o:%s", info.Mode().Perm()&0o111, hex.EncodeToString(sum[:8]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// remoteTree reads a directory in a container by streaming `tar -c` out through kubectl exec.
func remoteTree(ns, pod, container, root string) (tree, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.kubectl, "--kubeconfig", e.kubeconfig, "-n", ns, "exec", pod, "-c", container, "--",
		"sh", "-c", `cd "$1" 2>/dev/null || exit 0; tar -c -f - .`, "sh", root)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("reading %s of %s: %w: %s", root, pod, err, errb.String())
	}
	tr := tree{}
	r := tar.NewReader(&out)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if rel == "" || rel == "." {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			tr[rel] = "d"
		case tar.TypeSymlink:
			tr[rel] = "l:" + h.Linkname
		default:
			hash := sha256.New()
			if _, err := io.Copy(hash, r); err != nil {
				return nil, err
			}
			tr[rel] = fmt.Sprintf("f:%o:%s", h.Mode&0o111, hex.EncodeToString(hash.Sum(nil)[:8]))
		}
	}
	return tr, nil
}

// waitConverged waits until exactly want running pods match the selector and every one holds
// the local tree under root.
func waitConverged(t *testing.T, ns, selector string, want int, local, root string, timeout time.Duration) {
	t.Helper()
	waitTree(t, ns, selector, want, localTree(t, local), root, timeout)
}

// waitTree waits until exactly want running pods match the selector and every one holds lt,
// nothing more, under root.
func waitTree(t *testing.T, ns, selector string, want int, lt tree, root string, timeout time.Duration) {
	t.Helper()
	last := ""
	deadline := time.Now().Add(timeout)
	for {
		pods := runningPods(t, ns, selector)
		ok := len(pods) == want
		if !ok {
			last = fmt.Sprintf("%d running pods, want %d", len(pods), want)
		}
		for _, p := range pods {
			if !ok {
				break
			}
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
				ok, last = false, "pod "+p.Name+" not running"
				break
			}
			rt, err := remoteTree(ns, p.Name, "app", root)
			if err != nil {
				ok, last = false, err.Error()
				break
			}
			if d := lt.diff(rt); d != "" {
				ok, last = false, "pod "+p.Name+":\n"+d
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("containers did not converge in %s: %s", timeout, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// kexec runs a command in a pod's container through the real kubectl.
func kexec(t *testing.T, ns, pod string, argv ...string) result {
	t.Helper()
	return run(t, e.kubectl, append([]string{"--kubeconfig", e.kubeconfig, "-n", ns, "exec", pod, "-c", "app", "--"}, argv...)...)
}
