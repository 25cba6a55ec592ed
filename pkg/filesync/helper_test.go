package filesync

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// helperExec runs this package's scripts as a helper container does
// (HelperArgv), with a host directory standing for the target's
// /proc/PID/root.
type helperExec struct {
	*localExecutor
	rootfs string
	owner  *Owner
}

func (h *helperExec) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return h.localExecutor.Exec(ctx, t, HelperArgv(argv, h.rootfs, h.owner), stdin, stdout, stderr)
}

func (h *helperExec) Owner(Target) *Owner { return h.owner }

// TestHelperArgvStaysInTargetRoot syncs through a helper into a target
// whose remote root is an absolute symlink (/app -> /srv/app) and holds one
// more (/app/etc -> /etc): both resolve inside the target's root, as the
// target sees them, and nothing is written to this machine's own /srv or
// /etc. As root, files, the directories tar makes and the root apply creates
// get the target's uid:gid.
func TestHelperArgvStaysInTargetRoot(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			rootfs := t.TempDir()
			writeTree(t, rootfs, map[string]string{"app@/srv/app": "", "srv/app/etc@/etc": "", "etc/": ""})
			local := t.TempDir()
			writeTree(t, local, map[string]string{"main.go": "package main", "web/index.html": "<p>", "etc/app.conf": "x=1"})
			owner := &Owner{UID: 4242, GID: 4343}
			if os.Getuid() != 0 {
				owner = nil // only root restores owners
			}
			hx := &helperExec{localExecutor: ex, rootfs: rootfs, owner: owner}
			fc, rec := clocktesting.NewFakeClock(time.Unix(1000, 0)), newRecorder()
			e := New(hx, Config{Mappings: []Mapping{{Local: LocalPath(local), Remote: "/app"}, {Local: LocalPath(local), Remote: "/data/new"}}}, WithClock(fc), WithReporter(rec))
			e.AddTarget(podTarget("web-1"))
			ok, err := e.Once(context.Background())
			if err != nil || !ok {
				t.Fatalf("Once = %v, %v; events %+v", ok, err, rec)
			}
			assertSameTree(t, local, filepath.Join(rootfs, "srv", "app"))
			if _, err := os.Lstat("/srv/app"); err == nil {
				t.Error("/srv/app exists on this machine: the link was followed outside the target's root")
			}
			if _, err := os.Lstat("/etc/app.conf"); err == nil {
				t.Error("/etc/app.conf exists on this machine")
			}
			if got := readTree(t, filepath.Join(rootfs, "etc")); len(got) != 0 {
				t.Errorf("the target's /etc got %v through its link", got)
			}
			if owner == nil {
				return
			}
			for _, rel := range []string{"srv/app/main.go", "srv/app/web", "srv/app/web/index.html", "srv/app/etc", "srv/app/etc/app.conf", "data/new", "data/new/main.go"} {
				fi, err := os.Lstat(filepath.Join(rootfs, rel))
				must(t, err)
				st := fi.Sys().(*syscall.Stat_t)
				if int(st.Uid) != owner.UID || int(st.Gid) != owner.GID {
					t.Errorf("%q is owned by %d:%d, want %d:%d", rel, st.Uid, st.Gid, owner.UID, owner.GID)
				}
			}
		})
	}
}

// TestHelperArgvResolve checks livesync_inroot on its own: relative and
// absolute links, "..", a missing tail, and a link loop.
func TestHelperArgvResolve(t *testing.T) {
	ex := busybox(t)
	rootfs := t.TempDir()
	writeTree(t, rootfs, map[string]string{
		"srv/app/": "", "app@/srv/app": "", "rel@srv/app": "", "deep/x@../srv": "", "loop@/loop": "",
	})
	for _, tc := range []struct{ in, want string }{
		{"/app", "/srv/app"},
		{"/rel/sub", "/srv/app/sub"},
		{"/deep/x/app", "/srv/app"},
		{"/missing/dir", "/missing/dir"},
		{"/", ""},
		{"/../..//app/./", "/srv/app"},
	} {
		argv := HelperArgv([]string{"sh", "-c", `livesync_inroot "$1"`, "livesync-test", tc.in}, rootfs, nil)
		var out, errb bytes.Buffer
		if err := ex.Run(context.Background(), argv, nil, &out, &errb); err != nil {
			t.Fatalf("%s: %v: %s", tc.in, err, errb.String())
		}
		if got := strings.TrimSuffix(out.String(), "\n"); got != rootfs+tc.want {
			t.Errorf("livesync_inroot %q = %q, want %q", tc.in, got, rootfs+tc.want)
		}
	}
	argv := HelperArgv([]string{"sh", "-c", `livesync_inroot "$1"`, "livesync-test", "/loop/x"}, rootfs, nil)
	var errb bytes.Buffer
	if err := ex.Run(context.Background(), argv, nil, io.Discard, &errb); err == nil || !strings.Contains(errb.String(), "too many symlinks") {
		t.Errorf("a link loop: err %v, stderr %q; want too many symlinks", err, errb.String())
	}
}

func TestParseHelperProbe(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want ProbeResult
		err  string
	}{
		{"P 1 65532 65532 ok\n", ProbeResult{PID: 1, UID: 65532, GID: 65532, Reachable: true}, ""},
		{"P 7 0 0 denied\n", ProbeResult{PID: 7}, ""},
		{"N\n", ProbeResult{}, "no process"},
		{"P 1 x 0 ok", ProbeResult{}, "unexpected"},
		{"", ProbeResult{}, "unexpected"},
	} {
		got, err := ParseHelperProbe(tc.out)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.out, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q = %+v, %v; want %+v", tc.out, got, err, tc.want)
		}
	}
}

// TestHelperOwnsParentsItCreates: a root helper writing for a non-root
// target makes each directory that apply creates on the way to the remote
// root the target's, with an exec per batch and through a stream alike, and
// leaves a directory that was there as it was (root's).
func TestHelperOwnsParentsItCreates(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("only root restores owners")
	}
	for name, ex := range executors(t) {
		for _, via := range []string{"exec", "stream"} {
			t.Run(name+"/"+via, func(t *testing.T) {
				rootfs, local := t.TempDir(), t.TempDir()
				writeTree(t, rootfs, map[string]string{"srv/": ""})
				writeTree(t, local, map[string]string{"index.html": "<p>"})
				owner := &Owner{UID: 4242, GID: 4343}
				var x Executor = &helperExec{localExecutor: ex, rootfs: rootfs, owner: owner}
				if via == "stream" {
					x, _ = newTestStreams(t, x)
				}
				m := testMapping(t, local, "/srv/www/app", nil)
				p, err := plan(m, NewIndex(), nil, true)
				must(t, err)
				_, err = apply(t.Context(), x, testTarget, m, p, archiveOpts{owner: owner})
				must(t, err)
				for rel, want := range map[string][2]int{
					"srv": {0, 0}, "srv/www": {4242, 4343}, "srv/www/app": {4242, 4343}, "srv/www/app/index.html": {4242, 4343},
				} {
					fi, err := os.Lstat(filepath.Join(rootfs, rel))
					must(t, err)
					st := fi.Sys().(*syscall.Stat_t)
					if int(st.Uid) != want[0] || int(st.Gid) != want[1] {
						t.Errorf("%q is owned by %d:%d, want %d:%d", rel, st.Uid, st.Gid, want[0], want[1])
					}
				}
			})
		}
	}
}
