package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/livesync-dev/kubectl-livesync/pkg/project"
	"github.com/livesync-dev/kubectl-livesync/pkg/report"
)

// TestFileNeedsTrustToReachOut: an entry of livesync.yaml may not sync from outside the file's
// directory tree (absolute, .., or through a symlink) nor add helper containers of its choosing
// unless the command line says so: --trust-file, or the overriding flag. A refusal is one line
// naming the entry, the field and the flag, before anything talks to the cluster.
func TestFileNeedsTrustToReachOut(t *testing.T) {
	root := repo(t, "web")
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(root, "web")
	for _, d := range []string{filepath.Join(web, "static"), filepath.Join(outside, ".ssh")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"assets": outside, "current": "static", "up": ".."} {
		if err := os.Symlink(to, filepath.Join(web, link)); err != nil {
			t.Fatal(err)
		}
	}
	const kubeconfig = "no cluster to talk to" // Validate passed: the run got as far as the kubeconfig
	for _, tc := range []struct {
		name, fields string
		args         []string
		want         string // "" for accepted
	}{
		{name: "inside", fields: "mappings: [./static:/app]"},
		{name: "the file's directory", fields: "mappings: [.:/app]"},
		{name: "inside through a symlink", fields: "mappings: [./current:/app]"},
		{name: "absolute inside", fields: "mappings: [" + filepath.Join(web, "static") + ":/app]"},
		{name: "absolute", fields: "mappings: [" + filepath.Join(outside, ".ssh") + ":/app]",
			want: `entry "api": mappings[0]: LOCAL "` + filepath.Join(outside, ".ssh") + `" is outside ` + web + `, the file's directory: run with --trust-file if you trust this file`},
		{name: "dot dot", fields: "mappings: [./static:/app, ../api:/srv]",
			want: `entry "api": mappings[1]: LOCAL "../api" is ` + filepath.Join(root, "api") + `, outside ` + web + `, the file's directory: run with --trust-file if you trust this file`},
		{name: "a committed symlink out", fields: "mappings: [./assets/.ssh:/app]",
			want: `entry "api": mappings[0]: LOCAL "./assets/.ssh" is ` + filepath.Join(outside, ".ssh") + `, outside ` + web + `, the file's directory: run with --trust-file`},
		{name: "a committed symlink up", fields: "mappings: [./up:/app]",
			want: `entry "api": mappings[0]: LOCAL "./up" is ` + root + `, outside ` + web},
		{name: "absolute, trusted", fields: "mappings: [" + filepath.Join(outside, ".ssh") + ":/app]", args: []string{"--trust-file"}},
		{name: "a committed symlink out, trusted", fields: "mappings: [./assets:/app]", args: []string{"--trust-file"}},
		{name: "helper ephemeral", fields: "mappings: [.:/app]\n  helper: ephemeral",
			want: `entry "api": helper: ephemeral adds a helper container (root with SYS_PTRACE where allowed) to every pod: pass --helper ephemeral, or run with --trust-file if you trust this file`},
		{name: "helper ephemeral, given", fields: "mappings: [.:/app]\n  helper: ephemeral", args: []string{"--helper", "ephemeral"}},
		{name: "helper ephemeral, overridden", fields: "mappings: [.:/app]\n  helper: ephemeral", args: []string{"--helper", "never"}},
		{name: "helper ephemeral, trusted", fields: "mappings: [.:/app]\n  helper: ephemeral", args: []string{"--trust-file"}},
		{name: "helper auto", fields: "mappings: [.:/app]\n  helper: auto"},
		{name: "helper image", fields: "mappings: [.:/app]\n  helperImage: evil.example/x:1",
			want: `entry "api": helperImage: "evil.example/x:1" would run in helper containers in the pods: pass --helper-image evil.example/x:1, or run with --trust-file if you trust this file`},
		{name: "helper image, given", fields: "mappings: [.:/app]\n  helperImage: evil.example/x:1", args: []string{"--helper-image", "evil.example/x:1"}},
		{name: "helper image, trusted", fields: "mappings: [.:/app]\n  helperImage: evil.example/x:1", args: []string{"--trust-file"}},
		{name: "on-sync runs with a note", fields: "mappings: [.:/app]\n  onSync: kill -HUP 1"},
		{name: "forward on loopback", fields: "mappings: [.:/app]\n  forward: ['8080:80', '127.0.0.1:8081:http', '[::1]:8082:80']\n  logs: true"},
		{name: "forward on every address", fields: "mappings: [.:/app]\n  forward: ['8080:80', '0.0.0.0:8081:80']",
			want: `entry "api": forward[1]: "0.0.0.0:8081:80" listens on 0.0.0.0, where other machines can reach the pod: pass --forward 0.0.0.0:8081:80, or run with --trust-file if you trust this file`},
		{name: "forward on every address, given", fields: "mappings: [.:/app]\n  forward: ['0.0.0.0:8081:80']", args: []string{"--forward", "0.0.0.0:8081:80"}},
		{name: "forward on every address, trusted", fields: "mappings: [.:/app]\n  forward: ['0.0.0.0:8081:80']", args: []string{"--trust-file"}},
		{name: "forward with --once", fields: "mappings: [.:/app]\n  forward: ['8080:80']", args: []string{"--once"},
			want: `entry "api": forward: in livesync.yaml needs a running session and --once ends after the initial sync: drop one of them`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(web, project.FileName)
			yaml := "apiVersion: livesync.dev/v1alpha1\nkind: LiveSync\nsyncs:\n- name: api\n  workload: deploy/api\n  " + tc.fields + "\n"
			if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := execute(t, tc.args...)
			switch {
			case err == nil:
				t.Fatal("ran without a cluster")
			case tc.want == "" && !strings.Contains(err.Error(), kubeconfig):
				t.Errorf("refused: %v", err)
			case tc.want != "" && (!strings.HasPrefix(err.Error(), file+": "+tc.want) || strings.Contains(err.Error(), "\n")):
				t.Errorf("error %v\nwant one line starting with %s: %s", err, file, tc.want)
			}
		})
	}
}

// TestFileOnSyncIsNoted: a command the file runs in the containers is named once per entry
// when the run starts, the way make echoes a recipe; --on-sync replaces it and says nothing.
func TestFileOnSyncIsNoted(t *testing.T) {
	root := repo(t, "web")
	file := filepath.Join(root, project.FileName)
	yaml := "apiVersion: livesync.dev/v1alpha1\nkind: LiveSync\nsyncs:\n- name: api\n  workload: deploy/api\n  mappings: [./api:/app]\n  onSync: kill -HUP 1\n" +
		"- name: web\n  workload: deploy/web\n  mappings: [./web:/srv]\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args      []string
		text      string
		jsonEvent string
	}{
		{text: `[api] note: onSync from ` + file + ` runs sh -c "kill -HUP 1" in each container after each sync; --on-sync overrides it` + "\n",
			jsonEvent: `"entry":"api","message":"onSync from ` + file + ` runs sh -c \"kill -HUP 1\" in each container after each sync; --on-sync overrides it"`},
		{args: []string{"--on-sync", "true"}},
		{args: []string{"--dry-run"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			g := &globalOptions{configFlags: genericclioptions.NewConfigFlags(true), IOStreams: genericiooptions.NewTestIOStreamsDiscard()}
			o := &SyncOptions{g: g}
			cmd := newCmdSyncFor(o)
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			o.args, o.flags = cmd.Flags().Args(), cmd.Flags()
			if err := o.findProject(); err != nil {
				t.Fatal(err)
			}
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			o.noteFileCommands(report.NewPrinter(&out, &errOut, false))
			if errOut.String() != tc.text || out.Len() > 0 {
				t.Errorf("stderr %q, stdout %q; want stderr %q", errOut.String(), out.String(), tc.text)
			}
			out.Reset()
			o.noteFileCommands(report.NewPrinter(&out, &errOut, true))
			if tc.jsonEvent == "" && out.Len() > 0 || !strings.Contains(out.String(), tc.jsonEvent) || tc.jsonEvent != "" && !strings.HasPrefix(out.String(), `{"type":"note",`) {
				t.Errorf("NDJSON %q, want %s", out.String(), tc.jsonEvent)
			}
		})
	}
}

// TestForwardFlagWithSeveralEntries: --forward on the command line would listen once per
// entry; it needs the entry named. A file's forward of its own is fine.
func TestForwardFlagWithSeveralEntries(t *testing.T) {
	root := repo(t, "web")
	file := filepath.Join(root, "web", project.FileName)
	yaml := "apiVersion: livesync.dev/v1alpha1\nkind: LiveSync\nsyncs:\n" +
		"- name: api\n  workload: deploy/api\n  mappings: [.:/app]\n  forward: ['0:http']\n  logs: true\n" +
		"- name: web\n  workload: deploy/web\n  mappings: [.:/app]\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no cluster to talk to"},
		{[]string{"--forward", "8080:80"}, "--forward would listen once for each of the 2 entries of " + file + ": name the entry to forward to (kubectl livesync ENTRY --forward ...), or put forward: in it"},
		{[]string{"web", "--forward", "8080:80"}, "no cluster to talk to"},
	} {
		_, _, err := execute(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
