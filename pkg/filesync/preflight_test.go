package filesync

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/localexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// keepsStreams is an Executor that keeps streams, as pods/exec does.
type keepsStreams struct{ Executor }

func (keepsStreams) PersistentStreams() bool { return true }

// dryRun runs the initial sync of cfg with DryRun into testTarget and
// returns its DryRun events by remote directory, failing the test unless it
// converged.
func dryRun(t *testing.T, ex Executor, cfg Config) map[planner.RemotePath]DryRun {
	t.Helper()
	cfg.DryRun = true
	is, rec := onceSync(t, ex, cfg)
	if is.Err != nil {
		t.Fatalf("dry run: %v", is.Err)
	}
	out := map[planner.RemotePath]DryRun{}
	for _, ev := range eventsOf[DryRun](rec) {
		if _, dup := out[ev.Remote]; dup || ev.Preflight == nil {
			t.Fatalf("dry run events %+v: want one per mapping, each with a preflight", eventsOf[DryRun](rec))
		}
		out[ev.Remote] = ev
	}
	if len(out) != len(cfg.Mappings) {
		t.Fatalf("dry run events %+v, want one per mapping", out)
	}
	return out
}

// snapshot describes every entry under each dir (see readTree).
func snapshot(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range dirs {
		for rel, desc := range readTree(t, d) {
			out[filepath.Join(d, rel)] = desc
		}
	}
	return out
}

// TestPreflight: a dry run says, per mapping, whom the execs run as, that
// the stream would work (dd with iflag=fullblock, through an executor that
// keeps streams), and what the remote root is: a directory, missing (and
// creatable), or a file in the way; also when the plan is empty. Nothing
// in the container changes. Runs as uid 65534 when the tests run as root,
// so that a directory of another user is not writable.
func TestPreflight(t *testing.T) {
	if !asNobody(t) {
		return
	}
	uid, gid := strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			local, rdir := t.TempDir(), t.TempDir()
			writeTree(t, local, map[string]string{"a.txt": "a", "sub/b.txt": "b"})
			writeTree(t, rdir, map[string]string{"same/a.txt": "a", "same/sub/b.txt": "b", "file": "x", "ro/": ""})
			must(t, os.Chmod(filepath.Join(rdir, "ro"), 0o555))
			t.Cleanup(func() { os.Chmod(filepath.Join(rdir, "ro"), 0o755) })
			before := snapshot(t, local, rdir)
			mappings := []planner.Mapping{
				{Local: planner.LocalPath(local), Remote: planner.RemotePath(rdir + "/same")},
				{Local: planner.LocalPath(local), Remote: planner.RemotePath(rdir + "/new/deep")},
				{Local: planner.LocalPath(local), Remote: planner.RemotePath(rdir + "/ro")},
				{Local: planner.LocalPath(local), Remote: planner.RemotePath(rdir + "/ro/new")},
				{Local: planner.LocalPath(local), Remote: planner.RemotePath(rdir + "/file/new")},
			}
			evs := dryRun(t, keepsStreams{ex}, Config{Mappings: mappings, Initial: planner.InitialMirror})
			for _, tc := range []struct {
				rdir     string
				root     string
				writable bool
				copies   int
				hint     string
			}{
				{rdir: "/same", root: RootDir, writable: true},
				{rdir: "/new/deep", root: RootMissing, writable: true, copies: 3},
				{rdir: "/ro", root: RootDir, copies: 3, hint: "--helper ephemeral"},
				{rdir: "/ro/new", root: RootMissing, copies: 3, hint: "--helper ephemeral"},
				{rdir: "/file/new", root: RootMissing, copies: 3, hint: "--helper ephemeral"}, // mkdir -p fails on the file
			} {
				ev := evs[planner.RemotePath(rdir+tc.rdir)]
				pf := ev.Preflight
				if pf == nil || pf.Err != nil {
					t.Fatalf("%s: preflight %+v", tc.rdir, pf)
				}
				if pf.UID != uid || pf.GID != gid || pf.Transport != TransportStream || pf.Helper || !pf.Tar {
					t.Errorf("%s: preflight %+v, want uid %s gid %s via stream with tar", tc.rdir, pf, uid, gid)
				}
				if pf.Root != tc.root || pf.Writable != tc.writable || !strings.Contains(pf.Hint, tc.hint) || (tc.hint == "") != (pf.Hint == "") {
					t.Errorf("%s: root %q writable %v hint %q; want %q %v %q", tc.rdir, pf.Root, pf.Writable, pf.Hint, tc.root, tc.writable, tc.hint)
				}
				if len(ev.Copy) != tc.copies {
					t.Errorf("%s: would copy %v, want %d entries", tc.rdir, ev.Copy, tc.copies)
				}
			}
			if after := snapshot(t, local, rdir); !maps.Equal(after, before) {
				t.Errorf("a dry run changed things:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

// A file mapping's preflight checks the directory that holds the file.
func TestPreflightFileMapping(t *testing.T) {
	ex := busybox(t)
	local, rdir := t.TempDir(), t.TempDir()
	writeTree(t, local, map[string]string{"a.txt": "a"})
	writeTree(t, rdir, map[string]string{"dir/": "", "file": "x"})
	evs := dryRun(t, ex, Config{Mappings: []planner.Mapping{
		{Local: planner.LocalPath(filepath.Join(local, "a.txt")), Remote: planner.RemotePath(rdir + "/dir/a.txt")},
		{Local: planner.LocalPath(filepath.Join(local, "a.txt")), Remote: planner.RemotePath(rdir + "/file/a.txt")},
	}})
	if pf := evs[planner.RemotePath(rdir+"/dir")].Preflight; pf.Root != RootDir || !pf.Writable {
		t.Errorf("into a directory: %+v", pf)
	}
	if pf := evs[planner.RemotePath(rdir+"/file")].Preflight; pf.Root != RootNotDir || pf.Writable || !strings.Contains(pf.Hint, "must be a directory") {
		t.Errorf("into a file: %+v", pf)
	}
}

// Without dd the batches would go by exec; without tar nothing could be
// copied, and without id the user is unknown; an executor that keeps no
// streams never streams.
func TestPreflightMissingTools(t *testing.T) {
	local, rdir := t.TempDir(), t.TempDir()
	writeTree(t, local, map[string]string{"a.txt": "a"})
	cfg := Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(local), Remote: planner.RemotePath(rdir)}}}
	for _, tc := range []struct {
		name      string
		ex        Executor
		transport string
		tar       bool
		uid       string
	}{
		{"no dd", keepsStreams{busybox(t, "dd")}, TransportExec, true, strconv.Itoa(os.Getuid())},
		{"no tar", keepsStreams{busybox(t, "tar")}, TransportStream, false, strconv.Itoa(os.Getuid())},
		{"no id", keepsStreams{busybox(t, "id")}, TransportStream, true, "unknown"},
		{"no streams", busybox(t), TransportExec, true, strconv.Itoa(os.Getuid())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pf := dryRun(t, tc.ex, cfg)[planner.RemotePath(rdir)].Preflight
			if pf.Err != nil || pf.Transport != tc.transport || pf.Tar != tc.tar || pf.UID != tc.uid || !pf.Writable {
				t.Errorf("preflight %+v; want transport %s, tar %v, uid %s", pf, tc.transport, tc.tar, tc.uid)
			}
			if !tc.tar && pf.Hint != remote.HintNoTar {
				t.Errorf("hint %q, want %q", pf.Hint, remote.HintNoTar)
			}
		})
	}
}

// Through a helper (remote.HelperArgv) the remote root is resolved inside the
// target's root: /app -> /srv/app is a directory there, /data -> /srv/file
// a file, though neither exists on this machine, and /tmp is missing there.
func TestPreflightInHelper(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			rootfs := t.TempDir()
			writeTree(t, rootfs, map[string]string{"app@/srv/app": "", "srv/app/": "", "data@/srv/file": "", "srv/file": "x"})
			local := t.TempDir()
			writeTree(t, local, map[string]string{"a.txt": "a"})
			before := snapshot(t, rootfs)
			evs := dryRun(t, newHelperExec(t, ex, rootfs, nil), Config{Mappings: []planner.Mapping{
				{Local: planner.LocalPath(local), Remote: "/app"}, {Local: planner.LocalPath(local), Remote: "/tmp"},
				{Local: planner.LocalPath(filepath.Join(local, "a.txt")), Remote: "/data/a.txt"},
			}})
			if pf := evs["/app"].Preflight; pf.Err != nil || !pf.Helper || pf.Root != RootDir || !pf.Writable {
				t.Errorf("/app: %+v", pf)
			}
			if pf := evs["/tmp"].Preflight; pf.Err != nil || pf.Root != RootMissing || !pf.Writable {
				t.Errorf("/tmp: %+v", pf)
			}
			if pf := evs["/data"].Preflight; pf.Err != nil || !pf.Helper || pf.Root != RootNotDir || pf.Writable {
				t.Errorf("/data: %+v", pf)
			}
			if after := snapshot(t, rootfs); !maps.Equal(after, before) {
				t.Errorf("a dry run changed the target's root: %q, was %q", after, before)
			}
		})
	}
}

// A preflight that can't run is reported on its DryRun event, classified,
// and the dry run goes on: without a listing, it would send everything. An
// empty plan still reports its preflight, and so does --initial none.
func TestPreflightFailsOrHasNothingToDo(t *testing.T) {
	ex := busybox(t)
	local, rdir := t.TempDir(), t.TempDir()
	writeTree(t, local, map[string]string{"a.txt": "a", "b.txt": "b"})
	writeTree(t, rdir, map[string]string{"a.txt": "a", "b.txt": "b"})
	cfg := Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(local), Remote: planner.RemotePath(rdir)}}}

	ev := dryRun(t, ex, cfg)[planner.RemotePath(rdir)]
	if len(ev.Copy)+len(ev.Delete) != 0 || ev.Preflight.Err != nil || !ev.Preflight.Writable {
		t.Errorf("in sync: %+v %+v", ev, ev.Preflight)
	}

	none := cfg
	none.Initial = planner.InitialNone
	if pf := dryRun(t, ex, none)[planner.RemotePath(rdir)].Preflight; pf.Err != nil || pf.Root != RootDir {
		t.Errorf("--initial none: %+v", pf)
	}

	var lists int
	ex.Fail = func(_ Target, argv []string) error {
		switch {
		case len(argv) > 3 && argv[3] == "livesync-preflight":
			return localexec.ExitCode(127) // as when the image has no sh
		case len(argv) > 3 && argv[3] == "livesync-list":
			lists++
		}
		return nil
	}
	ev = dryRun(t, ex, cfg)[planner.RemotePath(rdir)]
	if err := ev.Preflight.Err; !errors.Is(err, remote.ErrTarMissing) || ev.Preflight.UID != "" {
		t.Errorf("preflight %+v, want ErrTarMissing", ev.Preflight)
	}
	assertOneLine(t, ev.Preflight.Err, "sh not found", "--helper")
	if len(ev.Copy) != 2 || lists != 0 {
		t.Errorf("would copy %v after %d listings; want everything, unlisted", ev.Copy, lists)
	}
}

// Under DryRun the target's events say the transport a real run would use,
// as its preflight found it, though a dry run keeps no stream.
func TestPreflightTransportOnTargetEvents(t *testing.T) {
	local, rdir := t.TempDir(), t.TempDir()
	writeTree(t, local, map[string]string{"a.txt": "a"})
	cfg := Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(local), Remote: planner.RemotePath(rdir)}}, DryRun: true}
	for _, tc := range []struct {
		name           string
		ex             Executor
		added, initial string
	}{
		{"streams", keepsStreams{busybox(t)}, TransportStream, TransportStream},
		{"no dd", keepsStreams{busybox(t, "dd")}, TransportStream, TransportExec},
		{"no streams", busybox(t), TransportExec, TransportExec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is, rec := onceSync(t, tc.ex, cfg)
			added := eventsOf[TargetAdded](rec)
			if len(added) != 1 || added[0].Transport != tc.added || is.Transport != tc.initial {
				t.Errorf("target added %+v, initial sync %+v; want transports %s, %s", added, is, tc.added, tc.initial)
			}
		})
	}
}
