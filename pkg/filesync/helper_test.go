package filesync

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/fakeproc"
	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
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
	proc := fakeproc.Write(t, fakeproc.Process{PID: helperPID, Start: helperStart, Root: rootfs})
	return &helperExec{localExecutor: ex, proc: proc, owner: owner}
}

func (h *helperExec) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return h.localExecutor.Exec(ctx, t, h.argv(argv), stdin, stdout, stderr)
}

func (h *helperExec) argv(argv []string) []string {
	return helperArgvIn(h.proc, argv, helperPID, helperStart, h.owner)
}

// helperArgvIn is remote.HelperArgv for a target process pid that started at
// start, in the fake /proc at proc.
func helperArgvIn(proc string, argv []string, pid int, start uint64, owner *remote.Owner) []string {
	argv = remote.HelperArgv(argv, remote.HelperRoute{PID: pid, Start: start, Owner: owner})
	if len(argv) > 2 {
		argv[2] = fakeproc.In(proc, argv[2])
	}
	return argv
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
			e := New(hx, Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(local), Remote: "/app"}, {Local: planner.LocalPath(local), Remote: "/data/new"}}}, WithClock(fc), WithReporter(rec))
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
				uid, gid, _ := localtree.OwnerOf(fi)
				if int(uid) != owner.UID || int(gid) != owner.GID {
					t.Errorf("%q is owned by %d:%d, want %d:%d", rel, uid, gid, owner.UID, owner.GID)
				}
			}
		})
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
				p, err := planner.Changes(m, planner.NewIndex(), nil, true)
				must(t, err)
				_, err = apply(t.Context(), x, testTarget, m, &sending{Plan: p}, tarstream.Options{Owner: owner})
				must(t, err)
				for rel, want := range map[string][2]int{
					"srv": {0, 0}, "srv/www": {4242, 4343}, "srv/www/app": {4242, 4343}, "srv/www/app/index.html": {4242, 4343},
				} {
					fi, err := os.Lstat(filepath.Join(rootfs, rel))
					must(t, err)
					uid, gid, _ := localtree.OwnerOf(fi)
					if int(uid) != want[0] || int(gid) != want[1] {
						t.Errorf("%q is owned by %d:%d, want %d:%d", rel, uid, gid, want[0], want[1])
					}
				}
			})
		}
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
			idx := planner.NewIndex()
			writeTree(t, local, map[string]string{"a": "a"})
			syncOnce(t, s, m, idx)
			// Process 7 ends and another takes its PID.
			must(t, os.WriteFile(filepath.Join(hx.proc, "7", "stat"), []byte("7 (other) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 1001 21\n"), 0o644))
			writeTree(t, local, map[string]string{"b": "b"})
			p, err := planner.Changes(m, idx, nil, true)
			must(t, err)
			_, err = apply(t.Context(), s, testTarget, m, &sending{Plan: p}, tarstream.Options{})
			if !remote.IsTransient(err) {
				t.Errorf("batch after the process moved: %v, want a transient error", err)
			}
			lstderr, lerr := loop.result()
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

func (l *loopEnd) result() (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stderr.String(), l.err
}
