//go:build e2e

package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// session is a running `kubectl-livesync WORKLOAD LOCAL:REMOTE -o json`.
type session struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	mu     sync.Mutex
	events []map[string]any
	done   chan error
}

// startSync starts a sync session with NDJSON output; the test stops it (or Cleanup does).
func startSync(t *testing.T, args ...string) *session {
	t.Helper()
	s := &session{done: make(chan error, 1)}
	s.cmd = exec.Command(e.binary, append([]string{"--kubeconfig", kubeconfigFor(args), "-o", "json"}, args...)...)
	s.cmd.Stderr = &s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev map[string]any
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				ev = map[string]any{"type": "invalid-json", "line": sc.Text()}
			}
			s.mu.Lock()
			s.events = append(s.events, ev)
			s.mu.Unlock()
		}
		s.done <- s.cmd.Wait()
	}()
	t.Cleanup(func() { s.kill() })
	return s
}

func (s *session) kill() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
	}
}

// stop interrupts the session like Ctrl-C and expects a clean exit 0.
func (s *session) stop(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("session exit after Ctrl-C: %v\nstderr:\n%s", err, s.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("session did not stop within 30s of Ctrl-C")
	}
	// The contract of every NDJSON line, whatever its type (new types included): a type and
	// a time in RFC 3339, UTC.
	for _, ev := range s.snapshot() {
		if ev["type"] == "invalid-json" {
			t.Errorf("-o json printed a non-JSON line: %v", ev["line"])
			continue
		}
		ts, _ := ev["time"].(string)
		if typ, _ := ev["type"].(string); typ == "" || !isRFC3339UTC(ts) {
			t.Errorf("-o json event without a type or an RFC 3339 UTC time: %v", ev)
		}
	}
}

func isRFC3339UTC(ts string) bool {
	parsed, err := time.Parse(time.RFC3339Nano, ts)
	return err == nil && strings.HasSuffix(ts, "Z") && parsed.Location() == time.UTC
}

func (s *session) snapshot() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.events...)
}

// count returns how many events of a type were printed.
func (s *session) count(typ string) int {
	n := 0
	for _, ev := range s.snapshot() {
		if ev["type"] == typ {
			n++
		}
	}
	return n
}

func (s *session) dump() string {
	var b strings.Builder
	for _, ev := range s.snapshot() {
		j, _ := json.Marshal(ev)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String() + "stderr:\n" + s.stderr.String()
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
