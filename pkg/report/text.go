// The human lines of the sync reporter: on-sync output, dry-run listings, progress, sizes.

package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
)

// onSyncLines is how many of an on-sync command's last output lines the text output shows.
const onSyncLines = 10

// onSync prints one on-sync run: a line on stdout when it exited 0, else a warning on stderr,
// with the last lines of its output indented below.
func (r *Printer) onSync(e filesync.OnSync) {
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

// jsonProgressEvery is how often at most a target's progress goes out as a
// JSON event: a script needs no more, and 5 lines a second would bury the rest.
const jsonProgressEvery = time.Second

// progressed shows a long start's or send's progress: on one line of a
// terminal, redrawn in place; under -o json as a progress event at most every
// jsonProgressEvery per target (by the event's own clock, so a new start of
// the target begins anew); elsewhere not at all.
func (r *Printer) progressed(p filesync.Progress) {
	if r.json {
		k := p.Target.String()
		if last, ok := r.progressAt[k]; ok && p.Elapsed >= last && p.Elapsed-last < jsonProgressEvery {
			return
		}
		if r.progressAt == nil {
			r.progressAt = map[string]time.Duration{}
		}
		r.progressAt[k] = p.Elapsed
		ev := jsonEvent{Type: "progress", Target: toJSONTarget(p.Target), Files: &p.Files, Bytes: &p.Bytes, Total: &p.TotalBytes, Duration: ms(p.Elapsed)}
		if p.Start {
			ev.Listed, ev.Hashed = &p.Listed, &p.Hashed
		}
		r.emit(ev, "")
		return
	}
	if r.tty {
		r.drawProgress(p)
	}
}

// drawProgress shows on one line what a start listed and hashed, and files,
// bytes, rate and ETA of what it (or a batch) sends.
func (r *Printer) drawProgress(p filesync.Progress) {
	r.endPrompt()
	secs := p.Elapsed.Seconds()
	line := "syncing " + p.Target.String() + ": "
	if p.Start {
		line += fmt.Sprintf("%d listed, %d hashed", p.Listed, p.Hashed)
		if p.Files == 0 {
			if secs > 0 {
				line += fmt.Sprintf(", %.0f files/s", float64(p.Listed+p.Hashed)/secs)
			}
			fmt.Fprintf(r.errOut, "\r\033[K%s", line)
			r.progress = true
			return
		}
		line += ", sending "
	}
	rate := float64(p.Bytes) / secs
	line += fmt.Sprintf("%d files, %s/%s, %s/s", p.Files, humanBytes(p.Bytes), humanBytes(p.TotalBytes), humanBytes(int64(rate)))
	if p.TotalBytes > p.Bytes && rate > 0 {
		line += fmt.Sprintf(", ETA %s", time.Duration(float64(p.TotalBytes-p.Bytes)/rate*float64(time.Second)).Round(time.Second))
	}
	fmt.Fprintf(r.errOut, "\r\033[K%s", line)
	r.progress = true
}

// clearProgress removes the progress line before any other output.
func (r *Printer) clearProgress() {
	if r.progress {
		fmt.Fprint(r.errOut, "\r\033[K")
		r.progress = false
	}
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
