package report

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/restart"
)

func TestRestartedEvents(t *testing.T) {
	tg := filesync.Target{Namespace: "ns", Pod: "web-1", Container: "app", ContainerID: "containerd://abc"}
	process, hup := restart.Mode{Kind: restart.Process}, restart.Mode{Kind: restart.Signal, Signal: "HUP", Num: 1}
	evs := []restart.Event{
		{Target: tg, Mode: process, Duration: 85 * time.Millisecond, ExitCode: 143},
		{Target: tg, Mode: process, Duration: 90 * time.Millisecond, ExitCode: 3, Crashed: true},
		{Target: tg, Mode: hup, Duration: 40 * time.Millisecond, ExitCode: -1},
		{Target: tg, Mode: hup, ExitCode: -1, Err: errors.New("pid 1 (sh) does not handle SIGHUP: nothing would happen; try --restart process")},
	}
	var out, errOut bytes.Buffer
	r := NewPrinter(&out, &errOut, false)
	for _, ev := range evs {
		r.Restarted(ev)
	}
	want := "restarted ns/web-1/app: the process ended with status 143 and started again in 85ms\n" +
		"restarted ns/web-1/app: the process had exited with status 3 on its own; it started again in 90ms\n" +
		"restarted ns/web-1/app: sent SIGHUP to its main process in 40ms\n"
	if out.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", out.String(), want)
	}
	if got := errOut.String(); got != "no restart in ns/web-1/app: pid 1 (sh) does not handle SIGHUP: nothing would happen; try --restart process\n" {
		t.Errorf("stderr: %q", got)
	}

	out.Reset()
	r = NewPrinter(&out, &errOut, true)
	for _, ev := range evs {
		r.Restarted(ev)
	}
	got := assertNDJSON(t, out.String())
	if len(got) != 4 {
		t.Fatalf("%d events:\n%s", len(got), out.String())
	}
	if e := got[1]; e["type"] != "restarted" || e["mode"] != "process" || e["exitCode"] != 3.0 || e["crashed"] != true || e["durationMs"] != 90.0 {
		t.Errorf("process restart after a crash: %v", e)
	}
	if e := got[2]; e["mode"] != "signal:HUP" || e["exitCode"] != nil || e["crashed"] != nil {
		t.Errorf("signal restart: %v", e)
	}
	if e := got[3]; !strings.Contains(e["error"].(string), "does not handle SIGHUP") || e["durationMs"] != nil {
		t.Errorf("refused signal: %v", e)
	}
}
