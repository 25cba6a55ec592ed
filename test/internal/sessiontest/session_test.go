package sessiontest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const ts = `"time":"2026-12-03T06:00:00.123Z"`

// fakeBinary writes a shell script that stands in for kubectl-livesync: it prints its
// arguments as an "args" event, then body's lines, and on SIGINT prints a "bye" event and
// exits with code; on SIGQUIT it prints a stand-in for the Go runtime's goroutine dump on
// stderr and exits 2, as a Go binary does.
func fakeBinary(t *testing.T, body string, code int) string {
	t.Helper()
	esc := func(s string) string { return strings.ReplaceAll(s, `"`, `\"`) }
	script := fmt.Sprintf(`#!/bin/sh
trap 'kill $! 2>/dev/null; echo "{%s}"; exit %d' INT
trap 'kill $! 2>/dev/null; echo "goroutine 1 [select]:" >&2; exit 2' QUIT
echo "{%s,\"message\":\"$*\"}"
%s
sleep 600 >/dev/null 2>&1 &
wait
`, esc(`"type":"bye",`+ts), code, esc(`"type":"args",`+ts), body)
	p := filepath.Join(t.TempDir(), "kubectl-livesync")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func event(fields string) string { return fmt.Sprintf("echo '{%s,%s}'", ts, fields) }

const (
	added  = `"type":"target-added","target":{"namespace":"ns","pod":"web-1","container":"app","containerID":"c1"}`
	synced = `"type":"initial-sync","target":{"namespace":"ns","pod":"web-1","container":"app","containerID":"c1"},"files":2,"bytes":10`
)

// recorder is a TB that keeps what a Session reports; its Fatalf ends the function run by
// fatal, as testing's does the test.
type recorder struct {
	*testing.T
	errors, fatals []string
}

type fatalPanic struct{}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
	panic(fatalPanic{})
}

// fatal runs fn and returns the Fatalf message that ended it, "" when none did.
func (r *recorder) fatal(fn func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(fatalPanic); !ok {
				panic(p)
			}
			msg = r.fatals[len(r.fatals)-1]
		}
	}()
	fn()
	return ""
}

// TestSessionFlow: the command line the setters build, the wait for the initial sync, an edit
// and the batch it brings, Ctrl-C and the summary.
func TestSessionFlow(t *testing.T) {
	local := t.TempDir()
	bin := fakeBinary(t, event(added)+"\n"+event(synced)+`
until [ -e "`+local+`/src/index.html" ]; do sleep 0.01; done
`+event(`"type":"batch","changed":1,"bytes":5,"targets":1`), 0)
	r := &recorder{T: t}
	s := NewSession(r, bin).Kubeconfig("kc").Namespace("ns").Args("deploy/web").Map(local, "/app").Args("--exclude", "x").
		Start().WaitSynced()
	want := "--kubeconfig kc -n ns -o json deploy/web --exclude x " + local + ":/app"
	if got := s.Events()[0].Message; got != want {
		t.Errorf("command line %q, want %q", got, want)
	}
	ev := s.Edit("src/index.html", "v2").WaitFor("batch")
	if ev.Changed != 1 || ev.Targets != 1 {
		t.Errorf("batch %+v", ev)
	}
	sum := s.Stop()
	if want := (Summary{Containers: 1, Batches: 1, Files: 3, Bytes: 15}); sum != want {
		t.Errorf("summary %+v, want %+v", sum, want)
	}
	if s.Count("bye") != 1 {
		t.Errorf("no event printed after Ctrl-C:\n%s", s.Dump())
	}
	if len(r.errors) != 0 {
		t.Errorf("errors reported: %q", r.errors)
	}
	if s.Stop(); len(r.errors) != 0 {
		t.Errorf("stopping twice: %q", r.errors)
	}
}

// TestStopChecksContract: a non-zero exit after Ctrl-C, a line that isn't JSON and an event
// without a time each fail the test, and the test goes on.
func TestStopChecksContract(t *testing.T) {
	bin := fakeBinary(t, `echo 'not json'
echo '{"type":"batch"}'`, 3)
	r := &recorder{T: t}
	s := NewSession(r, bin).Start().WaitCount("batch", 1)
	s.Stop()
	want := []string{"session exit after Ctrl-C: exit status 3", "-o json: a line is not JSON", `-o json: an event without a type or an RFC 3339 UTC time: {"type":"batch"}`}
	if len(r.errors) != len(want) {
		t.Fatalf("errors %q, want %d", r.errors, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(r.errors[i], w) {
			t.Errorf("error %d: %q, want it to start with %q", i, r.errors[i], w)
		}
	}
}

// TestNextAndSettle: Next consumes up to the event it returns, fails on an error event and on
// the end of the session; Settle counts the batches until a quiet spell; Drain skips.
func TestNextAndSettle(t *testing.T) {
	bin := fakeBinary(t, strings.Join([]string{
		event(`"type":"batch","changed":1`), event(`"type":"batch","changed":2`), event(`"type":"error","error":"pod gone"`),
		event(`"type":"batch","changed":3`), event(`"type":"batch","changed":4`), event(`"type":"on-sync"`),
		event(`"type":"batch","changed":5`),
	}, "\n"), 0)
	s := NewSession(t, bin).Start()
	if ev, err := s.Next("batch", time.Minute); err != nil || ev.Changed != 1 {
		t.Fatalf("Next = %+v, %v; want the first batch", ev, err)
	}
	if ev, err := s.Next("on-sync", time.Minute); err == nil || ev.Error != "pod gone" {
		t.Fatalf("Next = %+v, %v; want the error event to fail it", ev, err)
	}
	if ev, err := s.Next("batch", time.Minute); err != nil || ev.Changed != 3 {
		t.Fatalf("Next = %+v, %v; want the third batch", ev, err)
	}
	s.WaitCount("batch", 5)
	if n, err := s.Settle(100 * time.Millisecond); n != 2 || err != nil {
		t.Errorf("Settle = %d, %v; want the 2 batches left", n, err)
	}
	s.Drain()
	if _, err := s.Next("batch", 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no batch event within 10ms") {
		t.Errorf("Next after the last batch: %v", err)
	}
	s.Kill()
	if _, err := s.Next("batch", time.Minute); err == nil || !strings.Contains(err.Error(), "session ended") {
		t.Errorf("Next after the end: %v", err)
	}
	if _, err := s.Settle(time.Minute); err == nil {
		t.Errorf("Settle after the end: no error")
	}
}

// TestWaitsFail: a failed initial sync fails WaitSynced; WaitMatch and WaitFor fail with the
// session's output once the timeout passed.
func TestWaitsFail(t *testing.T) {
	bin := fakeBinary(t, event(added)+"\n"+event(`"type":"initial-sync","target":{"containerID":"c1"},"error":"tar not found"`), 0)
	r := &recorder{T: t}
	s := NewSession(r, bin).Start()
	if msg := r.fatal(func() { s.WaitSynced() }); !strings.HasPrefix(msg, "initial sync failed: tar not found") {
		t.Errorf("WaitSynced: %q", msg)
	}
	s.Timeout(50 * time.Millisecond)
	// A wait that times out shows where the session waits: its goroutines, after SIGQUIT.
	if msg := r.fatal(func() { s.WaitMatch("waiting event", func(ev Event) bool { return ev.Type == "waiting" }) }); !strings.HasPrefix(msg, "no waiting event within 50ms") ||
		!strings.Contains(msg, "stderr:\ngoroutine 1 [select]:") {
		t.Errorf("WaitMatch: %q", msg)
	}
	if msg := r.fatal(func() { s.WaitFor("batch") }); !strings.Contains(msg, "tar not found") {
		t.Errorf("WaitFor: %q, want the error event", msg)
	}
	if msg := r.fatal(func() { s.Edit("f", "x") }); !strings.Contains(msg, "maps no local directory") {
		t.Errorf("Edit: %q", msg)
	}
}

// TestWaitSyncedWaitsForEveryTarget: two containers added, one synced, is not yet synced.
func TestWaitSyncedWaitsForEveryTarget(t *testing.T) {
	second := strings.ReplaceAll(added, "c1", "c2")
	bin := fakeBinary(t, event(added)+"\n"+event(second)+"\n"+event(synced), 0)
	r := &recorder{T: t}
	s := NewSession(r, bin).Start().WaitCount("initial-sync", 1).Timeout(50 * time.Millisecond)
	if msg := r.fatal(func() { s.WaitSynced() }); !strings.HasPrefix(msg, "no complete initial sync within 50ms") {
		t.Errorf("WaitSynced: %q", msg)
	}
}

func TestParseEvents(t *testing.T) {
	evs := ParseEvents(`{"type":"on-sync",` + ts + `,"exitCode":0,"output":""}` + "\n\nnope\n")
	if len(evs) != 2 || evs[0].ExitCode == nil || *evs[0].ExitCode != 0 || !evs[1].Invalid {
		t.Errorf("ParseEvents = %+v", evs)
	}
	if err := evs[0].check(); err != nil {
		t.Error(err)
	}
}
