package report

import (
	"fmt"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// jsonHelper is the "helper" field of a helper event.
type jsonHelper struct {
	Name    string `json:"name"`
	Image   string `json:"image"`
	Profile string `json:"profile"`
	Level   string `json:"podSecurity,omitempty"`
	Reused  bool   `json:"reused"`
	DryRun  bool   `json:"dryRun,omitempty"`
	UID     int    `json:"uid"`
	GID     int    `json:"gid"`
	Owner   bool   `json:"setsOwner"`
}

// helperUsed prints that a target is synced through a helper container and, the first time
// one is added, what that leaves in the pod.
func (r *Printer) helperUsed(e filesync.HelperUsed) {
	ev := jsonEvent{Type: "helper", Target: toJSONTarget(e.Target), Reason: e.Why, Helper: &jsonHelper{
		Name: e.Name, Image: e.Image, Profile: e.Profile, Level: e.Level, Reused: e.Reused, DryRun: e.DryRun,
		UID: e.UID, GID: e.GID, Owner: e.Owner}}
	how := "new"
	switch {
	case e.DryRun:
		how = "would be added; the apiserver accepted it in a dry run"
	case e.Reused:
		how = "reused"
	}
	as := fmt.Sprintf("as uid %d gid %d", e.UID, e.GID)
	switch {
	case e.DryRun:
		as = "as " + e.Profile
	case e.Owner:
		as = fmt.Sprintf("as root with CAP_SYS_PTRACE, files made %d:%d's", e.UID, e.GID)
	case e.Profile == string(workload.HelperRootPtrace):
		as = "as root with CAP_SYS_PTRACE"
	}
	if e.Level != "" {
		as += "; PodSecurity " + e.Level
	}
	r.emit(ev, "helper: %s (%s) is synced through ephemeral container %s (%s; image %s; %s)",
		e.Target, e.Why, e.Name, how, e.Image, as)
	if !e.Reused && !e.DryRun && !r.helperNoted {
		r.helperNoted = true
		r.emitErr(jsonEvent{Type: "note", Message: helperNote}, "note: %s", helperNote)
	}
}

const helperNote = "an ephemeral container can't be removed from its pod: it ends when its target container restarts, and each restart adds one more helper to the pod's status (they go when the pod is replaced)"
