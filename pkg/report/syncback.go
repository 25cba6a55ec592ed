package report

import (
	"errors"
	"strings"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"

	"github.com/livesync-dev/kubectl-livesync/pkg/syncback"
)

// SyncBack prints sync-back's events (pkg/syncback): the source replica
// (named on its target-added line, which follows), each pass that brought
// something back, conflicts and failures.
func (r *Printer) SyncBack(ev syncback.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncBack(ev)
}

func (e *EntryPrinter) SyncBack(ev syncback.Event) { e.as(func() { e.r.syncBack(ev) }) }

func (r *Printer) syncBack(ev syncback.Event) {
	switch e := ev.(type) {
	case syncback.Source:
		if r.sources == nil {
			r.sources = map[string]string{}
		}
		r.sources[r.entry] = e.Target.String() + "@" + e.Target.ContainerID
		if r.targets[e.Target.String()] { // already added: the source changed
			r.emit(jsonEvent{Type: "sync-back-source", Target: toJSONTarget(e.Target)}, "files come back from %s now (the oldest pod)", e.Target)
		}
	case syncback.SyncedBack:
		n := len(e.Paths)
		what, typ := "synced back", "synced-back"
		if e.DryRun {
			what, typ = "would sync back", "dry-run-sync-back"
		}
		line := what + " " + plural(n, "path", "paths")
		if len(e.Deleted) > 0 {
			line += ", " + plural(len(e.Deleted), "delete", "deletes")
		}
		r.emit(jsonEvent{Type: typ, Target: toJSONTarget(e.Target), Paths: e.Paths, Delete: e.Deleted, Bytes: &e.Bytes},
			"%s from %s (%s), %s", line, e.Target, strings.Join(append(e.Paths[:min(len(e.Paths), 5):min(len(e.Paths), 5)], e.Deleted[:min(len(e.Deleted), 5)]...), ", "), humanBytes(e.Bytes))
	case syncback.Conflicted:
		r.emitErr(jsonEvent{Type: "conflict", Target: toJSONTarget(e.Target), Path: e.Path, LocalSum: e.LocalSum, RemoteSum: e.RemoteSum},
			"conflict: %s changed locally and in %s: both kept; the next local save wins (local %s, container %s)", e.Path, e.Target, short(e.LocalSum), short(e.RemoteSum))
	case syncback.Trigger:
		// Not an error: without the trigger, passes run at the interval.
		ev := jsonEvent{Type: "sync-back-trigger", Target: toJSONTarget(e.Target), Reason: "watching"}
		switch {
		case e.Err == nil:
			r.emit(ev, "inotifywait in %s watches the sync-back paths: what the container writes comes back at once", e.Target)
		case errors.Is(e.Err, remote.ErrNoInotifywait):
			ev.Reason, ev.Message = "no-inotifywait", e.Err.Error()
			r.emit(ev, "no inotifywait in %s: sync-back scans it at the interval", e.Target)
		default:
			ev.Reason, ev.Message = "stopped", e.Err.Error()
			r.emit(ev, "sync-back's inotifywait in %s stopped (%v): it scans at the interval", e.Target, e.Err)
		}
	case syncback.Failed:
		r.errors++
		ev := jsonEvent{Type: "error", Target: toJSONTarget(e.Target), Error: e.Err.Error(), Path: e.Path}
		r.emitErr(ev, "sync-back from %s: %v", e.Target, e.Err)
	}
}

// isSource reports whether key (target@containerID) is the source of the
// entry being printed.
func (r *Printer) isSource(key string) bool {
	return r.sources != nil && r.sources[r.entry] == key
}

func short(sum string) string {
	if sum == "" {
		return "none"
	}
	return sum[:min(len(sum), 12)]
}
