package project

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAddEditsInPlace: Add splices the new entry's lines into the file and leaves every other
// line as it was: blank lines, comments, indentation, quoting, flow lists, line endings.
func TestAddEditsInPlace(t *testing.T) {
	web := Sync{Name: "web", Workload: "deploy/web", Mappings: []string{"./web:/srv"}}
	const head = "apiVersion: livesync.dev/v1alpha1\nkind: LiveSync\n"
	const webBlock = "  - name: web\n    workload: deploy/web\n    mappings:\n      - ./web:/srv\n"
	for _, tc := range []struct {
		name, in, want string
		entry          Sync
		replace        bool
	}{
		{name: "no syncs key", in: head, want: head + "syncs:\n" + webBlock},
		{name: "no syncs key, comments after", in: head + "\n# the end\n", want: head + "syncs:\n" + webBlock + "\n# the end\n"},
		{name: "empty flow list", in: head + "syncs: []   # none yet\n", want: head + "syncs:    # none yet\n" + webBlock},
		{name: "empty flow list, spaces", in: head + "syncs: [ ]\n", want: head + "syncs:\n" + webBlock},
		{name: "null", in: head + "syncs: # later\n", want: head + "syncs: # later\n" + webBlock},
		{name: "tilde", in: head + "syncs: ~\n", want: head + "syncs:\n" + webBlock},
		{name: "empty file", in: "", want: header + head + "syncs:\n" + webBlock},
		{name: "comment-only file", in: "# dev loop\n\n", want: header + "# dev loop\n\n" + head + "syncs:\n" + webBlock},
		{name: "no newline at the end", in: head + "syncs:\n- name: api\n  workload: deploy/api\n  mappings: [./api:/app]",
			want: head + "syncs:\n- name: api\n  workload: deploy/api\n  mappings: [./api:/app]\n" + "- name: web\n  workload: deploy/web\n  mappings:\n    - ./web:/srv\n"},
		{name: "comments, blank lines, odd indentation and quoting", in: `# team file

apiVersion: "livesync.dev/v1alpha1"   # quoted
kind: 'LiveSync'

syncs:    # the services
    -   name: api
        workload: "deploy/api"
        mappings: [ "./api:/app" ]   # flow

        exclude:
            - '*.log'
        onSync: |
          kill -HUP 1
    # a comment after the list

# foot
`, want: `# team file

apiVersion: "livesync.dev/v1alpha1"   # quoted
kind: 'LiveSync'

syncs:    # the services
    -   name: api
        workload: "deploy/api"
        mappings: [ "./api:/app" ]   # flow

        exclude:
            - '*.log'
        onSync: |
          kill -HUP 1
    -   name: web
        workload: deploy/web
        mappings:
          - ./web:/srv
    # a comment after the list

# foot
`},
		{name: "syncs before the other keys", in: "syncs:\n- name: api\n  workload: deploy/api\n  mappings: [./api:/app]\n\n# the header keys\n" + head,
			want: "syncs:\n- name: api\n  workload: deploy/api\n  mappings: [./api:/app]\n- name: web\n  workload: deploy/web\n  mappings:\n    - ./web:/srv\n\n# the header keys\n" + head},
		{name: "CRLF", in: "apiVersion: livesync.dev/v1alpha1\r\nkind: LiveSync\r\n", want: "apiVersion: livesync.dev/v1alpha1\r\nkind: LiveSync\r\nsyncs:\r\n" + strings.ReplaceAll(webBlock, "\n", "\r\n")},
		{name: "replace in place", replace: true, entry: Sync{Name: "api", Workload: "deploy/api2", Mappings: []string{"./api2:/app"}},
			in: head + `syncs:
  # the api
  -   name: api
      workload: deploy/api
      mappings: [./api:/app]   # old

  # the web
  -   name: web
      selector: app=web
      mappings: [./web:/srv]
`, want: head + `syncs:
  # the api
  -   name: api
      workload: deploy/api2
      mappings:
        - ./api2:/app

  # the web
  -   name: web
      selector: app=web
      mappings: [./web:/srv]
`},
		{name: "replace an entry whose dash stands alone", replace: true, entry: Sync{Name: "api", Workload: "deploy/api2", Mappings: []string{"./api2:/app"}},
			in:   head + "syncs:\n-   # the api\n  name: api\n  workload: deploy/api\n  mappings: [./api:/app]\n-\n  name: web\n  workload: deploy/web\n  mappings: [./web:/srv]\n",
			want: head + "syncs:\n- name: api\n  workload: deploy/api2\n  mappings:\n    - ./api2:/app\n-\n  name: web\n  workload: deploy/web\n  mappings: [./web:/srv]\n"},
		{name: "replace the last entry", replace: true, entry: Sync{Name: "api", Workload: "deploy/api2", Mappings: []string{"./api2:/app"}},
			in:   head + "syncs:\n- name: api\n  workload: deploy/api\n  mappings: [./api:/app]\n# end\n",
			want: head + "syncs:\n- name: api\n  workload: deploy/api2\n  mappings:\n    - ./api2:/app\n# end\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), FileName)
			if err := os.WriteFile(p, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			e := tc.entry
			if e.Name == "" {
				e = web
			}
			out, err := Add(p, e, tc.replace)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", out, tc.want)
			}
		})
	}
}

// TestAddRefuses: what Add cannot splice into is one line that says what to do.
func TestAddRefuses(t *testing.T) {
	const head = "apiVersion: livesync.dev/v1alpha1\nkind: LiveSync\n"
	web := Sync{Name: "web", Workload: "deploy/web", Mappings: []string{"./web:/srv"}}
	for _, tc := range []struct{ name, in, want string }{
		{"flow list with entries", head + "syncs: [{name: api, workload: deploy/api, mappings: [./a:/app]}]\n", "syncs is a flow list ([...]): write it as a block list (lines starting with -) to add to it"},
		{"flow file", "{apiVersion: livesync.dev/v1alpha1, kind: LiveSync}\n", "the file is a flow mapping ({...}): write it as key: value lines to add to it"},
		{"invalid", head + "sync: []\n", `unknown field "sync"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), FileName)
			if err := os.WriteFile(p, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Add(p, web, false); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line with %q", err, tc.want)
			}
		})
	}
}
