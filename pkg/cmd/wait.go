package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/livesync-dev/kubectl-livesync/pkg/control"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncstate"
)

// DefaultWaitTimeout bounds `wait` when --timeout is not given: long enough for a restart
// under --restart process (its supervisor waits up to 30s for the old process to end).
const DefaultWaitTimeout = 2 * time.Minute

// WaitOptions holds `kubectl livesync wait`'s flags: it asks the running session, over its
// control socket, and never talks to the cluster itself.
type WaitOptions struct {
	g       *globalOptions
	forWhat string
	entry   string
	timeout time.Duration
	output  string
	paths   []string
	// stateDir is where sessions register; "" means syncstate.DefaultDir (tests set it).
	stateDir string
}

func newCmdWait(g *globalOptions) *cobra.Command {
	o := &WaitOptions{g: g}
	cmd := &cobra.Command{
		Use:   "wait [--for=synced|restarted|ready] [PATH ...] [--entry NAME] [--timeout D] [-o json]",
		Short: "Wait until every replica runs the current local bytes: a receipt for scripts and agents",
		Long: `Ask the kubectl livesync session that syncs this directory (or PATH, or the livesync.yaml
entry --entry names) to answer once every replica holds the current local bytes of PATH (every
synced path when none is given), compared by sha256, not by time:

  synced     every replica's container confirmed those bytes
  restarted  and the session's --restart ran in it after they landed
  ready      and its pod and container are Ready afterwards (restarted first, with --restart)

Exit 0 with one line when they do; otherwise, after --timeout, exit 1 naming each replica that
lacks them and why (held deletes, a failed batch or restart, a container that exited, with its
status and last lines). Exit 2 when no session syncs here. The session must be running: start it
first (kubectl livesync deploy/my-app ./src:/app, or a livesync.yaml entry), in another terminal
or in the background.`,
		Example: `  # After an edit, return once every replica has it and the app reloaded
  kubectl livesync wait --for=restarted

  # Just these files, at most 30 seconds, as JSON
  kubectl livesync wait main.go static/app.css --timeout 30s -o json

  # The session of the livesync.yaml entry "api", from any directory
  kubectl livesync wait --entry api --for=ready`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.paths = args
			if err := o.Validate(); err != nil {
				return usageError{err}
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.forWhat, "for", control.ForSynced, "what to wait for: synced, restarted (after --restart ran) or ready (and the pods Ready)")
	f.StringVar(&o.entry, "entry", "", "wait on the session of this livesync.yaml entry, wherever it syncs from")
	f.DurationVar(&o.timeout, "timeout", DefaultWaitTimeout, "give up after this long and say what each replica lacks")
	f.StringVarP(&o.output, "output", "o", "", "output format: json (one object per session)")
	return cmd
}

// Validate checks the flags; paths become absolute with symlinks resolved, as the session's
// roots are.
func (o *WaitOptions) Validate() error {
	switch o.forWhat {
	case control.ForSynced, control.ForRestarted, control.ForReady:
	default:
		return fmt.Errorf("invalid --for %q: use synced, restarted or ready", o.forWhat)
	}
	if o.output != "" && o.output != "json" {
		return fmt.Errorf("invalid output format %q: use json or leave -o out", o.output)
	}
	if o.timeout <= 0 {
		return fmt.Errorf("--timeout %s: use a positive duration", o.timeout)
	}
	if !control.Supported {
		return errors.New("wait needs the session's control socket, which is not supported on Windows yet")
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	for i, p := range o.paths {
		if o.paths[i], err = control.Resolve(wd, p); err != nil {
			return err
		}
	}
	if o.stateDir == "" {
		if o.stateDir, err = syncstate.DefaultDir(); err != nil {
			return err
		}
	}
	return nil
}

// Run finds the sessions, waits on each, and says in one line whether every replica is there.
func (o *WaitOptions) Run(ctx context.Context) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	wd = resolvedDir(wd)
	picked, err := control.Pick(ctx, o.stateDir, wd, o.entry, o.paths)
	if errors.Is(err, control.ErrNotRunning) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	results, err := control.WaitAll(ctx, picked, control.WaitRequest{For: o.forWhat, Timeout: o.timeout})
	if err != nil {
		return err
	}
	if o.output == "json" {
		enc := json.NewEncoder(o.g.Out)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
	}
	line, ok := control.Summary(results, o.timeout)
	if !ok {
		return errors.New(line)
	}
	if o.output != "json" {
		writeln(o.g.Out, "%s", line)
	}
	return nil
}

// resolvedDir is dir with its symlinks resolved (a session's roots are), or dir.
func resolvedDir(dir string) string {
	if r, err := control.Resolve(dir, "."); err == nil {
		return r
	}
	return dir
}
