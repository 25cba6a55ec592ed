package remote

import (
	"embed"
	"strings"
)

// scripts holds the remote side of this package: shell scripts that run in
// the container as `sh -c`, written for POSIX sh and busybox. hack/verify.sh
// runs shellcheck on them.
//
//go:embed scripts/*.sh
var scripts embed.FS

// Each script travels as text in its exec's argv; its header says what it
// takes and prints.
var (
	// applyScript is the whole remote side of a batch (see ApplyArgs).
	applyScript = script("apply.sh")
	// listScript and listChunkScript list a remote directory (see List).
	listScript      = script("list.sh")
	listChunkScript = script("list-chunk.sh")
	// onSyncScript runs the on-sync command (see RunOnSync).
	onSyncScript = script("on-sync.sh")
	// preflightScript is a dry run's read-only check of a remote directory (see Preflight).
	preflightScript = script("preflight.sh")
	// supervisorScript is the command --restart process installs (see
	// SupervisorCommand); restartScript asks it to restart its child (see
	// RestartProcess); signalScript reads and signals the main process (see
	// CheckSignal and SendSignal).
	supervisorScript = script("supervisor.sh")
	restartScript    = script("restart.sh")
	signalScript     = script("signal.sh")
)

// script returns scripts/name without its comment and blank lines: they
// document it, but every exec would carry them in its URL, which proxies and
// apiservers limit.
func script(name string) string {
	b, err := scripts.ReadFile("scripts/" + name)
	if err != nil {
		panic(err) // embedded above: only a typo gets here
	}
	var out strings.Builder
	for line := range strings.Lines(string(b)) {
		if s := strings.TrimSpace(line); s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		out.WriteString(line)
	}
	return out.String()
}
