// The dry-run lines of the sync reporter: what a plan would do, and the preflight of how a real
// run would sync (transport, user, whether the remote directory is writable).

package report

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// jsonPreflight is the "preflight" field of a dry-run event: only Error and Hint when the check
// could not run.
type jsonPreflight struct {
	UID       string `json:"uid,omitempty"`
	GID       string `json:"gid,omitempty"`
	Transport string `json:"transport,omitempty"`
	Helper    *bool  `json:"helper,omitempty"`
	Tar       *bool  `json:"tar,omitempty"`
	Root      string `json:"root,omitempty"`
	Writable  *bool  `json:"writable,omitempty"`
	Hint      string `json:"hint,omitempty"`
	Error     string `json:"error,omitempty"`
}

// dryRun prints what a plan would do in a target and, for the initial sync, how: one line per
// target and mapping, with the paths below it. A preflight that could not run is part of the
// line, not an error: the dry run itself went fine.
func (r *Printer) dryRun(e filesync.DryRun) {
	ev := jsonEvent{Type: "dry-run", Target: toJSONTarget(e.Target), Remote: string(e.Remote), Copy: e.Copy, Delete: e.Delete}
	where := e.Target.String()
	if e.Remote != "" {
		where += " " + string(e.Remote)
	}
	switch pf := e.Preflight; {
	case pf == nil:
	case pf.Err != nil:
		ev.Preflight = &jsonPreflight{Error: pf.Err.Error()}
		var se *remote.SyncError
		if errors.As(pf.Err, &se) {
			ev.Preflight.Hint = se.Hint
		}
	default:
		ev.Preflight = &jsonPreflight{UID: pf.UID, GID: pf.GID, Transport: pf.Transport, Helper: &pf.Helper, Tar: &pf.Tar,
			Root: pf.Root, Writable: &pf.Writable, Hint: pf.Hint}
	}
	r.emit(ev, "dry run %s: would copy %d, delete %d%s%s", where, len(e.Copy), len(e.Delete),
		preflightText(e.Remote, e.Preflight), listing(e.Copy, e.Delete))
}

// preflightText is the part of a dry-run line that says how a real run would sync, e.g.
// "; via stream as uid 1000 gid 1000; /app writable", with the hint after what is wrong.
func preflightText(remote filesync.RemotePath, pf *filesync.Preflight) string {
	switch {
	case pf == nil:
		return ""
	case pf.Err != nil:
		return "; not checked: " + pf.Err.Error()
	}
	how := "via " + pf.Transport
	if pf.Helper {
		how += " through a helper container"
	}
	s := fmt.Sprintf("; %s as uid %s gid %s; %s", how, pf.UID, pf.GID, remote)
	switch {
	case pf.Root == filesync.RootNotDir:
		s += " is NOT a directory"
	case pf.Root == filesync.RootMissing && pf.Writable:
		s += " missing, would be created"
	case pf.Root == filesync.RootMissing:
		s += " missing, NOT creatable as uid " + pf.UID
	case pf.Writable:
		s += " writable"
	default:
		s += " NOT writable as uid " + pf.UID
	}
	// The hint is about the first thing wrong: the directory, else tar.
	hint := ""
	if pf.Hint != "" {
		hint = ": " + pf.Hint
	}
	if pf.Root == filesync.RootNotDir || !pf.Writable {
		s, hint = s+hint, ""
	}
	if !pf.Tar {
		s += "; tar not found" + hint
	}
	return s
}

// ancestor says which ancestor a target's mapping starts from and why (see
// filesync.Start), and what a three-way start decided: always under
// --dry-run and -o json, else when there was saved state.
func (r *Printer) ancestor(e filesync.Ancestor) {
	ev := jsonEvent{Type: "ancestor", Target: toJSONTarget(e.Target), Remote: string(e.Remote), From: e.From, Reason: e.Why,
		Mode: string(e.Mode), Decided: e.Decided}
	if !r.json && !r.DryRun && e.From == filesync.StartNone {
		return
	}
	what := map[string]string{
		filesync.StartSaved:     "the saved ancestor",
		filesync.StartDiscarded: "no ancestor (saved state discarded)",
		filesync.StartNone:      "no ancestor",
	}[e.From]
	how := ""
	switch {
	case e.ThreeWay:
		how = ", three-way"
		if len(e.Decided) == 0 {
			how += ": nothing changed on either side"
		}
	case e.Mode == filesync.InitialUpload && !strings.Contains(e.Why, "the local side wins"):
		how = ", the local side wins"
	}
	var ds []string
	for _, k := range slices.Sorted(maps.Keys(e.Decided)) {
		ds = append(ds, fmt.Sprintf("%s %d", k, e.Decided[k]))
	}
	if len(ds) > 0 {
		how += ": " + strings.Join(ds, ", ")
	}
	var ex strings.Builder
	for _, x := range e.Examples {
		ex.WriteString("\n  " + x)
	}
	r.emit(ev, "start %s %s: from %s (%s)%s%s", e.Target, e.Remote, what, e.Why, how, ex.String())
}
