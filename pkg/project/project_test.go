package project

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite docs/livesync.schema.json from the Go types")

const twoServices = `# the team's dev loop
apiVersion: livesync.dev/v1alpha1
kind: LiveSync
syncs:
- name: api
  workload: deploy/api
  namespace: backend
  mappings: [./api/src:/app/src]
  exclude: ["*.log"]
  onSync: kill -HUP 1
  onSyncTimeout: 10s
- name: web
  selector: app=web
  containers: [web]
  mappings:
  - ./web/static:/usr/share/nginx/html
  initial: mirror
  followTag: true
  interval: 1m
  pullPolicy: Always
`

func TestParseTwoServices(t *testing.T) {
	f, err := Parse([]byte(twoServices))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Syncs) != 2 {
		t.Fatalf("%d entries", len(f.Syncs))
	}
	api, web := f.Syncs[0], f.Syncs[1]
	if api.Name != "api" || api.Workload != "deploy/api" || api.Namespace != "backend" || api.OnSync != "kill -HUP 1" ||
		api.OnSyncTimeout.Duration != 10*time.Second || api.Exclude[0] != "*.log" || api.Mappings[0] != "./api/src:/app/src" {
		t.Fatalf("api = %+v", api)
	}
	if web.Selector != "app=web" || web.Containers[0] != "web" || web.Initial != "mirror" || !web.FollowTag ||
		web.Interval.Duration != time.Minute || web.PullPolicy != "Always" || web.Interval == nil {
		t.Fatalf("web = %+v", web)
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	head := "apiVersion: livesync.dev/v1alpha1\nkind: LiveSync\nsyncs:\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown top field", "apiVersion: livesync.dev/v1alpha1\nkind: LiveSync\nsync: []\n", `3: unknown field "sync": the fields are apiVersion, kind, syncs`},
		{"unknown entry field", head + "- name: api\n  workload: deploy/api\n  mapings: [./a:/app]\n", `6: unknown field "mapings" in syncs[0]: the fields are name, workload, selector,`},
		{"wrong type", head + "- name: api\n  workload: deploy/api\n  mappings: ./a:/app\n", `6: syncs[0].mappings: want a list (lines starting with -), got "./a:/app"`},
		{"number for a string", head + "- name: 123\n  workload: deploy/api\n  mappings: [./a:/app]\n", `4: syncs[0].name: want a string, got "123" (quote it)`},
		{"bool as string", head + "- name: api\n  workload: deploy/api\n  mappings: [./a:/app]\n  followTag: \"yes\"\n", `7: syncs[0].followTag: want true or false, got "yes"`},
		{"yes for a string", head + "- name: api\n  workload: deploy/api\n  mappings: [./a:/app]\n  exclude: [yes]\n", `7: syncs[0].exclude[0]: want a string, got "yes" (quote it)`},
		{"bad duration", head + "- name: api\n  workload: deploy/api\n  mappings: [./a:/app]\n  interval: 10\n", `7: syncs[0].interval: want a duration such as 30s, got "10"`},
		{"short interval", head + "- name: api\n  workload: deploy/api\n  mappings: [./a:/app]\n  interval: 100ms\n", `7: syncs[0].interval: 100ms is too short: use 1s or more`},
		{"twice", head + "- name: api\n  name: web\n", `5: field "name" in syncs[0] appears twice`},
		{"duplicate names", head + "- name: api\n  workload: deploy/api\n  mappings: [./a:/app]\n- name: api\n  workload: deploy/b\n  mappings: [./b:/app]\n", `7: syncs[1].name: "api" is the name of an earlier entry too`},
		{"both targets", head + "- name: api\n  workload: deploy/api\n  selector: app=api\n  mappings: [./a:/app]\n", `4: syncs[0]: set exactly one of workload`},
		{"no mappings", head + "- name: api\n  workload: deploy/api\n", `4: syncs[0]: no mappings`},
		{"bad mapping", head + "- name: api\n  workload: deploy/api\n  mappings: [./a:/]\n", `6: syncs[0].mappings[0]: parsing mapping "./a:/": refusing to sync into the container's root`},
		{"bad name", head + "- name: API\n  workload: deploy/api\n  mappings: [./a:/app]\n", `4: syncs[0].name: "API" is not a name`},
		{"bad initial", head + "- name: api\n  workload: deploy/api\n  mappings: [./a:/app]\n  initial: all\n", `7: syncs[0].initial:`},
		{"bad policy", head + "- name: api\n  workload: deploy/api\n  mappings: [./a:/app]\n  pullPolicy: always\n", `7: syncs[0].pullPolicy: invalid image pull policy "always"`},
		{"bad restart", head + "- name: api\n  workload: deploy/api\n  mappings: [./a:/app]\n  restart: signal:KILL\n", `7: syncs[0].restart: "signal:KILL": no process can handle SIGKILL`},
		{"bad helper", head + "- name: api\n  workload: deploy/api\n  mappings: [./a:/app]\n  helper: sometimes\n", `7: syncs[0].helper: "sometimes": use auto, ephemeral or never`},
		{"bare workload", head + "- name: api\n  workload: api\n  mappings: [./a:/app]\n", `5: syncs[0].workload: want TYPE/NAME, e.g. deploy/api`},
		{"wrong version", "apiVersion: v1\nkind: LiveSync\n", `1: apiVersion: want livesync.dev/v1alpha1, got "v1"`},
		{"empty", "", `1: the file is empty`},
		{"no entries", "apiVersion: livesync.dev/v1alpha1\nkind: LiveSync\nsyncs: []\n", `3: syncs: no entries`},
		{"syntax", "apiVersion: a\n  kind: b: c\n", `2: mapping values are not allowed`},
		{"two documents", twoServices + "---\nkind: x\n", `21: a second YAML document`},
		{"alias", "apiVersion: &v livesync.dev/v1alpha1\nkind: *v\n", `2: kind: YAML aliases are not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v\nwant one line starting with %s", err, tc.want)
			}
		})
	}
}

func TestFindWalksUpAndLoadResolvesLocalPaths(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(deep); err == nil || !strings.Contains(err.Error(), "livesync.yaml not found in "+deep+" or a parent directory") {
		t.Fatalf("Find in an empty tree: %v", err)
	}
	if err := os.WriteFile(filepath.Join(root, FileName), []byte(twoServices), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Find(deep)
	if err != nil || p != filepath.Join(root, FileName) {
		t.Fatalf("Find = %q, %v", p, err)
	}
	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	web, err := f.Entry("web")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := web.ParseMappings(f.Dir())
	if err != nil || string(ms[0].Local) != filepath.Join(root, "web", "static") || ms[0].Remote != "/usr/share/nginx/html" {
		t.Fatalf("mappings %v, %v", ms, err)
	}
	if _, err := f.Entry("db"); err == nil || err.Error() != p+` has no entry "db": it has api, web` {
		t.Fatalf("Entry(db): %v", err)
	}
	if err := os.WriteFile(p, []byte("apiVersion: v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.HasPrefix(err.Error(), p+":1: apiVersion: ") {
		t.Fatalf("Load of a bad file: %v", err)
	}
}

func TestAddWritesThenExtendsKeepingComments(t *testing.T) {
	p := filepath.Join(t.TempDir(), FileName)
	api := Sync{Name: "api", Workload: "deploy/api", Mappings: []string{"./src:/app"}, FollowTag: true}
	out, err := Add(p, api, false)
	if err != nil {
		t.Fatal(err)
	}
	want := header + `apiVersion: livesync.dev/v1alpha1
kind: LiveSync
syncs:
  - name: api
    workload: deploy/api
    mappings:
      - ./src:/app
    followTag: true
`
	if string(out) != want {
		t.Fatalf("new file:\n%s\nwant:\n%s", out, want)
	}
	out = append(out, []byte("# keep this comment\n")...)
	out = bytes.Replace(out, []byte("syncs:\n"), []byte("syncs: # the services\n"), 1)
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	web := Sync{Name: "web", Selector: "app=web", Namespace: "front", Mappings: []string{"./web:/srv"}, Exclude: []string{"*.tmp", "yes"}}
	out, err = Add(p, web, false)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Syncs) != 2 || f.Syncs[1].Name != "web" || f.Syncs[1].Exclude[1] != "yes" || f.Syncs[0].Workload != "deploy/api" {
		t.Fatalf("extended file:\n%s", out)
	}
	for _, c := range []string{"# keep this comment", "syncs: # the services", "yaml-language-server"} {
		if !bytes.Contains(out, []byte(c)) {
			t.Fatalf("lost %q:\n%s", c, out)
		}
	}
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Add(p, web, false); err == nil || err.Error() != p+` already has an entry "web": pass --name to add another, or --force to replace it` {
		t.Fatalf("adding twice: %v", err)
	}
	web.Mappings = []string{"./web2:/srv"}
	out, err = Add(p, web, true)
	if err != nil {
		t.Fatal(err)
	}
	if f, err = Parse(out); err != nil || len(f.Syncs) != 2 || f.Syncs[1].Mappings[0] != "./web2:/srv" {
		t.Fatalf("replaced: %v\n%s", err, out)
	}
	if _, err := Add(p, Sync{Name: "db", Workload: "deploy/db", Mappings: []string{"db:/"}}, false); err == nil || !strings.Contains(err.Error(), "the extended file would not load") {
		t.Fatalf("adding an invalid entry: %v", err)
	}
}

// TestSchemaMatchesTypes keeps docs/livesync.schema.json what the Go types generate
// (go test ./pkg/project -update rewrites it), and checks the schema knows every field Load does.
func TestSchemaMatchesTypes(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "livesync.schema.json")
	got := Schema()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run go test ./pkg/project -update", err)
	}
	if !bytes.Equal(committed, got) {
		t.Fatalf("%s is out of date with the Go types: run go test ./pkg/project -update", path)
	}
	var s struct {
		Properties map[string]struct {
			Items struct {
				Properties           map[string]json.RawMessage
				AdditionalProperties bool
			}
		}
	}
	if err := json.Unmarshal(got, &s); err != nil {
		t.Fatal(err)
	}
	item := s.Properties["syncs"].Items
	fields := []string{"name", "workload", "selector", "namespace", "containers", "mappings", "exclude", "gitignore", "syncBack", "initial", "onSync", "onSyncTimeout", "pullPolicy", "refresh", "restart", "followTag", "interval", "helper", "helperImage", "forward", "logs"}
	for _, f := range fields {
		if _, ok := item.Properties[f]; !ok {
			t.Errorf("schema lacks syncs[].%s", f)
		}
	}
	if len(item.Properties) != len(fields) || item.AdditionalProperties {
		t.Errorf("schema has %d entry fields (additionalProperties %v), want exactly the %d Load accepts", len(item.Properties), item.AdditionalProperties, len(fields))
	}
}

// TestAllowContexts: allowContexts names each context with its server; one without its server
// is refused with its line.
func TestAllowContexts(t *testing.T) {
	const head = "apiVersion: livesync.dev/v1alpha1\nkind: LiveSync\nsyncs:\n- name: web\n  workload: deploy/web\n  mappings: [\"./src:/app\"]\nallowContexts:\n"
	f, err := Parse([]byte(head + "- context: dev\n  server: https://10.0.0.1:6443\n"))
	if err != nil || len(f.AllowContexts) != 1 || f.AllowContexts[0] != (AllowContext{Context: "dev", Server: "https://10.0.0.1:6443"}) {
		t.Fatalf("got %+v, %v", f, err)
	}
	if _, err := Parse([]byte(head + "- context: dev\n")); err == nil || !strings.HasPrefix(err.Error(), "8:") || !strings.Contains(err.Error(), "server") {
		t.Errorf("a context without its server: %v", err)
	}
}
