package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"k8s.io/cli-runtime/pkg/printers"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
)

// syncReporter prints the engine's events: one human line per event, or NDJSON with -o json.
// The NDJSON shapes are documented in the README and are a contract for editors and scripts.
type syncReporter struct {
	out, errOut io.Writer
	json        bool
	// tty draws initial-sync progress on one self-overwriting line of errOut.
	tty      bool
	progress bool // a progress line is on screen

	mu      sync.Mutex
	targets map[string]bool
	batches int
	files   int
	bytes   int64
	errors  int
	started time.Time
}

func newSyncReporter(out, errOut io.Writer, asJSON bool) *syncReporter {
	return &syncReporter{out: out, errOut: errOut, json: asJSON, tty: !asJSON && printers.IsTerminal(errOut),
		targets: map[string]bool{}, started: time.Now()}
}

type jsonTarget struct {
	Namespace   string `json:"namespace"`
	Pod         string `json:"pod"`
	Container   string `json:"container"`
	ContainerID string `json:"containerID,omitempty"`
}

func toJSONTarget(t filesync.Target) *jsonTarget {
	return &jsonTarget{Namespace: t.Namespace, Pod: t.Pod, Container: t.Container, ContainerID: t.ContainerID}
}

// jsonEvent is one NDJSON line; fields not used by a type are omitted.
type jsonEvent struct {
	Type      string      `json:"type"`
	Time      string      `json:"time"`
	Target    *jsonTarget `json:"target,omitempty"`
	Files     *int        `json:"files,omitempty"`
	Changed   *int        `json:"changed,omitempty"`
	Deleted   *int        `json:"deleted,omitempty"`
	Names     []string    `json:"names,omitempty"`
	Targets   *int        `json:"targets,omitempty"`
	Failed    *int        `json:"failed,omitempty"`
	Bytes     *int64      `json:"bytes,omitempty"`
	LatencyMs *float64    `json:"latencyMs,omitempty"`
	Duration  *float64    `json:"durationMs,omitempty"`
	Copy      []string    `json:"copy,omitempty"`
	Delete    []string    `json:"delete,omitempty"`
	ExitCode  *int        `json:"exitCode,omitempty"`
	Output    *string     `json:"output,omitempty"`
	Error     string      `json:"error,omitempty"`
	Hint      string      `json:"hint,omitempty"`
	Message   string      `json:"message,omitempty"`
	Reason    string      `json:"reason,omitempty"`
	Workload  string      `json:"workload,omitempty"`
	Restarts  *int        `json:"restarts,omitempty"`
	Transport string      `json:"transport,omitempty"` // target-added, initial-sync: stream or exec
}

// via says which transport a target's batches use, for the text output.
func via(transport string) string {
	if transport == "" {
		return ""
	}
	return ", via " + transport
}

func ms(d time.Duration) *float64 {
	v := float64(d.Microseconds()) / 1000
	return &v
}

// Report implements filesync.Reporter.
func (r *syncReporter) Report(ev filesync.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e := ev.(type) {
	case filesync.TargetAdded:
		r.targets[e.Target.String()] = true
		r.emit(jsonEvent{Type: "target-added", Target: toJSONTarget(e.Target), Transport: e.Transport}, "+ %s (container %s%s)", e.Target, shortID(e.Target.ContainerID), via(e.Transport))
	case filesync.TargetRemoved:
		delete(r.targets, e.Target.String())
		r.emit(jsonEvent{Type: "target-removed", Target: toJSONTarget(e.Target)}, "- %s", e.Target)
	case filesync.InitialSync:
		if e.Err != nil {
			r.errors++
			r.emitErr(jsonEvent{Type: "initial-sync", Target: toJSONTarget(e.Target), Error: e.Err.Error()}, "initial sync of %s failed: %v", e.Target, e.Err)
			return
		}
		r.files += e.Files
		r.bytes += e.Bytes
		r.emit(jsonEvent{Type: "initial-sync", Target: toJSONTarget(e.Target), Files: &e.Files, Deleted: &e.Deleted, Bytes: &e.Bytes, Duration: ms(e.Duration), Transport: e.Transport},
			"synced %s: %d sent, %d deleted, %s in %s%s", e.Target, e.Files, e.Deleted, humanBytes(e.Bytes), e.Duration.Round(time.Millisecond), via(e.Transport))
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
	case filesync.Error:
		r.errors++
		r.emitErr(jsonEvent{Type: "error", Target: toJSONTarget(e.Target), Error: e.Err.Error(), Hint: e.Hint}, "error: %s: %v", e.Target, e.Err)
	case filesync.OnSync:
		r.onSync(e)
	case filesync.Progress:
		if r.tty {
			r.drawProgress(e)
		}
	case filesync.Held:
		more := ""
		if len(e.Examples) > 0 {
			more = " (" + strings.Join(e.Examples, ", ")
			if e.Deleted > len(e.Examples) {
				more += ", ..."
			}
			more += ")"
		}
		r.emitErr(jsonEvent{Type: "held", Target: toJSONTarget(e.Target), Deleted: &e.Deleted, Names: e.Examples, Reason: e.Reason, Hint: e.Hint},
			"held: %s: not deleting %s%s: %s; %s", e.Target, plural(e.Deleted, "remote entry", "remote entries"), more, e.Reason, e.Hint)
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
	case filesync.DryRun:
		r.emit(jsonEvent{Type: "dry-run", Target: toJSONTarget(e.Target), Copy: e.Copy, Delete: e.Delete},
			"dry run %s: would copy %d, delete %d%s", e.Target, len(e.Copy), len(e.Delete), listing(e.Copy, e.Delete))
	}
}

// onSyncLines is how many of an on-sync command's last output lines the text output shows.
const onSyncLines = 10

// onSync prints one on-sync run: a line on stdout when it exited 0, else a warning on stderr,
// with the last lines of its output indented below.
func (r *syncReporter) onSync(e filesync.OnSync) {
	ev := jsonEvent{Type: "on-sync", Target: toJSONTarget(e.Target), Duration: ms(e.Duration), Output: &e.Output}
	took := e.Duration.Round(time.Millisecond)
	tail := indentTail(e.Output, onSyncLines)
	switch {
	case e.Err != nil:
		ev.Error = e.Err.Error()
		r.emitErr(ev, "warning: on-sync %s: %v%s", e.Target, e.Err, tail)
	case e.ExitCode != 0:
		ev.ExitCode = &e.ExitCode
		r.emitErr(ev, "warning: on-sync %s: exit %d in %s%s", e.Target, e.ExitCode, took, tail)
	default:
		ev.ExitCode = &e.ExitCode
		r.emit(ev, "on-sync %s: exit 0 in %s%s", e.Target, took, tail)
	}
}

// indentTail returns the last n lines of s, each on a new line indented by two spaces.
func indentTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	lines = lines[max(0, len(lines)-n):]
	return "\n  " + strings.Join(lines, "\n  ")
}

func listing(copies, deletes []string) string {
	var b strings.Builder
	for _, c := range copies {
		b.WriteString("\n  copy   " + c)
	}
	for _, d := range deletes {
		b.WriteString("\n  delete " + d)
	}
	return b.String()
}

// refreshed reports what a --refresh or --follow-tag did, one line at a time.
func (r *syncReporter) refreshed(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emit(jsonEvent{Type: "refresh", Message: line}, "%s", line)
}

func (r *syncReporter) warn(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emitErr(jsonEvent{Type: "error", Error: err.Error()}, "warning: %v", err)
}

func (r *syncReporter) watching(roots []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.json {
		fmt.Fprintf(r.errOut, "watching %s; Ctrl-C to stop\n", strings.Join(roots, ", "))
	}
}

func (r *syncReporter) targetCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.targets)
}

// summary prints what the session did, when it ends.
func (r *syncReporter) summary() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.json {
		return
	}
	fmt.Fprintf(r.errOut, "livesync: %d containers, %d batches, %d files, %s sent, %d errors in %s\n",
		len(r.targets), r.batches, r.files, humanBytes(r.bytes), r.errors, time.Since(r.started).Round(time.Second))
}

// drawProgress shows files, bytes, rate and ETA of an initial sync on one line.
func (r *syncReporter) drawProgress(p filesync.Progress) {
	rate := float64(p.Bytes) / p.Elapsed.Seconds()
	line := fmt.Sprintf("syncing %s: %d files, %s/%s, %s/s", p.Target, p.Files, humanBytes(p.Bytes), humanBytes(p.TotalBytes), humanBytes(int64(rate)))
	if p.TotalBytes > p.Bytes && rate > 0 {
		line += fmt.Sprintf(", ETA %s", time.Duration(float64(p.TotalBytes-p.Bytes)/rate*float64(time.Second)).Round(time.Second))
	}
	fmt.Fprintf(r.errOut, "\r\033[K%s", line)
	r.progress = true
}

// clearProgress removes the progress line before any other output.
func (r *syncReporter) clearProgress() {
	if r.progress {
		fmt.Fprint(r.errOut, "\r\033[K")
		r.progress = false
	}
}

// emit prints an event as NDJSON on stdout, or as a line on stdout.
func (r *syncReporter) emit(ev jsonEvent, format string, args ...any) {
	r.print(r.out, ev, format, args...)
}

// emitErr prints an event as NDJSON on stdout, or as a line on stderr.
func (r *syncReporter) emitErr(ev jsonEvent, format string, args ...any) {
	r.print(r.errOut, ev, format, args...)
}

func (r *syncReporter) print(text io.Writer, ev jsonEvent, format string, args ...any) {
	r.clearProgress()
	if r.json {
		r.writeJSON(r.out, ev)
		return
	}
	fmt.Fprintf(text, format+"\n", args...)
}

func (r *syncReporter) writeJSON(w io.Writer, ev jsonEvent) {
	ev.Time = time.Now().UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(ev)
	fmt.Fprintf(w, "%s\n", b)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func shortID(id string) string {
	if i := strings.Index(id, "://"); i >= 0 {
		id = id[i+3:]
	}
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}
