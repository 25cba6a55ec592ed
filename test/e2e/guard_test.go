//go:build e2e

package e2e

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// connectProxy serves HTTP CONNECT on a loopback port for the test and counts the tunnels it
// opened: a cluster reached through it is not local, whatever its address says.
func connectProxy(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	var tunnels atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		tunnels.Add(1)
		w.WriteHeader(http.StatusOK)
		down, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			_ = up.Close()
			return
		}
		go func() { _, _ = io.Copy(up, down); _ = up.Close() }()
		_, _ = io.Copy(down, up)
		_ = down.Close()
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String(), &tunnels
}

// TestWriteGuard: a refresh without a terminal, on a context whose API server is reached
// through a proxy (so not local, though the local cluster answers), is refused in one line that
// says how to allow it; with allowContexts naming that context at its server in livesync.yaml,
// the same refresh goes through (the proxy carried it).
func TestWriteGuard(t *testing.T) {
	ns := namespace(t)
	repo := "guard-" + ns
	pushImage(t, repo, "dev", "app")
	deployment(t, ns, "web", image(repo, "dev"), 1, corev1.PullIfNotPresent)

	proxy, tunnels := connectProxy(t)
	cfg, err := clientcmd.LoadFromFile(kubeconfigFor([]string{"-n", ns}))
	if err != nil {
		t.Fatal(err)
	}
	cur := cfg.Contexts[cfg.CurrentContext]
	cluster := cfg.Clusters[cur.Cluster]
	cluster.ProxyURL = proxy
	cfg.Contexts["remote-dev"] = cur
	cfg.CurrentContext = "remote-dev"
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	refresh := func() result {
		cmd := exec.Command(e.binary, "--kubeconfig", kc, "-n", ns, "refresh", "deploy/web")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LIVESYNC_NONINTERACTIVE=1") // no terminal either way
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		r := result{stdout: out.String(), stderr: errb.String()}
		var ee *exec.ExitError
		if asExit(err, &ee) {
			r.code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return r
	}

	r := refresh()
	t.Logf("refused: %s", r.stderr)
	allow := `allowContexts: [{context: remote-dev, server: "` + cluster.Server + `"}]`
	if r.code != 2 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "refused on a cluster that is not local") || !strings.Contains(r.stderr, allow) {
		t.Errorf("want exit 2 and one line saying %s: %s", allow, r)
	}
	if n := tunnels.Load(); n != 0 {
		t.Errorf("the refused run reached the cluster (%d tunnels)", n)
	}

	yaml := "apiVersion: livesync.dev/v1alpha1\nkind: LiveSync\n" + allow + "\nsyncs:\n- {name: web, workload: deploy/web, mappings: [\"./src:/app\"]}\n"
	if err := os.WriteFile(filepath.Join(dir, "livesync.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	r = refresh()
	t.Logf("allowed: %s", r)
	if r.code != 0 || tunnels.Load() == 0 {
		t.Errorf("allowed by livesync.yaml: want exit 0 through the proxy (%d tunnels): %s", tunnels.Load(), r)
	}
}
