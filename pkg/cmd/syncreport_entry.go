package cmd

import (
	"bytes"
	"io"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/session"
)

// entryReporter prints one livesync.yaml entry's events through the one reporter of the
// run: text lines start with [NAME], NDJSON events carry "entry", and the run prints one
// summary for all entries when every session has ended.
type entryReporter struct {
	r    *syncReporter
	name string
}

var _ session.Reporter = (*entryReporter)(nil)

func (r *syncReporter) forEntry(name string) *entryReporter { return &entryReporter{r: r, name: name} }

// as runs f with the entry's name on what it prints.
func (e *entryReporter) as(f func()) {
	e.r.mu.Lock()
	defer e.r.mu.Unlock()
	e.r.entry = e.name
	defer func() { e.r.entry = "" }()
	f()
}

func (e *entryReporter) Report(ev filesync.Event) { e.as(func() { e.r.report(ev) }) }

func (e *entryReporter) Refreshed(line string) {
	e.as(func() { e.r.emit(jsonEvent{Type: "refresh", Message: line}, "%s", line) })
}

func (e *entryReporter) Warn(err error) {
	e.as(func() { e.r.emitErr(jsonEvent{Type: "error", Error: err.Error()}, "warning: %v", err) })
}

// Failed reports the error that ended the entry's session; the other entries go on.
func (e *entryReporter) Failed(err error) {
	e.as(func() {
		e.r.errors++
		e.r.emitErr(jsonEvent{Type: "error", Error: err.Error()}, "error: %v", err)
	})
}

// Note says something the user should know once, as a note event.
func (e *entryReporter) Note(msg string) {
	e.as(func() { e.r.emitErr(jsonEvent{Type: "note", Message: msg}, "note: %s", msg) })
}

func (e *entryReporter) Watching(roots []string) { e.as(func() { e.r.watching(roots) }) }

// Summary is the run's, printed once by runEntries.
func (e *entryReporter) Summary() {}

// notes returns w with each line started by the entry's name (kubectl's "Defaulted
// container" note is written as one line).
func (e *entryReporter) notes(w io.Writer) io.Writer {
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
