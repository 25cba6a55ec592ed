// Package restart restarts the app in a synced container after a batch lands (--restart):
// with a signal to the container's main process (signal:SIG), or through the supervisor that
// --restart process installs as the container's command (see remote.SupervisorCommand), which
// restarts its child in place: the container, and so the synced files, stay.
//
// The engine calls Restarter.AfterSync off the sync path, one call at a time per target, and
// coalesces the batches applied meanwhile into one follow-up call (filesync.Config.AfterSync):
// batches keep flowing while a restart runs, and a burst of them restarts once more, not once
// per batch.
package restart

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// Kind is how a Mode restarts.
type Kind int

// The kinds of --restart.
const (
	None Kind = iota
	Signal
	Process
)

// Mode is a parsed --restart value.
type Mode struct {
	Kind Kind
	// Signal is the signal's name without SIG ("HUP") and Num its number, for Signal.
	Signal string
	Num    int
}

// String is the mode as --restart takes it.
func (m Mode) String() string {
	switch m.Kind {
	case Signal:
		return "signal:" + m.Signal
	case Process:
		return "process"
	}
	return "none"
}

// signals are the Linux numbers of the signals an app may reload or restart on. KILL and STOP
// are left out: no process can catch them.
var signals = map[string]int{
	"HUP": 1, "INT": 2, "QUIT": 3, "USR1": 10, "USR2": 12, "ALRM": 14, "TERM": 15,
	"CONT": 18, "URG": 23, "WINCH": 28, "IO": 29, "PWR": 30,
}

// Parse reads none, process or signal:SIG (SIG a name such as HUP, SIGHUP or usr1).
func Parse(s string) (Mode, error) {
	switch s {
	case "", "none":
		return Mode{}, nil
	case "process":
		return Mode{Kind: Process}, nil
	}
	name, ok := strings.CutPrefix(s, "signal:")
	if !ok {
		return Mode{}, fmt.Errorf("invalid --restart %q: use none, process, or signal:SIG (e.g. signal:HUP)", s)
	}
	name = strings.TrimPrefix(strings.ToUpper(name), "SIG")
	n, ok := signals[name]
	switch {
	case ok:
		return Mode{Kind: Signal, Signal: name, Num: n}, nil
	case name == "KILL" || name == "STOP":
		return Mode{}, fmt.Errorf("invalid --restart %q: no process can handle SIG%s, and killing the container's main process restarts the container, which loses the synced files: use --restart process", s, name)
	}
	if _, err := strconv.Atoi(name); err == nil {
		return Mode{}, fmt.Errorf("invalid --restart %q: name the signal, e.g. signal:HUP", s)
	}
	return Mode{}, fmt.Errorf("invalid --restart %q: unknown signal %q; use one of %s", s, name, names())
}

func names() string {
	out := make([]string, 0, len(signals))
	for n := range signals {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b string) int { return signals[a] - signals[b] })
	return strings.Join(out, ", ")
}

// Event reports one restart in a target, or why there was none.
type Event struct {
	Target filesync.Target
	Mode   Mode
	// At is when the restart was asked for; Duration how long until the signal was sent, or
	// the supervisor started the new process.
	At       time.Time
	Duration time.Duration
	// ExitCode is how the process that was replaced ended (process mode): its exit status,
	// 128+N after signal N; -1 when unknown. Crashed says it had ended on its own before.
	ExitCode int
	Crashed  bool
	// Err says why nothing restarted: ErrNotHandled and remote.ErrNotSupervised are said once
	// per container, and nothing more is tried in it.
	Err error
}

// ErrNotHandled is wrapped by the error of a signal the main process does not catch.
var ErrNotHandled = errors.New("does not handle the signal")

// DefaultWait bounds how long a process restart waits for the supervisor to start the new
// process (it waits for the old one to end first: up to 10s, then KILL).
const DefaultWait = 30 * time.Second

// Restarter restarts the app in targets after their batches; see AfterSync.
type Restarter struct {
	Exec   remote.Executor
	Mode   Mode
	Report func(Event)
	// Clock times restarts; nil means the real clock.
	Clock clock.PassiveClock
	// Wait bounds a process restart; zero means DefaultWait.
	Wait time.Duration

	mu sync.Mutex
	// checked: containers whose main process catches the signal; off: containers where
	// nothing is tried any more (said why once). Both by container ID.
	checked, off map[string]bool
}

// AfterSync restarts the app in t, as filesync.Config.AfterSync.
func (r *Restarter) AfterSync(ctx context.Context, t filesync.Target) {
	key := t.String() + "@" + t.ContainerID
	r.mu.Lock()
	if r.checked == nil {
		r.checked, r.off = map[string]bool{}, map[string]bool{}
	}
	off, checked := r.off[key], r.checked[key]
	r.mu.Unlock()
	if off || r.Mode.Kind == None {
		return
	}
	clk := r.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	ev := Event{Target: t, Mode: r.Mode, At: clk.Now(), ExitCode: -1}
	switch r.Mode.Kind {
	case Signal:
		if !checked {
			p, err := remote.CheckSignal(ctx, r.Exec, t)
			if err == nil && !p.Catches(r.Mode.Num) {
				err = notHandled(p, r.Mode)
			}
			if err != nil {
				r.fail(ctx, key, ev, err)
				return
			}
			r.mu.Lock()
			r.checked[key] = true
			r.mu.Unlock()
		}
		ev.Err = remote.SendSignal(ctx, r.Exec, t, r.Mode.Signal)
	case Process:
		wait := r.Wait
		if wait <= 0 {
			wait = DefaultWait
		}
		res, err := remote.RestartProcess(ctx, r.Exec, t, wait)
		if err != nil {
			if errors.Is(err, remote.ErrNotSupervised) {
				err = fmt.Errorf("%w: its pod did not start from the template --restart process rolled out, or someone changed its command since; nothing restarts in it", err)
			}
			r.fail(ctx, key, ev, err)
			return
		}
		ev.ExitCode, ev.Crashed = res.After.Status, res.After.Crashed
	}
	if ctx.Err() != nil {
		return // the target went away, or the session ends
	}
	ev.Duration = clk.Since(ev.At)
	r.Report(ev)
}

// fail reports err for the restart ev; a refusal that will not change for this container
// turns restarts off in it.
func (r *Restarter) fail(ctx context.Context, key string, ev Event, err error) {
	if ctx.Err() != nil {
		return
	}
	if errors.Is(err, ErrNotHandled) || errors.Is(err, remote.ErrNotSupervised) {
		r.mu.Lock()
		r.off[key] = true
		r.mu.Unlock()
	}
	ev.Err = err
	r.Report(ev)
}

// notHandled is the one line for a signal p does not catch.
func notHandled(p remote.ProcStatus, m Mode) error {
	name := p.Name
	if name == "" {
		name = "?"
	}
	what := "nothing would happen"
	if p.PID != 1 {
		what = "it would end the process"
	}
	if p.Ignored&(1<<(m.Num-1)) != 0 {
		what = "it ignores it, so nothing would happen"
	}
	return fmt.Errorf("pid %d (%s) %w SIG%s: %s; try --restart process", p.PID, name, errNotHandledText, m.Signal, what)
}

// errNotHandledText is ErrNotHandled as it reads in the middle of the line.
var errNotHandledText = notHandledError{}

type notHandledError struct{}

func (notHandledError) Error() string        { return "does not handle" }
func (notHandledError) Is(target error) bool { return target == ErrNotHandled }
