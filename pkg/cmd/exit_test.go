package cmd

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// runIn runs the root command in dir (no livesync.yaml there unless the test wrote one) and
// returns stdout, stderr as main prints it, and the exit code main would return.
func runIn(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	t.Chdir(dir)
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := NewCmdLiveSync(streams)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	if err != nil {
		fmt.Fprintln(errOut, "error:", err)
	}
	return out.String(), errOut.String(), ExitCode(err)
}

// assertOneLine checks that stderr is one line holding want and stdout is empty.
func assertOneLine(t *testing.T, out, errOut, want string) {
	t.Helper()
	if out != "" {
		t.Errorf("stdout is not empty:\n%s", out)
	}
	if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, want) {
		t.Errorf("stderr is not one line with %q:\n%s", want, errOut)
	}
}

func TestNothingToSyncIsAnError(t *testing.T) {
	for _, args := range [][]string{nil, {"--once"}, {"-o", "json"}, {"--dry-run"}, {"-n", "ns"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, errOut, code := runIn(t, t.TempDir(), args...)
			assertOneLine(t, out, errOut, "nothing to sync: no workload given and no livesync.yaml here or above")
			if code != ExitUsage {
				t.Errorf("exit code %d, want %d", code, ExitUsage)
			}
		})
	}
}

// TestBadLivesyncYAMLIsUsage: a livesync.yaml that does not parse or
// validate is bad input (exit 2), named at its line; a missing field at
// the file's first line, never line 0.
func TestBadLivesyncYAMLIsUsage(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"apiVersion: livesync.dev/v1alpha1\nkind: LiveSync\nsyncs:\n  - name: api\n    workloadd: deploy/api\n", `livesync.yaml:5: unknown field "workloadd" in syncs[0]: the fields are name, workload,`},
		{"kind: LiveSync\nsyncs:\n  - name: api\n    workload: deploy/api\n    mappings: [./src:/app]\n", "livesync.yaml:1: apiVersion: missing: the file starts with apiVersion: livesync.dev/v1alpha1 and kind: LiveSync"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "livesync.yaml"), []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := runIn(t, dir, "--once")
		assertOneLine(t, out, errOut, tc.want)
		if code != ExitUsage {
			t.Errorf("%q: exit code %d, want %d", tc.want, code, ExitUsage)
		}
	}
}

func TestTyposSayWhatWasMeant(t *testing.T) {
	dir := t.TempDir()
	yaml := "apiVersion: livesync.dev/v1alpha1\nkind: LiveSync\nsyncs:\n  - name: api\n    workload: deploy/api\n    mappings: [./src:/app]\n  - name: web\n    workload: deploy/web\n    mappings: [./src:/app]\n"
	if err := os.WriteFile(filepath.Join(dir, "livesync.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"apii"}, `"apii" is not a command, an entry of livesync.yaml, or a workload with a LOCAL:REMOTE mapping; did you mean api?`},
		{[]string{"inspectt"}, "did you mean inspect?"},
		{[]string{"--oncee"}, "unknown flag: --oncee; did you mean --once?"},
		{[]string{"refresh", "deploy/x", "--dry-runn"}, "unknown flag: --dry-runn; did you mean --dry-run?"},
		{[]string{"--zzzzzz"}, "unknown flag: --zzzzzz: see kubectl livesync --help"},
		{[]string{"pull-policy", "deploy/x"}, "no pull policy after deploy/x: kubectl livesync pull-policy deploy/x Always|IfNotPresent|Never"},
		{[]string{"pull-policy", "deploy/x", "Alwayz"}, `invalid image pull policy "Alwayz"`},
		{[]string{"version", "a"}, `unknown command "a" for "kubectl livesync version"`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := runIn(t, dir, tc.args...)
			assertOneLine(t, out, errOut, tc.want)
			if code != ExitUsage {
				t.Errorf("exit code %d, want %d", code, ExitUsage)
			}
		})
	}
}

// kubeconfigFor writes a kubeconfig with contexts "one" (current, server) and "two".
func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, insecure-skip-tls-verify: true}
- name: d
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: one
  context: {cluster: c, user: u}
- name: two
  context: {cluster: d, user: u}
current-context: one
`, server)
	p := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// silent accepts connections and never answers, as a half-dead API server or a black-holed
// proxy does.
func silent(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(done)
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "https://" + l.Addr().String()
}

func TestClusterFailuresAreOneLine(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "https://" + closed.Addr().String()
	_ = closed.Close()
	unauthorized := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
	}))
	defer unauthorized.Close()
	untrusted := httptest.NewTLSServer(http.NotFoundHandler())
	defer untrusted.Close()
	silentURL := silent(t)

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no kubeconfig", []string{"--kubeconfig", "/nonexistent/config", "inspect", "deploy/x"},
			"no cluster to talk to: kubeconfig /nonexistent/config (not found); set KUBECONFIG, pass --kubeconfig, or --server"},
		{"wrong context", []string{"--kubeconfig", kubeconfigFor(t, refused), "--context", "three", "inspect", "deploy/x"},
			`context "three" is not in kubeconfig`},
		{"refused", []string{"--kubeconfig", kubeconfigFor(t, refused), "inspect", "deploy/x"},
			"(context one) refused the connection: is the cluster running? choose another with --context (contexts: one, two)"},
		{"silent", []string{"--kubeconfig", kubeconfigFor(t, silentURL), "--connect-timeout", "300ms", "inspect", "deploy/x"},
			"did not answer within 300ms: check that the cluster is up and reachable (VPN, proxy), or raise --connect-timeout"},
		{"unauthorized", []string{"--kubeconfig", kubeconfigFor(t, unauthorized.URL), "inspect", "deploy/x"},
			"rejected the credentials (401 Unauthorized): log in again or refresh the token, or choose another --context"},
		{"untrusted certificate", []string{"-s", untrusted.URL, "--token", "t", "inspect", "deploy/x"},
			"TLS: its certificate is signed by an authority the kubeconfig does not trust"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", "/nonexistent/config")
			out, errOut, code := runIn(t, t.TempDir(), tc.args...)
			assertOneLine(t, out, errOut, tc.want)
			if code != ExitCluster {
				t.Errorf("exit code %d, want %d", code, ExitCluster)
			}
			if strings.Contains(errOut, "memcache") || strings.Contains(errOut, "E1") {
				t.Errorf("klog lines on stderr:\n%s", errOut)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{fmt.Errorf("rollout failed"), ExitFailed},
		{fmt.Errorf("entry: %w", usageError{fmt.Errorf("bad")}), ExitUsage},
		{clusterError{fmt.Errorf("refused")}, ExitCluster},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestWorkloadNotFoundNamesNearOnes(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"deployment/wbe", `deployment "wbe" not found in namespace "apps": check the name, or pass -n NAMESPACE; did you mean web?`},
		{"deployment/zzzzzz", `deployment "zzzzzz" not found in namespace "apps": check the name, or pass -n NAMESPACE`},
	} {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps"}}
		c := newImageCluster(d)
		err := c.execute(t, "refresh", tc.name)
		if err == nil || err.Error() != tc.want {
			t.Errorf("refresh %s: error %v, want %s", tc.name, err, tc.want)
		}
		if code := ExitCode(err); code != ExitFailed {
			t.Errorf("refresh %s: exit code %d, want %d", tc.name, code, ExitFailed)
		}
	}
}
