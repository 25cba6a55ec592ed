// The forward and log lines of the sync reporter (--forward, --logs).

package report

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"
	"unicode"

	"github.com/livesync-dev/kubectl-livesync/pkg/forward"
	"github.com/livesync-dev/kubectl-livesync/pkg/logs"
)

// jsonForward names a forward in its events.
type jsonForward struct {
	Address string `json:"address"` // what it listens on, with the port picked for LOCAL 0
	Remote  string `json:"remote"`  // the pod's port, a number or a name
}

// Forward implements session.Reporter.
func (r *Printer) Forward(ev forward.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forward(ev)
}

func (r *Printer) forward(ev forward.Event) {
	je := jsonEvent{Type: "forward", Forward: &jsonForward{Address: ev.Addr, Remote: ev.Spec.Remote}, State: ev.State,
		Pod: ev.Pod, Previous: ev.Previous, Reason: ev.Reason, Waiting: ev.Waiting, Dials: &ev.Dials}
	head := fmt.Sprintf("forward %s -> %s", ev.Addr, ev.Spec.Remote)
	if ev.State == forward.Failed {
		je.Error = ev.Message
		r.errors++
		r.emitErr(je, "%s: %s", head, ev.Text())
		return
	}
	je.Message = ev.Message // how the pod left (trying, unreachable) failed
	r.emit(je, "%s: %s", head, ev.Text())
}

// Log implements session.Reporter: one whole line per call, under the reporter's lock, so a
// sync line never lands inside a log line.
func (r *Printer) Log(l logs.Line) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log(l)
}

func (r *Printer) log(l logs.Line) {
	je := jsonEvent{Type: "log", Target: &jsonTarget{Namespace: l.Namespace, Pod: l.Pod, Container: l.Container}, Message: l.Text}
	if !l.Time.IsZero() {
		je.LogTime = l.Time.UTC().Format(time.RFC3339Nano)
	}
	name := l.Pod + "/" + l.Container
	if r.colour {
		name = podColour(l.Pod) + name + "\033[0m"
	}
	// The line is the container's, not ours: its control characters (a terminal's escape
	// sequences among them) are shown, not obeyed.
	r.emit(je, "%s %s", name, printable(l.Text))
}

// podColours are stern's: one per pod, the same for all its containers.
var podColours = []string{"\033[31m", "\033[32m", "\033[33m", "\033[34m", "\033[35m", "\033[36m", "\033[91m", "\033[92m", "\033[93m", "\033[94m", "\033[95m", "\033[96m"}

func podColour(pod string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(pod))
	return podColours[h.Sum32()%uint32(len(podColours))]
}

// printable replaces the control characters of s, but tabs, with Go escapes.
func printable(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, c := range s {
		if isControl(c) {
			fmt.Fprintf(&b, "\\x%02x", c)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

func isControl(c rune) bool { return c != '\t' && unicode.IsControl(c) }

func (e *EntryPrinter) Forward(ev forward.Event) { e.as(func() { e.r.forward(ev) }) }
func (e *EntryPrinter) Log(l logs.Line)          { e.as(func() { e.r.log(l) }) }
