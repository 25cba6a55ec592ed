package filesync

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/localexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// escapeFixture is a sandbox standing for a container's file system: the
// mapping's root /app, and /outside, which no sync may touch. The container
// has /app/etc -> /outside (as /etc) and /app/up -> .. (its /).
type escapeFixture struct {
	sb, app, outside string
}

func newEscapeFixture(t *testing.T) *escapeFixture {
	t.Helper()
	sb := t.TempDir()
	f := &escapeFixture{sb: sb, app: filepath.Join(sb, "app"), outside: filepath.Join(sb, "outside")}
	writeTree(t, sb, map[string]string{
		"outside/passwd": "root:x:0:0", "outside/old": "keep me", "outside/new": "keep me", "outside/sub/": "",
		"x": "keep me", "y": "keep me", "app/": "",
	})
	return f
}

// linkOut makes the container's etc and up symlinks that leave /app.
func (f *escapeFixture) linkOut(t *testing.T) {
	t.Helper()
	for _, n := range []string{"etc", "up"} {
		must(t, os.RemoveAll(filepath.Join(f.app, n)))
	}
	must(t, os.Symlink(f.outside, filepath.Join(f.app, "etc")))
	must(t, os.Symlink("..", filepath.Join(f.app, "up")))
}

// outsideApp describes everything in the sandbox except under /app.
func (f *escapeFixture) outsideApp(t *testing.T) map[string]string {
	t.Helper()
	out := readTree(t, f.sb)
	for k := range out {
		if k == "app" || strings.HasPrefix(k, "app"+string(filepath.Separator)) {
			delete(out, k)
		}
	}
	// Modes of the outside directories count too (busybox tar chmods through a link).
	for _, d := range []string{f.outside, filepath.Join(f.outside, "sub")} {
		fi, err := os.Stat(d)
		must(t, err)
		out["mode of "+d] = fi.Mode().String()
	}
	return out
}

func (f *escapeFixture) assertUntouched(t *testing.T, before map[string]string) {
	t.Helper()
	diffTrees(t, "outside /app", f.outsideApp(t), before)
}

// Symlinks in the container below a mapping's remote root never let a copy
// or a delete leave it: a link standing where the local side has a directory
// is replaced by one, and nothing is deleted through a link.
func TestRemoteSymlinksNeverEscape(t *testing.T) {
	localTree := map[string]string{
		"etc/passwd": "EVIL", "etc/new": "EVIL", "etc/sub/": "", "up/x": "EVIL", "up/y": "EVIL", "f": "f",
	}
	t.Run("initial upload without a listing", func(t *testing.T) {
		for name, ex := range executors(t) {
			t.Run(name, func(t *testing.T) {
				f := newEscapeFixture(t)
				ex.Sandbox = func(Target) string { return f.sb }
				f.linkOut(t)
				// The listing fails, so everything is sent as is.
				ex.Fail = func(_ Target, argv []string) error {
					if argv[3] == "livesync-list" {
						return localexec.ExitCode(2)
					}
					return nil
				}
				local := t.TempDir()
				writeTree(t, local, localTree)
				before := f.outsideApp(t)
				is, _ := onceSync(t, ex, Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(local), Remote: "/app"}}})
				f.assertUntouched(t, before)
				if is.Err != nil {
					t.Fatal(is.Err)
				}
				assertSameTree(t, local, f.app)
			})
		}
	})
	for _, mode := range []planner.InitialMode{planner.InitialUpload, planner.InitialMirror} {
		t.Run("initial "+string(mode), func(t *testing.T) {
			for name, ex := range executors(t) {
				t.Run(name, func(t *testing.T) {
					f := newEscapeFixture(t)
					ex.Sandbox = func(Target) string { return f.sb }
					f.linkOut(t)
					must(t, os.Symlink(f.outside, filepath.Join(f.app, "remote-only-link")))
					local := t.TempDir()
					writeTree(t, local, localTree)
					before := f.outsideApp(t)
					is, _ := onceSync(t, ex, Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(local), Remote: "/app"}}, Initial: mode})
					f.assertUntouched(t, before)
					if is.Err != nil {
						t.Fatal(is.Err)
					}
					if mode == planner.InitialMirror {
						assertSameTree(t, local, f.app)
					}
				})
			}
		})
	}
	t.Run("mirror, a directory turned into a link after the listing", func(t *testing.T) {
		for name, ex := range executors(t) {
			t.Run(name, func(t *testing.T) {
				f := newEscapeFixture(t)
				ex.Sandbox = func(Target) string { return f.sb }
				writeTree(t, f.app, map[string]string{"logs/app.log": "ignored", "logs/old": "remote only", "f": "f"})
				ex.Fail = func(_ Target, argv []string) error {
					if argv[3] == "livesync" {
						// Between the listing and the apply.
						must(t, os.RemoveAll(filepath.Join(f.app, "logs")))
						must(t, os.Symlink(f.outside, filepath.Join(f.app, "logs")))
					}
					return nil
				}
				local := t.TempDir()
				writeTree(t, local, map[string]string{"f": "f", "g": "g"})
				before := f.outsideApp(t)
				is, _ := onceSync(t, ex, Config{
					Mappings: []planner.Mapping{{Local: planner.LocalPath(local), Remote: "/app"}},
					Matchers: []planner.Matcher{globMatcher{"*.log"}}, Initial: planner.InitialMirror,
				})
				f.assertUntouched(t, before)
				// Stopped, and retried with a fresh listing, which sees the link.
				assertOneLine(t, is.Err, "became a symlink")
				if !remote.IsTransient(is.Err) {
					t.Errorf("%v: want transient", is.Err)
				}
			})
		}
	})
	t.Run("batch", func(t *testing.T) {
		for name, ex := range executors(t) {
			t.Run(name, func(t *testing.T) {
				f := newEscapeFixture(t)
				ex.Sandbox = func(Target) string { return f.sb }
				local := t.TempDir()
				writeTree(t, local, map[string]string{
					"etc/passwd": "ok", "etc/old": "o", "etc/keep": "k", "etc/sub/s": "s", "up/x": "x", "up/y": "y", "f": "f",
				})
				m := testMapping(t, local, "/app", nil)
				idx := planner.NewIndex()
				syncOnce(t, ex, m, idx)
				assertSameTree(t, local, f.app)

				// The container swaps directories for links; locally files
				// change, go and come, and a directory changes mode.
				f.linkOut(t)
				writeTree(t, local, map[string]string{"etc/passwd": "EVIL", "etc/new": "EVIL", "up/x": "EVIL", "etc/sub/t": "EVIL"})
				must(t, os.Remove(filepath.Join(local, "etc/old")))
				must(t, os.Remove(filepath.Join(local, "up/y")))
				must(t, os.Chmod(filepath.Join(local, "etc"), 0o700))
				must(t, os.Chmod(filepath.Join(local, "etc/sub"), 0o700))
				before := f.outsideApp(t)
				p, err := planner.Changes(m, idx, []string{"etc/passwd", "etc/new", "etc/old", "etc", "etc/sub", "etc/sub/t", "up/x", "up/y"}, false)
				must(t, err)
				res, err := apply(context.Background(), ex, testTarget, m, &sending{Plan: p}, tarstream.Options{})
				f.assertUntouched(t, before)
				must(t, err)
				idx.Apply(p, res.Result)
				res.forgetReplaced(idx)

				// What the links hid is sent again.
				syncOnce(t, ex, m, idx)
				f.assertUntouched(t, before)
				assertSameTree(t, local, f.app)
			})
		}
	})
}

// The mapping's remote root itself may be a symlink (/app -> /srv/app): that
// is the user's choice, and it stays followed.
func TestRemoteRootSymlinkFollowed(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			sb := t.TempDir()
			writeTree(t, sb, map[string]string{"srv/app/old": "old", "app@srv/app": ""})
			ex.Sandbox = func(Target) string { return sb }
			local := t.TempDir()
			writeTree(t, local, map[string]string{"d/f": "f", "g": "g"})
			for _, mode := range []planner.InitialMode{planner.InitialUpload, planner.InitialMirror} {
				is, _ := onceSync(t, ex, Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(local), Remote: "/app"}}, Initial: mode})
				if is.Err != nil {
					t.Fatal(is.Err)
				}
			}
			if fi, err := os.Lstat(filepath.Join(sb, "app")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("/app is no longer a symlink: %v %v", fi, err)
			}
			assertSameTree(t, local, filepath.Join(sb, "srv/app"))
		})
	}
}
