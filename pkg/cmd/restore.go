package cmd

import (
	"context"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/livesync-dev/kubectl-livesync/pkg/inspect"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// RestoreOptions holds everything `kubectl livesync restore` needs.
type RestoreOptions struct {
	g        *globalOptions
	target   targetOptions
	registry registryOptions
	mutate   mutateOptions
	force    bool
	args     []string
}

func newCmdRestore(g *globalOptions) *cobra.Command {
	o := &RestoreOptions{g: g}
	cmd := &cobra.Command{
		Use:   "restore (TYPE/NAME | TYPE NAME | POD | TYPE -l SELECTOR) [--dry-run]",
		Short: "Put back the images, pull policies and commands that refresh, pull-policy and --restart process changed",
		Long: `Read the livesync.dev/original annotation, put back each recorded image and pull policy (of
containers and image volumes) that is still what livesync set, and each command livesync wrapped in its supervisor (--restart
process), drop the records of what was restored and wait for the rollout. A container someone
changed since livesync did (kubectl set image after a refresh) is left as is, said so, and its
record kept; --force restores it too. An original pinned to a digest the registry no longer
serves is refused, changing nothing (its pods might not start); --force restores it anyway.
Nothing recorded: says so and changes nothing.`,
		Example: `  # Undo every livesync change on deploy/my-app
  kubectl livesync restore deploy/my-app

  # Show what would be restored
  kubectl livesync restore deploy/my-app --dry-run

  # Also restore containers whose image someone changed after livesync pinned it
  kubectl livesync restore deploy/my-app --force`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.args = args
			return o.g.run(cmd, o)
		},
	}
	cmd.Flags().StringVarP(&o.target.selector, "selector", "l", "", "label selector (e.g. -l app=web) instead of a name")
	o.registry.addFlags(cmd.Flags())
	o.mutate.addFlags(cmd.Flags())
	cmd.Flags().BoolVar(&o.force, "force", false, "restore containers whose image or pull policy someone changed since livesync set it, too, and originals pinned to a digest the registry no longer serves")
	return cmd
}

// Validate checks the arguments before anything talks to the cluster.
func (o *RestoreOptions) Validate() error {
	if len(o.args) == 0 && o.target.selector == "" {
		return noArgsError("restore deploy/my-app")
	}
	return nil
}

// guard refuses the change in a run no one watches on a cluster that is not local (see
// guardWrites); --dry-run changes nothing.
func (o *RestoreOptions) guard() error {
	if o.mutate.dryRun {
		return nil
	}
	return o.g.guardWrites("kubectl livesync restore", nil)
}

// Run restores every named workload. Every workload is planned before any is changed, so a
// bad record on one of them (with -l) refuses the whole command and changes nothing.
func (o *RestoreOptions) Run(ctx context.Context) error {
	ws, err := o.target.resolve(o.g, o.args)
	if err != nil {
		return err
	}
	plans := make([]*workload.RestorePlan, 0, len(ws))
	for _, w := range ws {
		p, err := workload.PlanRestore(w, o.force)
		if err != nil {
			return err
		}
		plans = append(plans, p)
	}
	// An original that was itself pinned must still be served, or its pods may not start.
	if !o.force {
		for _, p := range plans {
			if err := o.checkPins(ctx, p); err != nil {
				return err
			}
		}
	}
	for _, p := range plans {
		if err := o.restore(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// checkPins refuses a plan that would put back an image pinned to a digest the registry no
// longer serves. The registry is asked only when some original has a digest.
func (o *RestoreOptions) checkPins(ctx context.Context, p *workload.RestorePlan) error {
	changes := p.Changes()
	if !slices.ContainsFunc(changes, func(ch workload.Change) bool { return strings.Contains(ch.Image, "@") }) {
		return nil
	}
	res, err := o.registry.resolverFor(ctx, o.g, p.Workload)
	if err != nil {
		return err
	}
	return inspect.CheckPins(ctx, res, p.Workload, changes)
}

// restore prints the plan's decisions and applies it. A container left as is because someone
// changed it since livesync did is reported, not an error: restore did everything it safely
// could, and the exit code stays 0 unless something else fails.
func (o *RestoreOptions) restore(ctx context.Context, p *workload.RestorePlan) error {
	w := p.Workload
	if p.Empty() {
		writeln(o.g.Out, "%s: nothing recorded to restore", w.Ref())
		return nil
	}
	for _, key := range p.Gone {
		writeln(o.g.Out, "%s: %s is no longer in the template; dropping its record", w.Ref(), workload.LabelOfKey(key))
	}
	for _, s := range p.Steps {
		c, ch := s.Container, s.Change
		switch {
		case s.Skipped:
			writeln(o.g.Out, "%s: %s: %s; left as is, use --force to restore %s anyway", w.Ref(), c.Label(), s.Conflict, describeChange(ch))
			continue
		case s.Conflict != "":
			writeln(o.g.Out, "%s: %s: %s; restoring anyway (--force)", w.Ref(), c.Label(), s.Conflict)
		}
		if ch.Image != "" {
			writeln(o.g.Out, "%s: %s: image %s -> %s", w.Ref(), c.Label(), c.Image, ch.Image)
		}
		if ch.PullPolicy != "" {
			writeln(o.g.Out, "%s: %s: imagePullPolicy %s -> %s", w.Ref(), c.Label(), c.PullPolicy, ch.PullPolicy)
		}
		if ch.SetCommand {
			writeln(o.g.Out, "%s: %s: command: livesync's supervisor -> %s", w.Ref(), c.Label(), describeCommand(ch.Command))
		}
	}
	patch, err := p.Patch()
	if err != nil {
		return err
	}
	if patch == nil {
		writeln(o.g.Out, "%s: nothing restored; the record is kept for restore --force", w.Ref())
		return nil
	}
	diff := p.Changes()
	if len(diff) == 0 && patch.Restore {
		writeln(o.g.Out, "%s: images, pull policies and commands are already the originals; removing the record", w.Ref())
	}
	targets, err := workload.PodTargets(ctx, o.g.client, w, diff, nil)
	if err != nil {
		return err
	}
	return o.mutate.apply(ctx, o.g, o.g.Out, patch, targets)
}

// describeChange names what a change puts back, e.g. "app:dev" or "app:dev, imagePullPolicy
// IfNotPresent".
func describeChange(ch workload.Change) string {
	var parts []string
	if ch.Image != "" {
		parts = append(parts, ch.Image)
	}
	if ch.PullPolicy != "" {
		parts = append(parts, "imagePullPolicy "+ch.PullPolicy)
	}
	if ch.SetCommand {
		parts = append(parts, "command "+describeCommand(ch.Command))
	}
	if len(parts) == 0 {
		return "the recorded original"
	}
	return strings.Join(parts, ", ")
}

// describeCommand names a container command restore puts back; nil is none in the template,
// where the image's entrypoint runs.
func describeCommand(argv []string) string {
	if argv == nil {
		return "none (the image's entrypoint)"
	}
	return shellWords(argv)
}
