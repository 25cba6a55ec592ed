package filesync

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	clocktesting "k8s.io/utils/clock/testing"
)

// helperExec runs this package's scripts as a helper container does
// (remote.HelperArgv), with a host directory standing for the target's
// /proc/PID/root: the root link of process helperPID in a fake /proc.
type helperExec struct {
	*localExecutor
	proc  string
	owner *remote.Owner
}

// helperPID and helperStart are the target's main process in the fake
// /proc of helperExec.
const (
	helperPID   = 7
	helperStart = 1000
)

// newHelperExec returns a helperExec whose target's root is rootfs.
func newHelperExec(t *testing.T, ex *localExecutor, rootfs string, owner *remote.Owner) *helperExec {
	t.Helper()
	proc := fakeProc(t, fakeProcess{pid: helperPID, start: helperStart, root: rootfs})
	return &helperExec{localExecutor: ex, proc: proc, owner: owner}
}

func (h *helperExec) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return h.localExecutor.Exec(ctx, t, h.argv(argv), stdin, stdout, stderr)
}

func (h *helperExec) argv(argv []string) []string {
	return helperArgvIn(h.proc, argv, helperPID, helperStart, h.owner)
}

// rootfs is the target's root as the scripts reach it.
func (h *helperExec) rootfs() string { return fmt.Sprintf("%s/%d/root", h.proc, helperPID) }

// helperArgvIn is remote.HelperArgv for a target process pid that started at
// start, in the fake /proc at proc.
func helperArgvIn(proc string, argv []string, pid int, start uint64, owner *remote.Owner) []string {
	argv = remote.HelperArgv(argv, remote.HelperRoute{PID: pid, Start: start, Owner: owner})
	if len(argv) > 2 {
		argv[2] = "LIVESYNC_PROC=" + shellQuote(proc) + "\n" + argv[2]
	}
	return argv
}

// fakeProcess is one process of a fakeProc.
type fakeProcess struct {
	pid      int
	comm     string // its name in stat, "x" if empty
	start    uint64 // its start time, field 22 of stat
	cgroup   string // the content of its cgroup file
	mnt      string // its ns/mnt link, "mnt:[1]" if empty
	uid, gid int
	root     string // where its root link points, if anywhere
}

// fakeProc writes a /proc for helper.sh and helper-probe.sh (LIVESYNC_PROC)
// with procs in it; self, the helper's own process, is in mount namespace
// "mnt:[0]".
func fakeProc(t *testing.T, procs ...fakeProcess) string {
	t.Helper()
	proc := t.TempDir()
	procs = append(procs, fakeProcess{pid: 99999, mnt: "mnt:[0]", cgroup: "0::/helper\n"})
	for _, p := range procs {
		dir := filepath.Join(proc, strconv.Itoa(p.pid))
		writeTree(t, dir, map[string]string{"ns/mnt@" + cmp.Or(p.mnt, "mnt:[1]"): ""})
		if p.root != "" {
			must(t, os.Symlink(p.root, filepath.Join(dir, "root")))
		}
		// Fields 3 to 52 after the name; 22 is the start time.
		rest := make([]string, 50)
		for i := range rest {
			rest[i] = strconv.Itoa(i + 3)
		}
		rest[0], rest[22-3] = "S", strconv.FormatUint(p.start, 10)
		files := map[string]string{
			"stat":   fmt.Sprintf("%d (%s) %s\n", p.pid, cmp.Or(p.comm, "x"), strings.Join(rest, " ")),
			"status": fmt.Sprintf("Name:\t%s\nUid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\n", cmp.Or(p.comm, "x"), p.uid, p.uid, p.uid, p.uid, p.gid, p.gid, p.gid, p.gid),
			"cgroup": p.cgroup,
		}
		for name, content := range files {
			must(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
		}
	}
	must(t, os.Symlink("99999", filepath.Join(proc, "self")))
	return proc
}

func (h *helperExec) Owner(Target) *remote.Owner { return h.owner }

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
			owner := &remote.Owner{UID: 4242, GID: 4343}
			if os.Getuid() != 0 {
				owner = nil // only root restores owners
			}
			hx := newHelperExec(t, ex, rootfs, owner)
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
	hx := newHelperExec(t, ex, rootfs, nil)
	for _, tc := range []struct{ in, want string }{
		{"/app", "/srv/app"},
		{"/rel/sub", "/srv/app/sub"},
		{"/deep/x/app", "/srv/app"},
		{"/missing/dir", "/missing/dir"},
		{"/", ""},
		{"/../..//app/./", "/srv/app"},
	} {
		argv := hx.argv([]string{"sh", "-c", `livesync_inroot "$1"`, "livesync-test", tc.in})
		var out, errb bytes.Buffer
		if err := ex.Run(context.Background(), argv, nil, &out, &errb); err != nil {
			t.Fatalf("%s: %v: %s", tc.in, err, errb.String())
		}
		if got, want := strings.TrimSuffix(out.String(), "\n"), hx.rootfs()+tc.want; got != want {
			t.Errorf("livesync_inroot %q = %q, want %q", tc.in, got, want)
		}
	}
	argv := hx.argv([]string{"sh", "-c", `livesync_inroot "$1"`, "livesync-test", "/loop/x"})
	var errb bytes.Buffer
	if err := ex.Run(context.Background(), argv, nil, io.Discard, &errb); err == nil || !strings.Contains(errb.String(), "too many symlinks") {
		t.Errorf("a link loop: err %v, stderr %q; want too many symlinks", err, errb.String())
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
				owner := &remote.Owner{UID: 4242, GID: 4343}
				var x Executor = newHelperExec(t, ex, rootfs, owner)
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
	proc := fakeProc(t,
		fakeProcess{pid: 1, comm: "pause", start: 10, cgroup: "0::/kubepods/besteffort/podA/cri-containerd-ffff.scope\n"},
		fakeProcess{pid: 4, comm: "nginx: worker", start: 9000, cgroup: target, uid: 101, gid: 101},
		fakeProcess{pid: 7, comm: "nginx: master (x) y", start: 1000, cgroup: "1:name=systemd:/\n" + target, uid: 65532, gid: 65533, root: t.TempDir()},
		fakeProcess{pid: 15, comm: "nginx: worker", start: 1200, cgroup: target, uid: 101, gid: 101},
		fakeProcess{pid: 20, comm: "sidecar", start: 800, cgroup: "0::/kubepods/besteffort/podA/cri-containerd-eeee.scope\n"},
		fakeProcess{pid: 30, comm: "sh", start: 5, mnt: "mnt:[0]", cgroup: target},
	)
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct{ id, want string }{
				{"containerd://" + id, "P 7 1000 65532 65533 ok"},
				{"containerd://feed", "N"},
				{"", "N"},
			} {
				argv := remote.HelperProbe(tc.id)
				argv[2] = "LIVESYNC_PROC=" + shellQuote(proc) + "\n" + argv[2]
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
				procs []fakeProcess
				moved bool
			}{
				{"same", []fakeProcess{{pid: 7, comm: "a) b (c", start: 1000, root: rootfs}}, false},
				{"ended", nil, true},
				{"replaced", []fakeProcess{{pid: 7, comm: "other) 1000", start: 1001, root: other}}, true},
			} {
				proc := fakeProc(t, tc.procs...)
				for _, argv := range [][]string{
					{"sh", "-c", `livesync_inroot "$1"`, "livesync-test", "/app"},
					(&remote.ApplyArgs{Root: "/app"}).Argv(),
					remote.OnSyncArgv("/app", "touch "+ran),
				} {
					var errb bytes.Buffer
					err := ex.Run(t.Context(), helperArgvIn(proc, argv, 7, 1000, nil), nil, io.Discard, &errb)
					var ee remote.ExitError
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

// TestHelperStreamEndsWhenMoved: a stream's batch that finds the target's
// process replaced ends the loop with status 75 and the marker first on
// its stderr, without an ack, so that the executor probes again before the
// engine sends the batch again; nothing of the batch is written.
func TestHelperStreamEndsWhenMoved(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			rootfs, local := t.TempDir(), t.TempDir()
			hx := newHelperExec(t, ex, rootfs, nil)
			loop := &loopEnd{Executor: hx}
			s, _ := newTestStreams(t, loop)
			m := testMapping(t, local, "/app", nil)
			idx := NewIndex()
			writeTree(t, local, map[string]string{"a": "a"})
			syncOnce(t, s, m, idx)
			// Process 7 ends and another takes its PID.
			must(t, os.WriteFile(filepath.Join(hx.proc, "7", "stat"), []byte("7 (other) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 1001 21\n"), 0o644))
			writeTree(t, local, map[string]string{"b": "b"})
			p, err := plan(m, idx, nil, true)
			must(t, err)
			_, err = apply(t.Context(), s, testTarget, m, p, archiveOpts{})
			if !remote.IsTransient(err) {
				t.Errorf("batch after the process moved: %v, want a transient error", err)
			}
			lerr, lstderr := loop.result()
			var ee remote.ExitError
			if !errors.As(lerr, &ee) || ee.ExitStatus() != 75 || !strings.HasPrefix(lstderr, "livesync: helper target moved") {
				t.Errorf("the loop ended with %v, stderr %q; want status 75 and the marker", lerr, lstderr)
			}
			if _, err := os.Lstat(filepath.Join(rootfs, "app", "b")); err == nil {
				t.Error("b was written through the moved process")
			}
		})
	}
}

// loopEnd records how its stream loop's exec ended.
type loopEnd struct {
	Executor
	mu     sync.Mutex
	err    error
	stderr bytes.Buffer
}

func (l *loopEnd) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if !isStreamLoop(argv) {
		return l.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
	}
	var errb bytes.Buffer
	err := l.Executor.Exec(ctx, t, argv, stdin, stdout, io.MultiWriter(stderr, &errb))
	l.mu.Lock()
	l.err = err
	l.stderr.Write(errb.Bytes())
	l.mu.Unlock()
	return err
}

func (l *loopEnd) result() (error, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err, l.stderr.String()
}
