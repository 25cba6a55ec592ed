package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/project"
	"github.com/livesync-dev/kubectl-livesync/pkg/report"
	"github.com/livesync-dev/kubectl-livesync/pkg/restart"
)

// repo makes a checkout with ./api and ./web and moves the test into dir below it.
func repo(t *testing.T, dir string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"api", "web", dir} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(filepath.Join(root, dir))
	return root
}

// TestInitWritesAndExtends: init turns command lines into entries, relative to the file, with
// only the flags given; a second init extends the file; bad input changes nothing.
func TestInitWritesAndExtends(t *testing.T) {
	root := repo(t, "api/sub")
	file := filepath.Join(root, project.FileName)
	if err := os.WriteFile(file, []byte("# ours\napiVersion: livesync.dev/v1alpha1\nkind: LiveSync\nsyncs: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := execute(t, "init", "deploy/api", "..:/app", "-n", "backend", "--on-sync", "kill -HUP 1", "--interval", "1m", "--restart", "process")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `wrote entry "api" to `+file) {
		t.Errorf("init said %q", out)
	}
	out, _, err = execute(t, "init", "deployment", "web", "../../web:/srv", "-c", "nginx", "--exclude", "*.map", "--forward", "8080:http", "--forward", "localhost:0:80", "--logs")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `wrote entry "web" to `+file) {
		t.Errorf("second init said %q", out)
	}
	f, err := project.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	api, web := f.Syncs[0], f.Syncs[1]
	if api.Workload != "deploy/api" || api.Namespace != "backend" || api.Mappings[0] != "./api:/app" || api.OnSync != "kill -HUP 1" ||
		api.Interval.Duration != time.Minute || api.Initial != "" || api.OnSyncTimeout != nil || api.Containers != nil || api.Restart != "process" {
		t.Errorf("api entry %+v", api)
	}
	if web.Workload != "deployment/web" || web.Mappings[0] != "./web:/srv" || web.Containers[0] != "nginx" || web.Exclude[0] != "*.map" || web.Namespace != "" || web.Restart != "" ||
		strings.Join(web.Forward, " ") != "8080:http 127.0.0.1:0:80" || !web.Logs || api.Forward != nil || api.Logs {
		t.Errorf("web entry %+v", web)
	}
	data, _ := os.ReadFile(file)
	if !bytes.HasPrefix(data, []byte("# ours\n")) {
		t.Errorf("lost the comment:\n%s", data)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"init", "deploy/api", "..:/app"}, `already has an entry "api": pass --name to add another, or --force to replace it`},
		{[]string{"init", "-l", "app=x", "..:/app"}, "-l SELECTOR: name the entry with --name"},
		{[]string{"init", "deploy/x"}, "no LOCAL:REMOTE mapping was given"},
		{[]string{"init", "deploy/x", "./missing:/app"}, "missing"},
		{[]string{"init", "deploy/x", "..:/app", "--initial", "all"}, "all"},
	} {
		if _, _, err := execute(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line with %q", tc.args, err, tc.want)
		}
	}
	out, _, err = execute(t, "init", "-l", "app=x", "..:/app", "--name", "x", "--dry-run")
	if err != nil || !strings.Contains(out, "selector: app=x") {
		t.Errorf("--dry-run printed %q, %v", out, err)
	}
	if after, _ := os.ReadFile(file); !bytes.Equal(after, data) {
		t.Errorf("bad input or --dry-run changed the file:\n%s", after)
	}
}

// TestEntriesUnderFlags: no workload runs every entry of the nearest livesync.yaml; a name
// runs one; flags given override the file, flags not given leave it.
func TestEntriesUnderFlags(t *testing.T) {
	root := repo(t, "web")
	yaml := `apiVersion: livesync.dev/v1alpha1
kind: LiveSync
syncs:
- name: api
  workload: deploy/api
  namespace: backend
  mappings: [./api:/app]
  initial: mirror
  onSyncTimeout: 5s
  exclude: ["*.log"]
  helper: ephemeral
  helperImage: reg/helper:1
  restart: signal:usr2
- name: web
  selector: app=web
  containers: [nginx]
  mappings: [./web:/srv]
`
	if err := os.WriteFile(filepath.Join(root, project.FileName), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) *SyncOptions {
		t.Helper()
		g := &globalOptions{configFlags: genericclioptions.NewConfigFlags(true), IOStreams: genericiooptions.NewTestIOStreamsDiscard()}
		o := &SyncOptions{g: g}
		cmd := newCmdSyncFor(o)
		g.configFlags.AddFlags(cmd.PersistentFlags())
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		o.args, o.flags = cmd.Flags().Args(), cmd.Flags()
		if err := o.findProject(); err != nil {
			t.Fatal(err)
		}
		if err := o.Validate(); err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := parse("--trust-file") // the api entry sets helper: ephemeral and helperImage
	if len(o.entries) != 2 {
		t.Fatalf("%d entries", len(o.entries))
	}
	api, web := o.entries[0], o.entries[1]
	if api.namespace != "backend" || !slices.Equal(api.args, []string{"deploy/api"}) || api.cfg.Sync.Initial != filesync.InitialMirror ||
		api.cfg.Sync.OnSyncTimeout != 5*time.Second || api.cfg.Excludes[0] != "*.log" || string(api.cfg.Sync.Mappings[0].Local) != filepath.Join(root, "api") {
		t.Errorf("api %+v", api)
	}
	if api.cfg.Helper != "ephemeral" || api.cfg.HelperImage != "reg/helper:1" || web.cfg.Helper != "auto" || web.cfg.HelperImage != defaultHelperImage {
		t.Errorf("helper: api %q %q, web %q %q", api.cfg.Helper, api.cfg.HelperImage, web.cfg.Helper, web.cfg.HelperImage)
	}
	if api.cfg.Restart.String() != "signal:USR2" || web.cfg.Restart.Kind != restart.None {
		t.Errorf("restart: api %s, web %s", api.cfg.Restart, web.cfg.Restart)
	}
	if web.selector != "app=web" || web.cfg.Containers[0] != "nginx" || web.cfg.Sync.Initial != filesync.InitialUpload || web.cfg.Sync.OnSyncTimeout != filesync.DefaultOnSyncTimeout {
		t.Errorf("web %+v", web)
	}
	o = parse("api", "--trust-file", "--initial", "none", "-n", "dev", "-c", "app", "--on-sync-timeout", "9s", "--once", "--helper", "never", "--restart", "process")
	if len(o.entries) != 1 {
		t.Fatalf("a name ran %d entries", len(o.entries))
	}
	api = o.entries[0]
	if api.namespace != "" || api.cfg.Sync.Initial != filesync.InitialNone || api.cfg.Containers[0] != "app" || api.cfg.Sync.OnSyncTimeout != 9*time.Second ||
		!api.cfg.Once || api.cfg.Excludes[0] != "*.log" || api.cfg.Helper != "never" || api.cfg.HelperImage != "reg/helper:1" || api.cfg.Restart.Kind != restart.Process {
		t.Errorf("flags did not override: %+v", api)
	}

	// Bad input stops the run before the cluster, naming the file and the entry.
	file := filepath.Join(root, project.FileName)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--file", file, "deploy/x", "./a:/app"}, "--file runs the entries of " + file + ": drop the workload"},
		{[]string{"--file", file, "db"}, file + ` has no entry "db": it has api, web`},
		{[]string{"--file", filepath.Join(root, "nope.yaml")}, "nope.yaml"},
		{[]string{"--batch-quiet", "0s"}, file + `: entry "api": --batch-quiet 0s must be positive`},
		{[]string{"--helper", "always"}, file + `: entry "api": invalid --helper "always": use auto, ephemeral or never`},
	} {
		if _, _, err := execute(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line with %q", tc.args, err, tc.want)
		}
	}
	if err := os.RemoveAll(filepath.Join(root, "api")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := execute(t); err == nil || !strings.HasPrefix(err.Error(), file+`: entry "api": mapping "`+filepath.Join(root, "api")+":/app\": local path") {
		t.Errorf("a missing LOCAL: %v", err)
	}
}

func TestEntryReporter(t *testing.T) {
	var out, errOut bytes.Buffer
	r := report.NewPrinter(&out, &errOut, false)
	api := r.ForEntry("api")
	tg := filesync.Target{Namespace: "ns", Pod: "api-1", Container: "app"}
	api.Report(filesync.TargetAdded{Target: tg})
	api.Failed(errors.New(`deployments.apps "api" not found`))
	api.Watching([]string{"/src"})
	_, _ = api.Notes(&errOut).Write([]byte("Defaulted container \"app\"\n"))
	r.Report(filesync.TargetAdded{Target: tg})
	if want := "[api] + ns/api-1/app (container )\n+ ns/api-1/app (container )\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
	for _, want := range []string{"[api] error: deployments.apps \"api\" not found\n", "[api] watching /src; Ctrl-C to stop\n", "[api] Defaulted container \"app\"\n"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	out.Reset()
	r = report.NewPrinter(&out, &errOut, true)
	r.ForEntry("web").Report(filesync.TargetAdded{Target: tg})
	var ev map[string]any
	if err := json.Unmarshal(out.Bytes(), &ev); err != nil || ev["entry"] != "web" || ev["type"] != "target-added" {
		t.Errorf("NDJSON %s, %v", out.String(), err)
	}
}
