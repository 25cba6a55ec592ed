//go:build !windows

package control

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPick: paths go to the sessions that sync them, a directory picks the sessions under or
// over it, a name picks an entry, and nothing running (or nothing that syncs it) is
// ErrNotRunning with what does run.
func TestPick(t *testing.T) {
	state := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Pick(ctx, state, "/src", "", nil); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("no session: %v", err)
	}
	proj := filepath.Join(state, "proj")
	web, api := filepath.Join(proj, "web"), filepath.Join(proj, "api")
	for _, in := range []Info{{Name: "web", Workload: "deployment/web", Roots: []string{web}}, {Name: "api", Workload: "deployment/api", Roots: []string{api}}} {
		reg, err := Register(ctx, state, in)
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Close()
		go Serve(ctx, reg.Listener, &fakeHandler{})
	}
	for _, tc := range []struct {
		name, dir, entry string
		paths            []string
		want             []string // entry: paths
		err              string
	}{
		{name: "the project directory", dir: proj, want: []string{"api:", "web:"}},
		{name: "a root's subdirectory", dir: filepath.Join(web, "pkg"), want: []string{"web:"}},
		{name: "an entry", dir: "/elsewhere", entry: "api", want: []string{"api:"}},
		{name: "paths of both", dir: "/elsewhere", paths: []string{filepath.Join(web, "a"), filepath.Join(api, "b"), filepath.Join(web, "c")},
			want: []string{"web:" + filepath.Join(web, "a") + "," + filepath.Join(web, "c"), "api:" + filepath.Join(api, "b")}},
		{name: "a path nobody syncs", dir: proj, paths: []string{"/etc/passwd"}, err: `that syncs /etc/passwd: running: entry "`},
		{name: "an unknown entry", dir: proj, entry: "db", err: `for the entry "db"`},
		{name: "a directory nobody syncs", dir: "/elsewhere", err: "for /elsewhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Pick(ctx, state, tc.dir, tc.entry, tc.paths)
			if tc.err != "" {
				if !errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want ErrNotRunning with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Info.Name+":"+strings.Join(p.Paths, ","))
			}
			if len(tc.paths) == 0 {
				// The registry's order is the entries' random file names.
				if len(names) == 2 && names[0] > names[1] {
					names[0], names[1] = names[1], names[0]
				}
			}
			if strings.Join(names, " ") != strings.Join(tc.want, " ") {
				t.Errorf("picked %q, want %q", names, tc.want)
			}
		})
	}
}

// TestResolve: a path through a symlinked directory resolves as the session's roots do, and
// a deleted file keeps its name under its resolved parent.
func TestResolve(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	rdir, _ := filepath.EvalSymlinks(dir)
	for in, want := range map[string]string{
		"link":              filepath.Join(rdir, "real"),
		"link/gone/deleted": filepath.Join(rdir, "real", "gone", "deleted"),
	} {
		got, err := Resolve(dir, in)
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
