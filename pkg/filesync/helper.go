package filesync

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

// HelperArgv returns argv, one of this package's `sh -c SCRIPT …` commands,
// as a helper container runs it for a target whose root it reaches at rootfs
// (/proc/PID/root): every remote directory the script gets is resolved
// inside that root. A non-nil owner has the extracted files and the
// directories apply creates made that uid:gid's (a root helper writing for a
// non-root target). Any other argv is returned as it is.
func HelperArgv(argv []string, rootfs string, owner *Owner) []string {
	if len(argv) < 3 || argv[0] != "sh" || argv[1] != "-c" {
		return argv
	}
	var pre strings.Builder
	pre.WriteString("LIVESYNC_ROOTFS=" + shellWords([]string{rootfs}) + "\n")
	if owner != nil {
		fmt.Fprintf(&pre, "LIVESYNC_OWNER=%d:%d\n", owner.UID, owner.GID)
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
	return []string{"sh", "-c", helperProbeScript, "livesync-probe", containerID}
}

// ProbeResult is what HelperProbe found.
type ProbeResult struct {
	PID       int
	UID, GID  int
	Reachable bool // the helper may open /proc/PID/root
}

// ParseHelperProbe parses HelperProbe's output.
func ParseHelperProbe(out string) (ProbeResult, error) {
	f := strings.Fields(out)
	if len(f) == 1 && f[0] == "N" {
		return ProbeResult{}, fmt.Errorf("no process of the target container is visible from the helper")
	}
	if len(f) != 5 || f[0] != "P" || (f[4] != "ok" && f[4] != "denied") {
		return ProbeResult{}, fmt.Errorf("unexpected helper probe output %q", strings.TrimSpace(out))
	}
	var n [3]int
	for i, s := range f[1:4] {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return ProbeResult{}, fmt.Errorf("unexpected helper probe output %q", strings.TrimSpace(out))
		}
		n[i] = v
	}
	return ProbeResult{PID: n[0], UID: n[1], GID: n[2], Reachable: f[4] == "ok"}, nil
}
