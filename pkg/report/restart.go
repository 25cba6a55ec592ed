package report

import (
	"fmt"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/restart"
)

// Restarted reports a --restart in a container, or why there was none.
func (r *Printer) Restarted(ev restart.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restarted(ev)
}

// Restarted reports a --restart of the entry's session.
func (e *EntryPrinter) Restarted(ev restart.Event) { e.as(func() { e.r.restarted(ev) }) }

// restarted prints a restart: its time is the event's, how long it took is durationMs, and
// exitCode is how the replaced process ended (process mode).
func (r *Printer) restarted(ev restart.Event) {
	j := jsonEvent{Type: "restarted", Target: toJSONTarget(ev.Target), Mode: ev.Mode.String()}
	if ev.Err != nil {
		r.errors++
		j.Error = ev.Err.Error()
		r.emitErr(j, "no restart in %s: %v", ev.Target, ev.Err)
		return
	}
	j.Duration = ms(ev.Duration)
	took := ev.Duration.Round(time.Millisecond)
	if ev.Mode.Kind == restart.Signal {
		r.emit(j, "restarted %s: sent SIG%s to its main process in %s", ev.Target, ev.Mode.Signal, took)
		return
	}
	what := "the process started again"
	if ev.ExitCode >= 0 {
		code := ev.ExitCode
		j.ExitCode = &code
		j.Crashed = ev.Crashed
		if ev.Crashed {
			what = fmt.Sprintf("the process had exited with status %d on its own; it started again", code)
		} else {
			what = fmt.Sprintf("the process ended with status %d and started again", code)
		}
	}
	r.emit(j, "restarted %s: %s in %s", ev.Target, what, took)
}
