package cmd

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/ignore"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"

	"github.com/livesync-dev/kubectl-livesync/pkg/image"
	"github.com/livesync-dev/kubectl-livesync/pkg/session"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncstate"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// check completes c with its mappings (absolute, symlinks resolved) and initial mode, and
// checks it: the command line's session, or one entry of livesync.yaml.
func (o *SyncOptions) check(c *session.Config, ms []planner.Mapping, initial string) error {
	for i, m := range ms {
		abs, err := filepath.Abs(string(m.Local))
		if err != nil {
			return fmt.Errorf("mapping %q: %w", m, err)
		}
		ms[i].Local = planner.LocalPath(abs)
	}
	if err := planner.ValidateMappings(ms); err != nil {
		return err
	}
	// A symlinked LOCAL (./current -> releases/v2) is resolved once, here, so the watcher and
	// the engine agree on one real root; a link re-pointed later is not followed.
	for i, m := range ms {
		real, err := filepath.EvalSymlinks(string(m.Local))
		if err != nil {
			return fmt.Errorf("mapping %q: resolving local path: %w", m, err)
		}
		ms[i].Local = planner.LocalPath(real)
	}
	c.Sync.Mappings = ms
	if slices.Contains(c.Containers, "") {
		return errors.New(`-c "": name a container, or leave -c out to sync into the default one`)
	}
	mode, err := planner.ParseInitialMode(initial)
	if err != nil {
		return err
	}
	c.Sync.Initial, c.Sync.DryRun = mode, o.mutate.dryRun
	c.SyncBack.DryRun = o.mutate.dryRun
	if c.State.Dir == "" {
		dir, err := syncstate.DefaultDir()
		if err != nil {
			return fmt.Errorf("%w: set XDG_STATE_HOME to a directory for livesync's saved state", err)
		}
		c.State.Dir = dir
	}
	for _, g := range c.SyncBack.Globs {
		if err := ignore.CheckGlob(g); err != nil {
			return err
		}
	}
	if err := validateHelper(c); err != nil {
		return err
	}
	if err := checkLive(c, o.mutate.dryRun, o.flagName); err != nil {
		return err
	}
	if c.PullPolicy != "" {
		if err := image.ValidPullPolicy(c.PullPolicy); err != nil {
			return err
		}
	}
	switch {
	case o.output != "text" && o.output != "json":
		return fmt.Errorf("invalid output %q: use text or json", o.output)
	case c.Sync.Quiet <= 0 || c.Sync.Cap < c.Sync.Quiet:
		return fmt.Errorf("--batch-quiet %s must be positive and at most --batch-max %s", c.Sync.Quiet, c.Sync.Cap)
	case c.Sync.Parallelism < 1:
		return fmt.Errorf("--parallel %d: use 1 or more", c.Sync.Parallelism)
	case c.Sync.ExecTimeout < time.Second:
		return fmt.Errorf("--exec-timeout %s is too short: use 1s or more", c.Sync.ExecTimeout)
	case c.Sync.OnSyncTimeout <= 0:
		return fmt.Errorf("--on-sync-timeout %s: use a positive duration", c.Sync.OnSyncTimeout)
	case c.Once && c.FollowTag:
		return errors.New("--once and --follow-tag cannot be combined: --once exits after the initial sync")
	case o.mutate.dryRun && (c.FollowTag || c.Refresh || c.PullPolicy != ""):
		return errors.New("--dry-run syncs nothing and changes no workload: drop --refresh, --follow-tag and --pull-policy, or use the refresh and pull-policy commands with --dry-run")
	case c.FollowTag:
		return workload.CheckFollowInterval(c.Interval)
	}
	return nil
}
