package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
)

func TestSyncReporterNDJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	r := NewPrinter(&out, &errOut, true)
	tg := filesync.Target{Namespace: "ns", Pod: "web-1", Container: "app", ContainerID: "containerd://abc"}
	r.Report(filesync.TargetAdded{Target: tg, Transport: filesync.TransportStream})
	r.Report(filesync.InitialSync{Target: tg, Files: 3, Bytes: 2048, Duration: 1500 * time.Microsecond})
	r.Report(filesync.Batch{Changed: 1, Names: []string{"/app/a"}, Targets: 1, Bytes: 512, Latency: 80 * time.Millisecond})
	r.Report(filesync.Batch{}) // changed nothing: not printed
	r.Report(filesync.Error{Target: tg, Err: errors.New("tar not found"), Hint: "the image needs sh and tar"})
	r.Report(filesync.TargetRemoved{Target: tg})
	r.Refreshed("pinned")
	r.Report(filesync.DryRun{Target: tg, Copy: []string{"/app/a"}, Delete: []string{"/app/b"}})
	r.Report(filesync.Progress{Target: tg}) // a progress event, at most one a second
	r.Report(filesync.Held{Target: tg, Mapping: planner.Mapping{Local: "/src", Remote: "/app"}, Reason: `local root "/src" is missing`,
		Deleted: 120, Examples: []string{"/app/a", "/app/b"}, Hint: "nothing is deleted until it is back"})
	r.Report(filesync.OnSync{Target: tg, ExitCode: 0, Duration: 120 * time.Millisecond, Output: "reloaded\n"})
	r.Report(filesync.OnSync{Target: tg, ExitCode: -1, Err: errors.New("on-sync command timed out after 30s"), Duration: 30 * time.Second})
	r.Warn(errors.New("watching /src: out of inotify watches"))
	r.Report(filesync.Recovered{Target: tg, Failures: 3, Duration: 12 * time.Second})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"target-added", "initial-sync", "batch", "error", "target-removed", "refresh", "dry-run", "progress", "held", "on-sync", "on-sync", "error", "recovered"}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, ev := range assertNDJSON(t, out.String()) {
		if ev["type"] != want[i] {
			t.Errorf("line %d: type %v, want %s", i, ev["type"], want[i])
		}
	}
	var added map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &added)
	if added["transport"] != "stream" {
		t.Errorf("target-added = %v, want transport stream", added)
	}
	var b map[string]any
	_ = json.Unmarshal([]byte(lines[2]), &b)
	if b["latencyMs"] != 80.0 || b["changed"] != 1.0 || b["bytes"] != 512.0 {
		t.Errorf("batch = %v", b)
	}
	var rec map[string]any
	_ = json.Unmarshal([]byte(lines[12]), &rec)
	if rec["failures"] != 3.0 || rec["durationMs"] != 12000.0 || rec["target"] == nil {
		t.Errorf("recovered = %v", rec)
	}
	var h map[string]any
	_ = json.Unmarshal([]byte(lines[8]), &h)
	if h["deleted"] != 120.0 || h["reason"] != `local root "/src" is missing` || h["hint"] == nil || len(h["names"].([]any)) != 2 || h["target"] == nil {
		t.Errorf("held = %v", h)
	}
	var ok, failed map[string]any
	_ = json.Unmarshal([]byte(lines[9]), &ok)
	_ = json.Unmarshal([]byte(lines[10]), &failed)
	if ok["exitCode"] != 0.0 || ok["durationMs"] != 120.0 || ok["output"] != "reloaded\n" || ok["error"] != nil || ok["target"] == nil {
		t.Errorf("on-sync = %v", ok)
	}
	if _, has := failed["exitCode"]; has || failed["error"] != "on-sync command timed out after 30s" || failed["output"] != "" {
		t.Errorf("failed on-sync = %v", failed)
	}
	if errOut.Len() != 0 {
		t.Errorf("-o json wrote to stderr: %q", errOut.String())
	}
}

func TestSyncReporterOnSyncText(t *testing.T) {
	tg := filesync.Target{Namespace: "default", Pod: "pod", Container: "app"}
	many := ""
	for i := range 15 {
		many += fmt.Sprintf("line %d\n", i)
	}
	tests := []struct {
		name          string
		ev            filesync.OnSync
		stdout, stder string
	}{
		{name: "exit 0", ev: filesync.OnSync{Target: tg, Duration: 120 * time.Millisecond, Output: "reloading\nok\n"},
			stdout: "on-sync default/pod/app: exit 0 in 120ms\n  reloading\n  ok\n"},
		{name: "exit 0, no output", ev: filesync.OnSync{Target: tg, Duration: time.Second},
			stdout: "on-sync default/pod/app: exit 0 in 1s\n"},
		{name: "failure, last lines", ev: filesync.OnSync{Target: tg, ExitCode: 2, Duration: time.Second, Output: many},
			stder: "warning: on-sync default/pod/app: exit 2 in 1s\n  line 5\n  line 6\n  line 7\n  line 8\n  line 9\n  line 10\n  line 11\n  line 12\n  line 13\n  line 14\n"},
		{name: "timeout", ev: filesync.OnSync{Target: tg, ExitCode: -1, Err: errors.New("on-sync command timed out after 30s"), Duration: 30 * time.Second, Output: "starting\n"},
			stder: "warning: on-sync default/pod/app: on-sync command timed out after 30s\n  starting\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			NewPrinter(&out, &errOut, false).Report(tt.ev)
			if out.String() != tt.stdout || errOut.String() != tt.stder {
				t.Errorf("stdout %q, stderr %q; want %q, %q", out.String(), errOut.String(), tt.stdout, tt.stder)
			}
		})
	}
}

// assertNDJSON checks the contract every -o json line keeps, whatever its type: one JSON
// object with a "type" and a "time" in RFC 3339, UTC. It returns the decoded events.
func assertNDJSON(t *testing.T, out string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %d is not JSON: %q", i, l)
		}
		if typ, _ := ev["type"].(string); typ == "" {
			t.Errorf("line %d has no type: %s", i, l)
		}
		ts, _ := ev["time"].(string)
		if parsed, err := time.Parse(time.RFC3339Nano, ts); err != nil || !strings.HasSuffix(ts, "Z") || parsed.Location() != time.UTC {
			t.Errorf("line %d: time %q is not RFC 3339 in UTC: %s", i, ts, l)
		}
		evs = append(evs, ev)
	}
	return evs
}

func TestSyncReporterText(t *testing.T) {
	var out, errOut bytes.Buffer
	r := NewPrinter(&out, &errOut, false)
	tg := filesync.Target{Namespace: "ns", Pod: "web-1", Container: "app"}
	r.Report(filesync.Batch{Changed: 2, Deleted: 1, Names: []string{"/app/a", "/app/b"}, Targets: 2, Failed: 1, Bytes: 3 << 20, Latency: 120 * time.Millisecond})
	r.Report(filesync.Error{Target: tg, Err: errors.New("permission denied")})
	r.Report(filesync.Held{Target: tg, Reason: "more than half of the 66 entries the container has", Deleted: 61, Examples: []string{"/app/old"},
		Hint: "if that is intended, restart with --initial=mirror --allow-mass-delete"})
	r.Summary()
	if got := out.String(); got != "2 changed, 1 deleted (/app/a, /app/b) -> 1/2 containers, 3.0 MiB in 120ms\n" {
		t.Errorf("batch line = %q", got)
	}
	held := "held: ns/web-1/app: not deleting 61 remote entries (/app/old, ...): more than half of the 66 entries the container has; if that is intended, restart with --initial=mirror --allow-mass-delete\n"
	if !strings.Contains(errOut.String(), "error: ns/web-1/app: permission denied") || !strings.Contains(errOut.String(), "0 containers, 1 batch, 2 files, 3.0 MiB sent, 1 error in") ||
		!strings.Contains(errOut.String(), held) {
		t.Errorf("stderr = %q", errOut.String())
	}
}

// TestSyncReporterWaiting: a wait is one line on stderr, or a `waiting` NDJSON event with
// reason and message; a restart loop names the exit code and what a restart does to synced files.
func TestSyncReporterWaiting(t *testing.T) {
	tg := filesync.Target{Namespace: "ns", Pod: "web-1", Container: "app", ContainerID: "containerd://abc"}
	three := int32(3)
	wait := filesync.Waiting{Workload: "deployment/web", Reason: "ImagePull", Message: `pod "web-1": container "app" is in ImagePullBackOff: not found`}
	loop := filesync.Restarting{Target: tg, Restarts: 2, Window: 5 * time.Minute, ExitCode: &three}

	var out, errOut bytes.Buffer
	r := NewPrinter(&out, &errOut, false)
	r.Report(wait)
	r.Report(loop)
	want := "waiting for deployment/web: pod \"web-1\": container \"app\" is in ImagePullBackOff: not found\n" +
		"warning: ns/web-1/app restarted 2 times within 5m0s, last exit code 3: each restart wipes the synced files from the container's writable layer and livesync syncs them again; the app is probably crashing: kubectl logs web-1 -c app --previous -n ns\n"
	if out.Len() != 0 || errOut.String() != want {
		t.Errorf("stdout %q, stderr %q; want stderr %q", out.String(), errOut.String(), want)
	}

	out.Reset()
	errOut.Reset()
	r = NewPrinter(&out, &errOut, true)
	r.Report(wait)
	r.Report(loop)
	evs := assertNDJSON(t, out.String())
	if len(evs) != 2 || evs[0]["type"] != "waiting" || evs[0]["reason"] != "ImagePull" || evs[0]["message"] != wait.Message || evs[0]["workload"] != "deployment/web" {
		t.Errorf("waiting event = %v", evs)
	}
	if len(evs) == 2 && (evs[1]["type"] != "restarting" || evs[1]["exitCode"] != 3.0 || evs[1]["restarts"] != 2.0 || evs[1]["target"] == nil) {
		t.Errorf("restarting event = %v", evs[1])
	}
}
