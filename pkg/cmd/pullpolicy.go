package cmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/livesync-dev/kubectl-livesync/pkg/image"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// PullPolicyOptions holds everything `kubectl livesync pull-policy` needs.
type PullPolicyOptions struct {
	g      *globalOptions
	target targetOptions
	mutate mutateOptions
	policy string
	args   []string
}

func newCmdPullPolicy(g *globalOptions) *cobra.Command {
	o := &PullPolicyOptions{g: g}
	cmd := &cobra.Command{
		Use:   "pull-policy (TYPE/NAME | TYPE NAME | TYPE -l SELECTOR) Always|IfNotPresent|Never [-c CONTAINER] [--dry-run]",
		Short: "Set the imagePullPolicy of a workload's containers, recording the original for restore",
		Long: `Patch the imagePullPolicy of the chosen containers (default: all) and wait for the rollout.
The original policy and image are recorded in the livesync.dev/original annotation, so
"kubectl livesync restore" puts them back. A running Pod's pull policy is immutable: change
the workload that owns it instead.`,
		Example: `  # Pull a moved :dev tag whenever a container starts
  kubectl livesync pull-policy deploy/my-app Always

  # Only one container, and only show what would change
  kubectl livesync pull-policy deploy/my-app IfNotPresent -c app --dry-run`,
		Args: cobra.RangeArgs(1, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.policy, o.args = args[len(args)-1], args[:len(args)-1]
			return o.g.run(cmd, o)
		},
	}
	o.target.addFlags(cmd.Flags(), "container to change (repeatable); default: every container")
	o.mutate.addFlags(cmd.Flags())
	return cmd
}

// Validate checks the policy before anything talks to the cluster.
func (o *PullPolicyOptions) Validate() error {
	if err := image.ValidPullPolicy(o.policy); err != nil {
		return err
	}
	if len(o.args) == 0 && o.target.selector == "" {
		return noArgsError("pull-policy deploy/my-app Always")
	}
	return nil
}

// Run patches every named workload.
func (o *PullPolicyOptions) Run(ctx context.Context) error {
	ws, err := o.target.resolve(o.g, o.args)
	if err != nil {
		return err
	}
	// Check everything before changing anything.
	type plan struct {
		w       *workload.Workload
		changes []workload.Change
	}
	var plans []plan
	for _, w := range ws {
		cs, err := w.Containers(o.target.containers)
		if err != nil {
			return err
		}
		if w.Kind == workload.KindPod {
			return fmt.Errorf("%s: a Pod's imagePullPolicy cannot be changed while it exists: change the workload that owns it (e.g. its Deployment)", w.Ref())
		}
		if err := w.CanRollOut(); err != nil {
			return err
		}
		// A record livesync cannot read is refused here, before any workload changes.
		if _, err := w.Originals(); err != nil {
			return err
		}
		var changes []workload.Change
		for _, c := range cs {
			if c.PullPolicy == o.policy {
				writeln(o.g.Out, "%s: container %q already has imagePullPolicy %s", w.Ref(), c.Name, o.policy)
				continue
			}
			writeln(o.g.Out, "%s: container %q: imagePullPolicy %s -> %s", w.Ref(), c.Name, c.PullPolicy, o.policy)
			changes = append(changes, workload.Change{Container: c, PullPolicy: o.policy})
		}
		plans = append(plans, plan{w, changes})
	}
	for _, p := range plans {
		if len(p.changes) == 0 {
			writeln(o.g.Out, "%s: nothing changed", p.w.Ref())
			continue
		}
		patch, err := workload.BuildPatch(p.w, p.changes, false)
		if err != nil {
			return err
		}
		if err := o.mutate.apply(ctx, o.g, o.g.Out, patch, nil); err != nil {
			return err
		}
	}
	return nil
}
