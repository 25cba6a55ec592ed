package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/forward"
	"github.com/livesync-dev/kubectl-livesync/pkg/logs"
)

func TestForwardAndLogLines(t *testing.T) {
	spec := forward.Spec{Local: 0, Remote: "http"}
	at := time.Date(2026, 12, 4, 18, 0, 0, 123, time.UTC)
	events := []forward.Event{
		{Spec: spec, Addr: "127.0.0.1:41234", State: forward.Listening},
		{Spec: spec, Addr: "127.0.0.1:41234", State: forward.Waiting, Reason: forward.WaitSyncing},
		{Spec: spec, Addr: "127.0.0.1:41234", State: forward.Serving, Pod: "web-2", Previous: "web-1", Reason: forward.LostDeleted, Dials: 2},
		{Spec: spec, Addr: "127.0.0.1:41234", State: forward.Lost, Pod: "web-2", Reason: forward.LostRestarted, Waiting: forward.WaitSyncing, Dials: 2},
		{Spec: spec, Addr: "127.0.0.1:41234", State: forward.Failed, Pod: "web-2", Message: `pod "web-2" port 8080: connection refused`, Dials: 3},
		{Spec: spec, Addr: "127.0.0.1:41234", State: forward.Trying, Pod: "web-3", Previous: "web-2", Reason: forward.LostUnreachable, Message: "i/o timeout", Dials: 4},
		{Spec: spec, Addr: "127.0.0.1:41234", State: forward.Unreachable, Pod: "web-3", Message: "i/o timeout", Dials: 5},
	}
	line := logs.Line{Namespace: "ns", Pod: "web-2", Container: "app", Text: "hello \x1b[2Jworld\tok", Time: at}

	var out, errOut bytes.Buffer
	r := NewPrinter(&out, &errOut, false)
	for _, ev := range events {
		r.Forward(ev)
	}
	r.Log(line)
	wantOut := strings.Join([]string{
		"forward 127.0.0.1:41234 -> http: listening",
		"forward 127.0.0.1:41234 -> http: waiting: initial sync running",
		"forward 127.0.0.1:41234 -> http: serving web-2 (was web-1: pod deleted)",
		"forward 127.0.0.1:41234 -> http: lost web-2 (container restarted); waiting: initial sync running",
		"forward 127.0.0.1:41234 -> http: pod web-2 unreachable (i/o timeout); trying pod web-3",
		"forward 127.0.0.1:41234 -> http: pod web-3 unreachable (i/o timeout); no reachable pod",
		`web-2/app hello \x1b[2Jworld` + "\tok",
	}, "\n") + "\n"
	if out.String() != wantOut {
		t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), wantOut)
	}
	if want := "forward 127.0.0.1:41234 -> http: error: pod \"web-2\" port 8080: connection refused\n"; errOut.String() != want {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}

	out.Reset()
	r = NewPrinter(&out, &errOut, true)
	r.ForEntry("api").Forward(events[2])
	r.Log(line)
	r.Forward(events[5])
	evs := assertNDJSON(t, out.String())
	if len(evs) != 3 {
		t.Fatalf("%d events", len(evs))
	}
	tr, _ := json.Marshal(evs[2])
	if want := `"dials":4,"forward":{"address":"127.0.0.1:41234","remote":"http"},"message":"i/o timeout","pod":"web-3","previous":"web-2","reason":"unreachable","state":"trying"`; !strings.Contains(string(tr), want) {
		t.Errorf("trying event %s, want %s", tr, want)
	}
	fw, _ := json.Marshal(evs[0])
	if want := `"dials":2,"entry":"api","forward":{"address":"127.0.0.1:41234","remote":"http"},"pod":"web-2","previous":"web-1","reason":"deleted","state":"serving"`; !strings.Contains(string(fw), want) {
		t.Errorf("forward event %s, want %s", fw, want)
	}
	lg, _ := json.Marshal(evs[1])
	if want := `"logTime":"2026-12-04T18:00:00.000000123Z","message":"hello \u001b[2Jworld\tok","target":{"container":"app","namespace":"ns","pod":"web-2"},"time"`; !strings.Contains(string(lg), want) {
		t.Errorf("log event %s, want %s", lg, want)
	}
}

// TestLogLinesWhole: sync lines and log lines written from many goroutines at once come out
// as whole lines.
func TestLogLinesWhole(t *testing.T) {
	var out, errOut bytes.Buffer
	r := NewPrinter(&out, &errOut, false)
	long := strings.Repeat("x", 10000)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				if i%2 == 0 {
					r.Log(logs.Line{Pod: "p", Container: "c", Text: long})
				} else {
					r.Report(filesync.Batch{Changed: 1, Targets: 1})
				}
			}
		})
	}
	wg.Wait()
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if l != "p/c "+long && !strings.HasPrefix(l, "1 changed, 0 deleted -> 1/1 containers") {
			t.Fatalf("a torn line: %.80q", l)
		}
	}
}
