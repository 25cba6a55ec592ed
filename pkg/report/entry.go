package report

import (
	"bytes"
	"io"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/session"
)

// EntryPrinter prints one livesync.yaml entry's events through the one reporter of the
// run: text lines start with [NAME], NDJSON events carry "entry", and the run prints one
// summary for all entries when every session has ended.
type EntryPrinter struct {
	r    *Printer
	name string
}

var _ session.Reporter = (*EntryPrinter)(nil)

// ForEntry returns the printer of the livesync.yaml entry called name.
func (r *Printer) ForEntry(name string) *EntryPrinter { return &EntryPrinter{r: r, name: name} }

// as runs f with the entry's name on what it prints.
func (e *EntryPrinter) as(f func()) {
	e.r.mu.Lock()
	defer e.r.mu.Unlock()
	e.r.entry = e.name
	defer func() { e.r.entry = "" }()
	f()
}

func (e *EntryPrinter) Report(ev filesync.Event) { e.as(func() { e.r.report(ev) }) }

func (e *EntryPrinter) Refreshed(line string) {
	e.as(func() { e.r.emit(jsonEvent{Type: "refresh", Message: line}, "%s", line) })
}

func (e *EntryPrinter) Warn(err error) {
	e.as(func() { e.r.emitErr(jsonEvent{Type: "error", Error: err.Error()}, "warning: %v", err) })
}

// Failed reports the error that ended the entry's session; the other entries go on.
func (e *EntryPrinter) Failed(err error) {
	e.as(func() {
		e.r.errors++
		e.r.emitErr(jsonEvent{Type: "error", Error: err.Error()}, "error: %v", err)
	})
}

// Note says something the user should know once, as a note event.
func (e *EntryPrinter) Note(msg string) {
	e.as(func() { e.r.emitErr(jsonEvent{Type: "note", Message: msg}, "note: %s", msg) })
}

func (e *EntryPrinter) Watching(roots []string) { e.as(func() { e.r.watching(roots) }) }

// Summary is the run's, printed once by runEntries.
func (e *EntryPrinter) Summary() {}

// Notes returns w with each line started by the entry's name (kubectl's "Defaulted
// container" note is written as one line).
func (e *EntryPrinter) Notes(w io.Writer) io.Writer {
	if e.r.json {
		return w
	}
	return prefixWriter{w: w, prefix: []byte("[" + e.name + "] ")}
}

type prefixWriter struct {
	w      io.Writer
	prefix []byte
}

func (p prefixWriter) Write(b []byte) (int, error) {
	lines := bytes.SplitAfter(b, []byte("\n"))
	var out []byte
	for _, l := range lines {
		if len(l) > 0 {
			out = append(append(out, p.prefix...), l...)
		}
	}
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}
