package report

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// TestSyncReporterDryRun: a dry run prints one line per target and mapping with what it would
// copy and delete and how a real run would sync, and the hint after what is wrong.
func TestSyncReporterDryRun(t *testing.T) {
	tg := filesync.Target{Namespace: "ns", Pod: "web-1", Container: "app"}
	ok := filesync.Preflight{UID: "1000", GID: "1000", Transport: filesync.TransportStream, Tar: true, Root: filesync.RootDir, Writable: true}
	with := func(f func(*filesync.Preflight)) *filesync.Preflight {
		pf := ok
		f(&pf)
		return &pf
	}
	noHelper := &remote.SyncError{Kind: remote.ErrHelper, Msg: `dry run: container "app" of pod "web-1" would be synced through a new helper container, which a dry run does not add`}
	noSh := &remote.SyncError{Kind: remote.ErrTarMissing, Msg: `sh not found in container "app" of pod "web-1"`, Hint: "the image needs sh and tar"}
	tests := []struct {
		name string
		ev   filesync.DryRun
		want string
	}{
		{name: "writable", ev: filesync.DryRun{Target: tg, Remote: "/app", Copy: []string{"/app/a"}, Preflight: &ok},
			want: "dry run ns/web-1/app /app: would copy 1, delete 0; via stream as uid 1000 gid 1000; /app writable\n  copy   /app/a\n"},
		{name: "in sync", ev: filesync.DryRun{Target: tg, Remote: "/app", Preflight: &ok},
			want: "dry run ns/web-1/app /app: would copy 0, delete 0; via stream as uid 1000 gid 1000; /app writable\n"},
		{name: "not writable", ev: filesync.DryRun{Target: tg, Remote: "/app-root-owned", Preflight: with(func(pf *filesync.Preflight) {
			pf.Writable, pf.Hint = false, "use --helper ephemeral"
		})}, want: "dry run ns/web-1/app /app-root-owned: would copy 0, delete 0; via stream as uid 1000 gid 1000; /app-root-owned NOT writable as uid 1000: use --helper ephemeral\n"},
		{name: "missing", ev: filesync.DryRun{Target: tg, Remote: "/new", Preflight: with(func(pf *filesync.Preflight) {
			pf.Root, pf.Transport, pf.Helper, pf.UID, pf.GID = filesync.RootMissing, filesync.TransportExec, true, "0", "0"
		})}, want: "dry run ns/web-1/app /new: would copy 0, delete 0; via exec through a helper container as uid 0 gid 0; /new missing, would be created\n"},
		{name: "not creatable, no tar", ev: filesync.DryRun{Target: tg, Remote: "/opt/x", Preflight: with(func(pf *filesync.Preflight) {
			pf.Root, pf.Writable, pf.Tar, pf.Hint = filesync.RootMissing, false, false, "make it writable"
		})}, want: "dry run ns/web-1/app /opt/x: would copy 0, delete 0; via stream as uid 1000 gid 1000; /opt/x missing, NOT creatable as uid 1000: make it writable; tar not found\n"},
		{name: "no tar", ev: filesync.DryRun{Target: tg, Remote: "/app", Preflight: with(func(pf *filesync.Preflight) {
			pf.Tar, pf.Hint = false, "the image needs sh and tar"
		})}, want: "dry run ns/web-1/app /app: would copy 0, delete 0; via stream as uid 1000 gid 1000; /app writable; tar not found: the image needs sh and tar\n"},
		{name: "not a directory", ev: filesync.DryRun{Target: tg, Remote: "/etc/x", Preflight: with(func(pf *filesync.Preflight) {
			pf.Root, pf.Writable, pf.Hint = filesync.RootNotDir, false, "map it elsewhere"
		})}, want: "dry run ns/web-1/app /etc/x: would copy 0, delete 0; via stream as uid 1000 gid 1000; /etc/x is NOT a directory: map it elsewhere\n"},
		{name: "helper not added", ev: filesync.DryRun{Target: tg, Remote: "/app", Copy: []string{"/app/a"}, Preflight: &filesync.Preflight{Err: noHelper}},
			want: "dry run ns/web-1/app /app: would copy 1, delete 0; not checked: " + noHelper.Msg + "\n  copy   /app/a\n"},
		{name: "a batch's", ev: filesync.DryRun{Target: tg, Remote: "/app", Delete: []string{"/app/b"}},
			want: "dry run ns/web-1/app /app: would copy 0, delete 1\n  delete /app/b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			NewPrinter(&out, &errOut, false).Report(tt.ev)
			if out.String() != tt.want || errOut.Len() != 0 {
				t.Errorf("stdout %q, stderr %q; want stdout %q", out.String(), errOut.String(), tt.want)
			}
		})
	}

	var out, errOut bytes.Buffer
	r := NewPrinter(&out, &errOut, true)
	r.Report(tests[2].ev)
	r.Report(filesync.DryRun{Target: tg, Remote: "/app", Preflight: &filesync.Preflight{Err: noSh}})
	r.Report(tests[len(tests)-1].ev)
	evs := assertNDJSON(t, out.String())
	if len(evs) != 3 {
		t.Fatalf("%d events: %s", len(evs), out.String())
	}
	want := map[string]any{"uid": "1000", "gid": "1000", "transport": "stream", "helper": false, "tar": true, "root": "dir", "writable": false, "hint": "use --helper ephemeral"}
	if got := jsonOf(evs[0]["preflight"]); got != jsonOf(want) || evs[0]["remote"] != "/app-root-owned" || evs[0]["type"] != "dry-run" {
		t.Errorf("dry-run event = %v, want preflight %v", evs[0], want)
	}
	want = map[string]any{"error": noSh.Error(), "hint": "the image needs sh and tar"}
	if got := jsonOf(evs[1]["preflight"]); got != jsonOf(want) || evs[1]["error"] != nil {
		t.Errorf("failed preflight event = %v, want preflight %v and no top-level error", evs[1], want)
	}
	if _, has := evs[2]["preflight"]; has || evs[2]["delete"] == nil {
		t.Errorf("a batch's dry-run event = %v", evs[2])
	}
	if errOut.Len() != 0 {
		t.Errorf("-o json wrote to stderr: %q", errOut.String())
	}
}

// jsonOf is v as JSON, map keys sorted.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestSyncReporterAncestor: which ancestor a target starts from is a line under --dry-run and
// whenever there was saved state, with what a three-way start decided; -o json always has it.
func TestSyncReporterAncestor(t *testing.T) {
	tg := filesync.Target{Namespace: "ns", Pod: "web-1", Container: "app"}
	saved := filesync.Ancestor{Target: tg, Remote: "/app", From: filesync.StartSaved, Why: "saved by this container (c1) at T",
		Mode: filesync.InitialUpload, ThreeWay: true, Decided: map[string]int{"send": 2, "delete": 1}, Examples: []string{"delete /app/old"}}
	none := filesync.Ancestor{Target: tg, Remote: "/app", From: filesync.StartNone, Why: "no saved state for this sync", Mode: filesync.InitialUpload}
	tests := []struct {
		name   string
		ev     filesync.Ancestor
		dryRun bool
		want   string
	}{
		{"three-way", saved, false, "start ns/web-1/app /app: from the saved ancestor (saved by this container (c1) at T), three-way: delete 1, send 2\n  delete /app/old\n"},
		{"nothing saved, a real run: quiet", none, false, ""},
		{"nothing saved, a dry run", none, true, "start ns/web-1/app /app: from no ancestor (no saved state for this sync), the local side wins\n"},
		{"discarded, the reason says who wins: said once", filesync.Ancestor{Target: tg, Remote: "/app", From: filesync.StartDiscarded, Why: "the saved state is another container's (c0, saved T): the local side wins", Mode: filesync.InitialUpload}, true,
			"start ns/web-1/app /app: from no ancestor (saved state discarded) (the saved state is another container's (c0, saved T): the local side wins)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			r := NewPrinter(&out, &errOut, false)
			r.DryRun = tt.dryRun
			r.Report(tt.ev)
			if out.String() != tt.want {
				t.Errorf("stdout %q, want %q", out.String(), tt.want)
			}
		})
	}
	var dry bytes.Buffer
	r := NewPrinter(&dry, &dry, false)
	r.DryRun = true
	r.Report(filesync.InitialSync{Target: tg, Files: 2, Deleted: 1, Bytes: 4096, Duration: time.Millisecond})
	if want := "dry run, nothing written to ns/web-1/app: 2 to send, 1 to delete, 4.0 KiB, planned in 1ms\n"; dry.String() != want {
		t.Errorf("a dry run's initial sync: %q, want %q", dry.String(), want)
	}
	var out bytes.Buffer
	NewPrinter(&out, &out, true).Report(saved)
	var ev jsonEvent
	if err := json.Unmarshal(out.Bytes(), &ev); err != nil || ev.Type != "ancestor" || ev.From != "saved" || ev.Decided["send"] != 2 || ev.Remote != "/app" {
		t.Errorf("json %s: %v", out.String(), err)
	}
}
