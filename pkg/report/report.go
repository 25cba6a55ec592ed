package report

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"k8s.io/cli-runtime/pkg/printers"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/session"
)

// Printer prints the engine's events: one human line per event, or NDJSON with -o json.
// The NDJSON shapes are documented in docs/reference.md and are a contract for editors and scripts.
type Printer struct {
	out, errOut io.Writer
	json        bool
	// DryRun: the session is a dry run, which says what every target
	// starts from (see ancestor).
	DryRun bool
	// tty draws initial-sync progress on one self-overwriting line of errOut.
	tty      bool
	progress bool // a progress line is on screen
	// progressAt is when (the event's Elapsed) each target's last progress
	// event went out under -o json.
	progressAt map[string]time.Duration
	// colour colours the log lines' pod/container, one colour per pod, on a terminal.
	colour bool

	mu sync.Mutex
	// entry names the livesync.yaml entry whose event is being printed (under mu).
	entry   string
	targets map[string]bool
	batches int
	files   int
	bytes   int64
	errors  int
	started time.Time
	// sources is each entry's sync-back source replica, as target@containerID.
	sources map[string]string
	// helperNoted: the note on what helpers leave in a pod was printed.
	helperNoted bool

	// Held mass deletes ask in a terminal (prompt.go): in is read for answers, nil when
	// nothing asks; asks are the sessions' release channels by entry.
	in         io.Reader
	wd         string
	asks       map[string]chan string
	question   *question // the open question (under mu)
	promptOpen bool      // the cursor is at the end of the question
	reading    bool      // readAnswers runs
	inClosed   bool      // stdin ended: no more questions
}

var _ session.Reporter = (*Printer)(nil)

// NewPrinter returns a printer of text lines (NDJSON when asJSON) on out, and of
// errors, warnings and progress on errOut.
func NewPrinter(out, errOut io.Writer, asJSON bool) *Printer {
	return &Printer{out: out, errOut: errOut, json: asJSON, tty: !asJSON && printers.IsTerminal(errOut), colour: !asJSON && printers.IsTerminal(out),
		targets: map[string]bool{}, started: time.Now()}
}

// Report implements filesync.Reporter.
func (r *Printer) Report(ev filesync.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report(ev)
}

func (r *Printer) report(ev filesync.Event) {
	switch e := ev.(type) {
	case filesync.TargetAdded:
		r.targets[e.Target.String()] = true
		ev, src := jsonEvent{Type: "target-added", Target: toJSONTarget(e.Target), Transport: e.Transport}, ""
		if r.isSource(e.Target.String() + "@" + e.Target.ContainerID) {
			ev.SyncBack, src = "source", ", sync-back source"
		}
		r.emit(ev, "+ %s (container %s%s%s)", e.Target, shortID(e.Target.ContainerID), via(e.Transport), src)
	case filesync.TargetRemoved:
		delete(r.targets, e.Target.String())
		r.emit(jsonEvent{Type: "target-removed", Target: toJSONTarget(e.Target)}, "- %s", e.Target)
	case filesync.InitialSync:
		if e.Err != nil {
			r.errors++
			r.emitErr(jsonEvent{Type: "initial-sync", Target: toJSONTarget(e.Target), Error: e.Err.Error(), Node: e.Node, Reason: e.Reason}, "initial sync of %s failed: %v", e.Target, e.Err)
			return
		}
		r.files += e.Files
		r.bytes += e.Bytes
		format := "synced %s: %d sent, %d deleted, %s in %s%s"
		if r.DryRun {
			format = "dry run, nothing written to %s: %d to send, %d to delete, %s, planned in %s%s"
		}
		r.emit(jsonEvent{Type: "initial-sync", Target: toJSONTarget(e.Target), Files: &e.Files, Deleted: &e.Deleted, Bytes: &e.Bytes, Duration: ms(e.Duration), Transport: e.Transport},
			format, e.Target, e.Files, e.Deleted, humanBytes(e.Bytes), e.Duration.Round(time.Millisecond), via(e.Transport))
	case filesync.Batch:
		if e.Changed == 0 && e.Deleted == 0 && e.Failed == 0 {
			return // events that changed nothing (e.g. a directory's mtime) are noise
		}
		r.batches++
		r.files += e.Changed
		r.bytes += e.Bytes
		line := fmt.Sprintf("%d changed, %d deleted", e.Changed, e.Deleted)
		if len(e.Names) > 0 {
			line += " (" + strings.Join(e.Names, ", ") + ")"
		}
		r.emit(jsonEvent{Type: "batch", Changed: &e.Changed, Deleted: &e.Deleted, Names: e.Names, Targets: &e.Targets, Failed: &e.Failed, Bytes: &e.Bytes, LatencyMs: ms(e.Latency)},
			"%s -> %d/%d containers, %s in %s", line, e.Targets-e.Failed, e.Targets, humanBytes(e.Bytes), e.Latency.Round(time.Millisecond))
	case filesync.Recovered:
		back := ""
		if e.Node != "" {
			back = ": its node " + e.Node + " is back"
		}
		r.emit(jsonEvent{Type: "recovered", Target: toJSONTarget(e.Target), Failures: &e.Failures, Duration: ms(e.Duration), Node: e.Node},
			"recovered: %s is in sync again after %s in %s%s", e.Target, plural(e.Failures, "failed try", "failed tries"), e.Duration.Round(time.Second), back)
	case filesync.Error:
		r.errors++
		r.emitErr(jsonEvent{Type: "error", Target: toJSONTarget(e.Target), Error: e.Err.Error(), Hint: e.Hint, Node: e.Node, Reason: e.Reason}, "error: %s: %v", e.Target, e.Err)
	case filesync.OnSync:
		r.onSync(e)
	case filesync.Progress:
		r.progressed(e)
	case filesync.Held:
		r.held(e)
	case filesync.Waiting:
		r.emitErr(jsonEvent{Type: "waiting", Workload: e.Workload, Reason: e.Reason, Message: e.Message},
			"waiting for %s: %s", e.Workload, e.Message)
	case filesync.Restarting:
		ev := jsonEvent{Type: "restarting", Target: toJSONTarget(e.Target), Restarts: &e.Restarts}
		code := ""
		if e.ExitCode != nil {
			c := int(*e.ExitCode)
			ev.ExitCode, code = &c, fmt.Sprintf(", last exit code %d", c)
		}
		ev.Message = fmt.Sprintf("restarted %d times within %s%s: each restart wipes the synced files from the container's writable layer and livesync syncs them again; the app is probably crashing: kubectl logs %s -c %s --previous -n %s",
			e.Restarts, e.Window, code, e.Target.Pod, e.Target.Container, e.Target.Namespace)
		r.emitErr(ev, "warning: %s %s", e.Target, ev.Message)
	case filesync.HelperUsed:
		r.helperUsed(e)
	case filesync.DryRun:
		r.dryRun(e)
	case filesync.Ancestor:
		r.ancestor(e)
	}
}

// Refreshed reports what a --refresh or --follow-tag did, one line at a time.
func (r *Printer) Refreshed(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emit(jsonEvent{Type: "refresh", Message: line}, "%s", line)
}

// Warn reports a problem that does not end the session.
func (r *Printer) Warn(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emitErr(jsonEvent{Type: "error", Error: err.Error()}, "warning: %v", err)
}

// Watching says the session is watching roots.
func (r *Printer) Watching(roots []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watching(roots)
}

func (r *Printer) watching(roots []string) {
	if r.json {
		r.writeJSON(r.out, jsonEvent{Type: "watching", Entry: r.entry, Paths: roots})
		return
	}
	r.clearProgress()
	r.endPrompt()
	fmt.Fprintf(r.errOut, "%swatching %s; Ctrl-C to stop\n", r.prefix(), strings.Join(roots, ", "))
}

// Summary prints what the session did, when it ends.
func (r *Printer) Summary() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.json {
		return
	}
	r.clearProgress()
	r.endPrompt()
	fmt.Fprintf(r.errOut, "livesync: %s, %s, %s, %s sent, %s in %s\n",
		plural(len(r.targets), "container", "containers"), plural(r.batches, "batch", "batches"), plural(r.files, "file", "files"), humanBytes(r.bytes), plural(r.errors, "error", "errors"), time.Since(r.started).Round(time.Second))
}

// emit prints an event as NDJSON on stdout, or as a line on stdout.
func (r *Printer) emit(ev jsonEvent, format string, args ...any) {
	r.print(r.out, ev, format, args...)
}

// emitErr prints an event as NDJSON on stdout, or as a line on stderr.
func (r *Printer) emitErr(ev jsonEvent, format string, args ...any) {
	r.print(r.errOut, ev, format, args...)
}

func (r *Printer) print(text io.Writer, ev jsonEvent, format string, args ...any) {
	r.clearProgress()
	if r.json {
		ev.Entry = r.entry
		r.writeJSON(r.out, ev)
		return
	}
	r.endPrompt()
	fmt.Fprintf(text, r.prefix()+format+"\n", args...)
}

// prefix starts the text lines of a livesync.yaml entry with its name.
func (r *Printer) prefix() string {
	if r.entry == "" {
		return ""
	}
	return "[" + r.entry + "] "
}
