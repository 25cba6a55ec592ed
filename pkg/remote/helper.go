package remote

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Scripts for a helper container (see scripts/helper.sh).
var (
	helperPrelude     = script("helper.sh")
	helperProbeScript = script("helper-probe.sh")
)

// HelperMovedStatus and HelperMovedMarker are how a script run through
// HelperArgv fails when the target's process it was given has ended, or its
// PID is another process's now (livesync_pinned in scripts/helper.sh): the
// exit status, and the start of its stderr. The route is then to be probed
// again (HelperProbe) and the script run anew; a stream's loop ends the
// same way (see streamLoop).
const (
	HelperMovedStatus = 75
	HelperMovedMarker = "livesync: helper target moved"
)

// HelperRoute is how a helper container reaches its target's files: through
// /proc/PID/root of the target's main process, as HelperProbe found it.
type HelperRoute struct {
	PID int
	// Start is PID's start time (field 22 of /proc/PID/stat), which every
	// script checks first: a PID that another process took since is not the
	// target's.
	Start uint64
	// Owner, if set, is whose the extracted files and the directories apply
	// creates are made: a root helper writing for a non-root target.
	Owner *Owner
}

// HelperArgv returns argv, one of this package's `sh -c SCRIPT …` commands,
// as a helper container runs it for a target it reaches by r: every remote
// directory the script gets is resolved inside the target's root, and the
// script fails with HelperMovedStatus once r's process is not the target's
// any more. Any other argv is returned as it is.
func HelperArgv(argv []string, r HelperRoute) []string {
	if len(argv) < 3 || argv[0] != "sh" || argv[1] != "-c" {
		return argv
	}
	var pre strings.Builder
	fmt.Fprintf(&pre, "LIVESYNC_PID=%d LIVESYNC_START=%d\n", r.PID, r.Start)
	if r.Owner != nil {
		fmt.Fprintf(&pre, "LIVESYNC_OWNER=%d:%d\n", r.Owner.UID, r.Owner.GID)
	}
	out := slices.Clone(argv)
	out[2] = pre.String() + helperPrelude + argv[2]
	return out
}

// HelperProbe is what a helper runs to find its target's process: the
// argv of scripts/helper-probe.sh for the target's container ID
// ("containerd://abc…" or the bare ID).
func HelperProbe(containerID string) []string {
	if _, id, ok := strings.Cut(containerID, "://"); ok {
		containerID = id
	}
	return []string{"sh", "-c", helperPrelude + helperProbeScript, "livesync-probe", containerID}
}

// ProbeResult is what HelperProbe found.
type ProbeResult struct {
	PID       int
	Start     uint64 // PID's start time (see HelperRoute)
	UID, GID  int
	Reachable bool // the helper may open /proc/PID/root
}

// ParseHelperProbe parses HelperProbe's output.
func ParseHelperProbe(out string) (ProbeResult, error) {
	f := strings.Fields(out)
	if len(f) == 1 && f[0] == "N" {
		return ProbeResult{}, fmt.Errorf("no process of the target container is visible from the helper: none outside it has the container's ID in its cgroup")
	}
	bad := fmt.Errorf("unexpected helper probe output %q", strings.TrimSpace(out))
	if len(f) != 6 || f[0] != "P" || (f[5] != "ok" && f[5] != "denied") {
		return ProbeResult{}, bad
	}
	start, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil {
		return ProbeResult{}, bad
	}
	var n [3]int
	for i, s := range []string{f[1], f[3], f[4]} {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return ProbeResult{}, bad
		}
		n[i] = v
	}
	return ProbeResult{PID: n[0], Start: start, UID: n[1], GID: n[2], Reachable: f[5] == "ok"}, nil
}
