package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// guardKubeconfig has a context "remote" whose API server is not on this machine.
const guardKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: remote
  cluster: {server: "https://192.0.2.10:6443"}
users:
- name: alice
  user: {token: x}
contexts:
- name: remote
  context: {cluster: remote, user: alice}
current-context: remote
`

// TestGuardRefusesWritesWithoutTerminal: refresh, pull-policy and restore, and a sync that
// changes its workload, are refused without a terminal on a context that is not local, in one
// line and before the cluster is reached (its address does not answer); allowContexts naming
// the context at its server lets them through to the cluster; --dry-run and a plain sync are
// never refused.
func TestGuardRefusesWritesWithoutTerminal(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(guardKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	refused := "refused on a cluster that is not local: context \"remote\" (API server https://192.0.2.10:6443)"
	for _, args := range [][]string{
		{"refresh", "deploy/web"},
		{"pull-policy", "deploy/web", "Always"},
		{"restore", "deploy/web"},
		{"deploy/web", "./src:/app", "--refresh"},
		{"deploy/web", "./src:/app", "--restart", "process"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := runIn(t, dir, append([]string{"--kubeconfig", kc, "--connect-timeout", "1s"}, args...)...)
			assertOneLine(t, out, errOut, refused)
			if code != ExitUsage || !strings.Contains(errOut, `allowContexts: [{context: remote, server: "https://192.0.2.10:6443"}]`) {
				t.Errorf("exit %d: %s", code, errOut)
			}
		})
	}
	t.Run("allowed by livesync.yaml", func(t *testing.T) {
		yaml := "apiVersion: livesync.dev/v1alpha1\nkind: LiveSync\nallowContexts:\n- {context: remote, server: \"https://192.0.2.10:6443\"}\nsyncs:\n- {name: web, workload: deploy/web, mappings: [\"./src:/app\"]}\n"
		if err := os.WriteFile(filepath.Join(dir, "livesync.yaml"), []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(filepath.Join(dir, "livesync.yaml"))
		_, errOut, code := runIn(t, dir, "--kubeconfig", kc, "--connect-timeout", "1s", "refresh", "deploy/web")
		if strings.Contains(errOut, "refused on a cluster") || code != ExitCluster {
			t.Errorf("exit %d, want the cluster reached (and not answering): %s", code, errOut)
		}
	})
	t.Run("dry run", func(t *testing.T) {
		_, errOut, code := runIn(t, dir, "--kubeconfig", kc, "--connect-timeout", "1s", "refresh", "deploy/web", "--dry-run")
		if strings.Contains(errOut, "refused on a cluster") || code != ExitCluster {
			t.Errorf("exit %d: %s", code, errOut)
		}
	})
}
