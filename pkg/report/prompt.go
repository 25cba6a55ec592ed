// The question a held mass delete asks in a terminal: the held line ends in it, and a "y"
// line on stdin lets exactly those deletes through in the session that holds them.

package report

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/cli-runtime/pkg/printers"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/session"
)

// question is the open question of a held mass delete: one answer lets it through in every
// container of its session that holds the same set.
type question struct {
	id      string
	release chan<- string
	what    string // "4,957 deletes under ./vendor"
}

// Interactive reports whether a session on these streams may ask: all three are a terminal
// (the question goes to stderr with the held line), and the output is text.
func Interactive(in io.Reader, out, errOut io.Writer, asJSON bool) bool {
	return !asJSON && printers.IsTerminal(in) && printers.IsTerminal(out) && printers.IsTerminal(errOut)
}

// AskOn has the held lines of mass deletes ask on in, which the reporter reads lines from
// once the first question is asked. wd is what local paths are shown relative to.
func (r *Printer) AskOn(in io.Reader, wd string) {
	r.in, r.wd, r.asks = in, wd, map[string]chan string{}
}

// Releases returns where the session of a livesync.yaml entry ("" for the command line's)
// with cfg gets the IDs of the held deletes the user let through; nil when it does not ask:
// not a terminal, -o json, --once, --dry-run.
func (r *Printer) Releases(entry string, cfg session.Config) <-chan string {
	if r.in == nil || cfg.Once || cfg.Sync.DryRun {
		return nil
	}
	// Buffered: an answer never waits on the session, which may be busy or over.
	ch := make(chan string, 16)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asks[entry] = ch
	return ch
}

// held prints a Held event's line; a mass delete in a session that asks ends it in the
// question, which replaces any question still open.
func (r *Printer) held(e filesync.Held) {
	more := ""
	if len(e.Examples) > 0 {
		more = " (" + strings.Join(e.Examples, ", ")
		if e.Deleted > len(e.Examples) {
			more += ", ..."
		}
		more += ")"
	}
	ev := jsonEvent{Type: "held", Target: toJSONTarget(e.Target), Deleted: &e.Deleted, Names: e.Examples, Reason: e.Reason, Hint: e.Hint}
	entries := "1 remote entry"
	if e.Deleted != 1 {
		entries = grouped(e.Deleted) + " remote entries"
	}
	line := fmt.Sprintf("held: %s: not deleting %s%s: %s", e.Target, entries, more, e.Reason)
	ch := r.asks[r.entry]
	if ch == nil || e.ID == "" || r.inClosed {
		r.emitErr(ev, "%s; %s", line, e.Hint)
		return
	}
	r.question = &question{id: e.ID, release: ch, what: grouped(e.Deleted) + " deletes under " + r.shown(e.Under)}
	r.clearProgress()
	r.endPrompt()
	fmt.Fprintf(r.errOut, "%s%s; apply these %s? [y/N] ", r.prefix(), line, r.question.what)
	r.promptOpen = true
	if !r.reading {
		r.reading = true
		go r.readAnswers()
	}
}

// readAnswers reads the answers to the questions, a line each, until in ends: then the open
// question is answered no, and later held lines say how to allow them instead of asking.
// Ctrl-C ends the process with this read still waiting, which leaves the terminal as it was
// (a line read needs no raw mode).
func (r *Printer) readAnswers() {
	sc := bufio.NewScanner(r.in)
	for sc.Scan() {
		r.answer(sc.Text(), false)
	}
	r.answer("", true)
}

// answer takes line as the answer to the open question, if any; eof: stdin ended.
func (r *Printer) answer(line string, eof bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if eof {
		r.inClosed = true
	} else {
		r.promptOpen = false // the answer's newline was echoed
	}
	q := r.question
	r.question = nil
	if q == nil {
		return
	}
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		r.emitErr(jsonEvent{}, "still held: %s; a change under it decides them again", q.what)
		return
	}
	select {
	case q.release <- q.id:
		r.emitErr(jsonEvent{}, "applying %s", q.what)
	default:
	}
}

// endPrompt moves output that comes while a question is open below it.
func (r *Printer) endPrompt() {
	if r.promptOpen {
		fmt.Fprintln(r.errOut)
		r.promptOpen = false
	}
}

// shown is a local path as the user would type it: relative to the working directory when
// under it.
func (r *Printer) shown(p string) string {
	if rel, err := filepath.Rel(r.wd, p); err == nil && r.wd != "" && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "." + string(filepath.Separator) + rel
	}
	return p
}

// grouped writes n with thousands separators: 4,956.
func grouped(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + grouped(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
