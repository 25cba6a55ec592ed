package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/project"
)

// TestInitEditsTheFileInPlace: init adds its entry's lines and nothing else: the committed
// lines stay byte for byte, the file keeps its mode, and a symlinked livesync.yaml stays a
// link whose target gets the entry.
func TestInitEditsTheFileInPlace(t *testing.T) {
	const team = `# the team's dev loop

apiVersion: "livesync.dev/v1alpha1"
kind: 'LiveSync'   # quoted
syncs:
    -   name: web
        workload: deploy/web
        mappings: [ "./web:/srv" ]

        exclude:
            - "*.map"
# the end
`
	const added = "    -   name: api\n        workload: deploy/api\n        mappings:\n          - ./api:/app\n"
	for _, tc := range []struct {
		name, in, want string
		mode           os.FileMode
		link           bool
	}{
		{name: "no syncs key", in: "apiVersion: livesync.dev/v1alpha1\nkind: LiveSync\n", mode: 0o644,
			want: "apiVersion: livesync.dev/v1alpha1\nkind: LiveSync\nsyncs:\n  - name: api\n    workload: deploy/api\n    mappings:\n      - ./api:/app\n"},
		{name: "comments, blank lines, indentation, quoting", in: team, mode: 0o644,
			want: strings.Replace(team, "# the end\n", added+"# the end\n", 1)},
		{name: "mode 0600", in: team, mode: 0o600, want: strings.Replace(team, "# the end\n", added+"# the end\n", 1)},
		{name: "symlinked", in: team, mode: 0o640, link: true, want: strings.Replace(team, "# the end\n", added+"# the end\n", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := repo(t, "api")
			file, target := filepath.Join(root, project.FileName), filepath.Join(root, project.FileName)
			if tc.link {
				target = filepath.Join(root, "web", "shared.yaml")
				if err := os.Symlink("web/shared.yaml", file); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(target, []byte(tc.in), tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(target, tc.mode); err != nil { // past the umask
				t.Fatal(err)
			}
			if _, _, err := execute(t, "init", "deploy/api", ".:/app"); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("file:\n%s\nwant:\n%s", got, tc.want)
			}
			fi, err := os.Lstat(target)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != tc.mode {
				t.Errorf("mode %v, want %v", fi.Mode(), tc.mode)
			}
			if tc.link {
				if fi, err := os.Lstat(file); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("%s is no longer a symlink: %v, %v", file, fi.Mode(), err)
				}
			}
			leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(target), ".*"))
			if len(leftovers) > 0 {
				t.Errorf("temp files left: %v", leftovers)
			}
		})
	}
}

// TestInitNotesWhatNeedsTrust: an entry that syncs from outside the file's directory or adds a
// helper is written, with a note that running it will need --trust-file (or the flag).
func TestInitNotesWhatNeedsTrust(t *testing.T) {
	root := repo(t, "web")
	for _, tc := range []struct {
		args []string
		note string
	}{
		{[]string{"init", "deploy/web", ".:/srv"}, ""},
		{[]string{"init", "deploy/api", "../api:/app", "--file", "livesync.yaml"}, `note: running entry "api" will take the command line's consent: mappings[0]: LOCAL "../api" is ` + filepath.Join(root, "api") + ", outside " + filepath.Join(root, "web") + ", the file's directory: run with --trust-file if you trust this file\n"},
		{[]string{"init", "deploy/x", ".:/x", "--helper", "ephemeral"}, `note: running entry "x" will take the command line's consent: helper: ephemeral adds a helper container (root with SYS_PTRACE where allowed) to every pod: pass --helper ephemeral, or run with --trust-file if you trust this file` + "\n"},
	} {
		_, errOut, err := execute(t, tc.args...)
		if err != nil || errOut != tc.note {
			t.Errorf("%v: %v, stderr %q, want %q", tc.args, err, errOut, tc.note)
		}
	}
}
