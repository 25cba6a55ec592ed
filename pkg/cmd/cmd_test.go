package cmd

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// execute runs the root command with args against a kubeconfig that points nowhere, so any
// test that reaches the cluster fails loudly: these tests cover what happens before that.
func execute(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := NewCmdLiveSync(streams)
	cmd.SetArgs(append([]string{"--kubeconfig", "/nonexistent/kubeconfig", "--server", "https://127.0.0.1:1"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestHelpSaysKubectlLivesync(t *testing.T) {
	out, _, err := execute(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubectl livesync", "inspect", "refresh", "pull-policy", "restore", "--context", "--namespace", "--as"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	out, _, _ = execute(t, "refresh", "--help")
	if !strings.Contains(out, "kubectl livesync refresh") {
		t.Errorf("subcommand help lacks its kubectl name:\n%s", out)
	}
}

func TestValidationBeforeTheCluster(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"pull-policy", "deploy/web", "Sometimes"}, `invalid image pull policy "Sometimes"`},
		{[]string{"pull-policy", "Always"}, "name a workload"},
		{[]string{"refresh", "deploy/web", "--watch", "--dry-run"}, "cannot be combined"},
		{[]string{"refresh", "deploy/web", "--watch", "--interval", "10ms"}, "too short"},
		{[]string{"inspect", "deploy/web", "-o", "xml"}, "invalid output format"},
		{[]string{"restore"}, "name a workload"},
		{[]string{"version", "-o", "xml"}, "invalid output format"},
		{[]string{"deploy/web", ".:/app", "--exec-timeout", "10ms"}, "--exec-timeout 10ms is too short"},
		{[]string{"deploy/web", ".:/app", "--on-sync-timeout", "0s"}, "--on-sync-timeout 0s: use a positive duration"},
		{[]string{"deploy/web", ".:/app", "--transport", "ssh"}, `invalid --transport "ssh": use stream or exec`},
		{[]string{"deploy/web", ".:/app", "--forward", "8080:80", "--logs", "--once"}, "--forward and --logs need a running session and --once ends after the initial sync: drop one of them"},
		{[]string{"deploy/web", ".:/app", "--logs", "--dry-run"}, "--logs needs a running session and --dry-run changes nothing"},
		{[]string{"deploy/web", ".:/app", "--forward", "8080:"}, `invalid argument "8080:" for "--forward" flag: REMOTE is empty: want [ADDRESS:]LOCAL:REMOTE`},
		{[]string{"deploy/web", ".:/app", "--forward", "8080:80", "--forward", "localhost:8080:http"}, "--forward 8080:80 and 127.0.0.1:8080:http both listen on 127.0.0.1:8080"},
		{[]string{"deploy/web", ".:/app", "--logs", "--logs-tail", "-2"}, "--logs-tail -2: use -1 (all), 0 or more"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := execute(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func TestVersionJSON(t *testing.T) {
	out, _, err := execute(t, "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(out), &v); err != nil || v["version"] == "" || v["platform"] == "" {
		t.Errorf("version -o json = %q, %v", out, err)
	}
}
