package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/fakeproc"
)

func TestParseHelperProbe(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want ProbeResult
		err  string
	}{
		{"P 1 4242 65532 65532 ok\n", ProbeResult{PID: 1, Start: 4242, UID: 65532, GID: 65532, Reachable: true}, ""},
		{"P 7 0 0 0 denied\n", ProbeResult{PID: 7}, ""},
		{"N\n", ProbeResult{}, "no process"},
		{"P 1 0 x 0 ok", ProbeResult{}, "unexpected"},
		{"P 1 -1 0 0 ok", ProbeResult{}, "unexpected"},
		{"P 1 0 0 ok", ProbeResult{}, "unexpected"},
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

// TestHelperArgvResolve checks livesync_inroot on its own: relative and
// absolute links, "..", a missing tail, and a link loop.
func TestHelperArgvResolve(t *testing.T) {
	ex := busybox(t)
	rootfs := t.TempDir()
	writeTree(t, rootfs, map[string]string{
		"srv/app/": "", "app@/srv/app": "", "rel@srv/app": "", "deep/x@../srv": "", "loop@/loop": "",
	})
	proc := fakeproc.Write(t, fakeproc.Process{PID: 7, Start: 1000, Root: rootfs})
	for _, tc := range []struct{ in, want string }{
		{"/app", "/srv/app"},
		{"/rel/sub", "/srv/app/sub"},
		{"/deep/x/app", "/srv/app"},
		{"/missing/dir", "/missing/dir"},
		{"/", ""},
		{"/../..//app/./", "/srv/app"},
	} {
		argv := helperArgvIn(proc, []string{"sh", "-c", `livesync_inroot "$1"`, "livesync-test", tc.in}, 7, 1000, nil)
		var out, errb bytes.Buffer
		if err := ex.Run(context.Background(), argv, nil, &out, &errb); err != nil {
			t.Fatalf("%s: %v: %s", tc.in, err, errb.String())
		}
		if got, want := strings.TrimSuffix(out.String(), "\n"), proc+"/7/root"+tc.want; got != want {
			t.Errorf("livesync_inroot %q = %q, want %q", tc.in, got, want)
		}
	}
	argv := helperArgvIn(proc, []string{"sh", "-c", `livesync_inroot "$1"`, "livesync-test", "/loop/x"}, 7, 1000, nil)
	var errb bytes.Buffer
	if err := ex.Run(context.Background(), argv, nil, io.Discard, &errb); err == nil || !strings.Contains(errb.String(), "too many symlinks") {
		t.Errorf("a link loop: err %v, stderr %q; want too many symlinks", err, errb.String())
	}
}

// TestHelperProbe runs helper-probe.sh in a fake /proc of a pod that shares
// its process namespace: the pause process, the target's main process 7
// and its workers 15 (before 7 in glob order) and 4 (a lower PID after a
// wrap, started later), another container's process and the helper's own.
// The target's process that started first is picked, with its start time
// and owner; a container ID that no process has gets "N", not the pause
// process.
func TestHelperProbe(t *testing.T) {
	const id = "0123abcd"
	target := "0::/kubepods/besteffort/podA/cri-containerd-" + id + ".scope\n"
	proc := fakeproc.Write(t,
		fakeproc.Process{PID: 1, Comm: "pause", Start: 10, Cgroup: "0::/kubepods/besteffort/podA/cri-containerd-ffff.scope\n"},
		fakeproc.Process{PID: 4, Comm: "nginx: worker", Start: 9000, Cgroup: target, UID: 101, GID: 101},
		fakeproc.Process{PID: 7, Comm: "nginx: master (x) y", Start: 1000, Cgroup: "1:name=systemd:/\n" + target, UID: 65532, GID: 65533, Root: t.TempDir()},
		fakeproc.Process{PID: 15, Comm: "nginx: worker", Start: 1200, Cgroup: target, UID: 101, GID: 101},
		fakeproc.Process{PID: 20, Comm: "sidecar", Start: 800, Cgroup: "0::/kubepods/besteffort/podA/cri-containerd-eeee.scope\n"},
		fakeproc.Process{PID: 30, Comm: "sh", Start: 5, Mnt: "mnt:[0]", Cgroup: target},
	)
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct{ id, want string }{
				{"containerd://" + id, "P 7 1000 65532 65533 ok"},
				{"containerd://feed", "N"},
				{"", "N"},
			} {
				argv := HelperProbe(tc.id)
				argv[2] = fakeproc.In(proc, argv[2])
				var out, errb bytes.Buffer
				if err := ex.Run(t.Context(), argv, nil, &out, &errb); err != nil {
					t.Fatalf("probe %q: %v: %s", tc.id, err, errb.String())
				}
				if got := strings.TrimSpace(out.String()); got != tc.want {
					t.Errorf("probe %q = %q, want %q (stderr %q)", tc.id, got, tc.want, errb.String())
				}
			}
		})
	}
}

// TestHelperPinned: every script run through a helper first checks that
// the target's process is still the one the probe found, by its start
// time: one that ended, or whose PID another process took (another
// container's, whose root the writes would reach), fails the script with
// status 75 and helper.sh's marker first on stderr, before it runs the
// on-sync command or writes anything.
func TestHelperPinned(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			rootfs, other := t.TempDir(), t.TempDir()
			ran := filepath.Join(t.TempDir(), "ran")
			for _, tc := range []struct {
				name  string
				procs []fakeproc.Process
				moved bool
			}{
				{"same", []fakeproc.Process{{PID: 7, Comm: "a) b (c", Start: 1000, Root: rootfs}}, false},
				{"ended", nil, true},
				{"replaced", []fakeproc.Process{{PID: 7, Comm: "other) 1000", Start: 1001, Root: other}}, true},
			} {
				proc := fakeproc.Write(t, tc.procs...)
				for _, argv := range [][]string{
					{"sh", "-c", `livesync_inroot "$1"`, "livesync-test", "/app"},
					(&ApplyArgs{Root: "/app"}).Argv(),
					OnSyncArgv("/app", "touch "+ran),
				} {
					var errb bytes.Buffer
					err := ex.Run(t.Context(), helperArgvIn(proc, argv, 7, 1000, nil), nil, io.Discard, &errb)
					var ee ExitError
					moved := errors.As(err, &ee) && ee.ExitStatus() == 75 && strings.HasPrefix(errb.String(), "livesync: helper target moved")
					if moved != tc.moved || !tc.moved && err != nil {
						t.Errorf("%s: %.40q: err %v, stderr %q; want moved %v", tc.name, argv[2], err, errb.String(), tc.moved)
					}
				}
				_, err := os.Stat(ran)
				if ranOnSync := err == nil; ranOnSync == tc.moved {
					t.Errorf("%s: on-sync ran %v", tc.name, ranOnSync)
				}
				_ = os.Remove(ran)
			}
			if got := readTree(t, other); len(got) != 0 {
				t.Errorf("another process's root got %v", got)
			}
			if got := readTree(t, rootfs); got["app"] == "" {
				t.Errorf("the target's root got %v, want app", got)
			}
		})
	}
}

// helperArgvIn is HelperArgv for a target process pid that started at
// start, in the fake /proc at proc.
func helperArgvIn(proc string, argv []string, pid int, start uint64, owner *Owner) []string {
	argv = HelperArgv(argv, HelperRoute{PID: pid, Start: start, Owner: owner})
	if len(argv) > 2 {
		argv[2] = fakeproc.In(proc, argv[2])
	}
	return argv
}
