package cmd

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/livesync-dev/kubectl-livesync/pkg/forward"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/project"
)

// A committed livesync.yaml is trusted the way a Makefile is: running it syncs into the
// workloads it names with the user's own RBAC, and its onSync commands run in their containers
// (said in a note). Two things reach past that and need the command line's consent:
//
//   - a LOCAL that resolves outside the file's directory tree (absolute, .., or through a
//     committed symlink such as assets -> /root): the file would upload the user's ~/.ssh;
//   - helper: ephemeral or helperImage: the file would add a container to every pod, as root
//     with SYS_PTRACE where PodSecurity allows, running an image its author chose.
//
//   - a forward that listens on an address other than loopback (0.0.0.0:8080:80): the file
//     would open the pod, with the user's RBAC behind it, to every machine that reaches this
//     one. A loopback forward is what kubectl port-forward does by default; it needs no
//     consent, though other users of this machine can reach it too, as they can kubectl's.
//
// --trust-file consents to all of it; --helper, --helper-image and --forward override the
// fields anyway. logs: true needs none: it prints what the containers the file syncs into
// write, with their control characters escaped (a log line can't drive the terminal).
//
// restart: is not among them. signal:SIG reaches only the containers the file syncs into, as
// its onSync commands do; process changes the workload's command, reversibly (restore), to
// livesync's own supervisor running the container's own command, as pullPolicy and refresh
// change its pull policy and image: the user's RBAC, a change the file's author cannot choose
// the content of, recorded for restore.

// untrusted returns why entry s of the file in dir may not run without --trust-file, or nil.
// ms are its mappings as check left them: absolute, symlinks resolved. given says whether a
// flag was on the command line.
func untrusted(s *project.Sync, dir string, ms []planner.Mapping, given func(flag string) bool) error {
	const consent = "run with --trust-file if you trust this file"
	tree, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", dir, err)
	}
	for i, m := range ms {
		raw := s.Mappings[i]
		local := raw[:max(strings.LastIndex(raw, ":/"), 0)] // as the file writes it, split as ParseMapping does
		if rel, err := filepath.Rel(tree, string(m.Local)); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			if filepath.IsAbs(local) && filepath.Clean(local) == string(m.Local) {
				return fmt.Errorf("mappings[%d]: LOCAL %q is outside %s, the file's directory: %s", i, local, dir, consent)
			}
			return fmt.Errorf("mappings[%d]: LOCAL %q is %s, outside %s, the file's directory: %s", i, local, m.Local, dir, consent)
		}
	}
	if !given("forward") {
		for j, raw := range s.Forward {
			if sp, err := forward.Parse(raw); err == nil && !sp.Loopback() {
				return fmt.Errorf("forward[%d]: %q listens on %s, where other machines can reach the pod: pass --forward %s, or %s", j, raw, sp.ListenAddress(), raw, consent)
			}
		}
	}
	if s.Helper == "ephemeral" && !given("helper") {
		return fmt.Errorf("helper: ephemeral adds a helper container (root with SYS_PTRACE where allowed) to every pod: pass --helper ephemeral, or %s", consent)
	}
	if s.HelperImage != "" && !given("helper-image") {
		return fmt.Errorf("helperImage: %q would run in helper containers in the pods: pass --helper-image %s, or %s", s.HelperImage, s.HelperImage, consent)
	}
	return nil
}
