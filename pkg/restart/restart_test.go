package restart

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/fakeexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Mode
		err  string
	}{
		{"", Mode{}, ""},
		{"none", Mode{}, ""},
		{"process", Mode{Kind: Process}, ""},
		{"signal:HUP", Mode{Kind: Signal, Signal: "HUP", Num: 1}, ""},
		{"signal:sigusr2", Mode{Kind: Signal, Signal: "USR2", Num: 12}, ""},
		{"signal:TERM", Mode{Kind: Signal, Signal: "TERM", Num: 15}, ""},
		{"signal:KILL", Mode{}, "no process can handle SIGKILL"},
		{"signal:1", Mode{}, "name the signal"},
		{"signal:FOO", Mode{}, `unknown signal "FOO"; use one of HUP, INT, QUIT, USR1, USR2`},
		{"restart", Mode{}, "use none, process, or signal:SIG"},
	} {
		got, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Parse(%q) error = %v, want one line with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if again, _ := Parse(got.String()); again != got {
			t.Errorf("Parse(%q).String() = %q does not parse back", tc.in, got.String())
		}
	}
}

var target = filesync.Target{Namespace: "ns", Pod: "web-1", Container: "app", ContainerID: "c1"}

func record(evs *[]Event) func(Event) { return func(e Event) { *evs = append(*evs, e) } }

// TestSignalNotHandled: a signal PID 1 does not catch is one line, said once, and nothing is
// ever sent to that container; a new container is checked again.
func TestSignalNotHandled(t *testing.T) {
	ex := &fakeexec.Executor{Respond: func(c fakeexec.Call) fakeexec.Response {
		return fakeexec.Response{Stdout: "Name:\tgunicorn\nPid:\t1\nSigCgt:\t0000000000000001\nSigIgn:\t0\n"}
	}}
	var evs []Event
	m, _ := Parse("signal:USR2")
	r := &Restarter{Exec: ex, Mode: m, Report: record(&evs)}
	r.AfterSync(context.Background(), target)
	r.AfterSync(context.Background(), target)
	if len(evs) != 1 || !errors.Is(evs[0].Err, ErrNotHandled) ||
		evs[0].Err.Error() != "pid 1 (gunicorn) does not handle SIGUSR2: nothing would happen; try --restart process" {
		t.Fatalf("events = %+v", evs)
	}
	for _, c := range ex.Calls() {
		if c.Argv[len(c.Argv)-2] == "send" {
			t.Fatalf("a signal was sent: %q", c.Argv)
		}
	}
	if n := len(ex.Calls()); n != 1 {
		t.Fatalf("%d execs, want the one check", n)
	}
	restarted := target
	restarted.ContainerID = "c2"
	r.AfterSync(context.Background(), restarted)
	if n := len(ex.Calls()); n != 2 {
		t.Fatalf("a new container was not checked again: %d execs", n)
	}
}

// TestSignalHandled: checked once, then sent after every batch.
func TestSignalHandled(t *testing.T) {
	ex := &fakeexec.Executor{Respond: func(c fakeexec.Call) fakeexec.Response {
		if c.Argv[len(c.Argv)-1] == "check" {
			return fakeexec.Response{Stdout: "Name:\tsh\nPid:\t1\nSigCgt:\t0000000000000001\n"}
		}
		return fakeexec.Response{}
	}}
	var evs []Event
	m, _ := Parse("signal:HUP")
	r := &Restarter{Exec: ex, Mode: m, Report: record(&evs)}
	for range 3 {
		r.AfterSync(context.Background(), target)
	}
	var sent int
	for _, c := range ex.Calls() {
		if c.Argv[len(c.Argv)-2] == "send" && c.Argv[len(c.Argv)-1] == "HUP" {
			sent++
		}
	}
	if len(ex.Calls()) != 4 || sent != 3 || len(evs) != 3 || evs[2].Err != nil || evs[2].Mode.String() != "signal:HUP" {
		t.Fatalf("calls %d, sent %d, events %+v", len(ex.Calls()), sent, evs)
	}
}

// TestProcessRestart reports the replaced process's status, and a container without the
// supervisor once.
func TestProcessRestart(t *testing.T) {
	ex := &fakeexec.Executor{Responses: []fakeexec.Response{
		{Stdout: "B 1 1 - 1 0\nA 1 2 143 1 0\n"},
		{Stdout: "B 1 2 143 0 1\nA 1 3 1 1 1\n"},
	}}
	var evs []Event
	r := &Restarter{Exec: ex, Mode: Mode{Kind: Process}, Report: record(&evs)}
	r.AfterSync(context.Background(), target)
	r.AfterSync(context.Background(), target)
	if len(evs) != 2 || evs[0].ExitCode != 143 || evs[0].Crashed || evs[1].ExitCode != 1 || !evs[1].Crashed {
		t.Fatalf("events = %+v", evs)
	}
	none := &fakeexec.Executor{Respond: func(fakeexec.Call) fakeexec.Response {
		return fakeexec.Response{Err: exitCode(3)}
	}}
	evs = nil
	r = &Restarter{Exec: none, Mode: Mode{Kind: Process}, Report: record(&evs)}
	r.AfterSync(context.Background(), target)
	r.AfterSync(context.Background(), target)
	if len(evs) != 1 || !errors.Is(evs[0].Err, remote.ErrNotSupervised) || len(none.Calls()) != 1 {
		t.Fatalf("without a supervisor: events %+v, %d calls", evs, len(none.Calls()))
	}
}

type exitCode int

func (c exitCode) Error() string   { return "command terminated with exit code" }
func (c exitCode) ExitStatus() int { return int(c) }
