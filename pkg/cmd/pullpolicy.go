package cmd

import (
	"context"
	"fmt"
	"strings"

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
	force  bool
	args   []string
}

func newCmdPullPolicy(g *globalOptions) *cobra.Command {
	o := &PullPolicyOptions{g: g}
	cmd := &cobra.Command{
		Use:   "pull-policy (TYPE/NAME | TYPE NAME | TYPE -l SELECTOR) Always|IfNotPresent|Never [-c CONTAINER] [--volume VOLUME] [--dry-run]",
		Short: "Set the imagePullPolicy of a workload's containers and image volumes, recording the original for restore",
		Long: `Patch the imagePullPolicy of the chosen containers and image volumes (default: all) and wait
for the rollout.
The original policy and image are recorded in the livesync.dev/original annotation, so
"kubectl livesync restore" puts them back. A running Pod's pull policy is immutable: change
the workload that owns it instead. When Helm, Argo CD or Flux owns the workload it says first
what that tool will do to the change; it refuses a workload that Flux or Argo CD re-applies on
its own unless --force (hold it first).`,
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
	o.target.addFlags(cmd.Flags(), "container to change (repeatable); default: every container and image volume")
	o.target.addVolumeFlag(cmd.Flags(), "image volume (spec.volumes[].image) to change (repeatable); default: every one, unless -c is given")
	o.mutate.addFlags(cmd.Flags())
	cmd.Flags().BoolVar(&o.force, "force", false, "change the policy even when Flux or Argo CD owns the workload and will revert it")
	return cmd
}

// Validate checks the policy before anything talks to the cluster.
func (o *PullPolicyOptions) Validate() error {
	if len(o.args) == 0 && o.target.selector == "" && strings.ContainsAny(o.policy, "/.") {
		return fmt.Errorf("no pull policy after %s: kubectl livesync pull-policy %s Always|IfNotPresent|Never", o.policy, o.policy)
	}
	if err := image.ValidPullPolicy(o.policy); err != nil {
		return err
	}
	if len(o.args) == 0 && o.target.selector == "" {
		return noArgsError("pull-policy deploy/my-app Always")
	}
	return nil
}

// guard refuses the change in a run no one watches on a cluster that is not local (see
// guardWrites); --dry-run changes nothing.
func (o *PullPolicyOptions) guard() error {
	if o.mutate.dryRun {
		return nil
	}
	return o.g.guardWrites("kubectl livesync pull-policy", nil)
}

// Run plans every named workload before it patches any, so a refusal changes nothing.
func (o *PullPolicyOptions) Run(ctx context.Context) error {
	ws, err := o.target.resolve(o.g, o.args)
	if err != nil {
		return err
	}
	plans := make([]*workload.PullPolicyPlan, 0, len(ws))
	for _, w := range ws {
		p, err := workload.PlanPullPolicy(w, o.target.containers, o.target.volumes, o.policy)
		if err != nil {
			return err
		}
		plans = append(plans, p)
	}
	for _, p := range plans {
		for _, c := range p.Containers {
			if c.PullPolicy == p.Policy {
				writeln(o.g.Out, "%s: %s already has imagePullPolicy %s", p.Workload.Ref(), c.Label(), p.Policy)
			} else {
				writeln(o.g.Out, "%s: %s: imagePullPolicy %s -> %s", p.Workload.Ref(), c.Label(), c.PullPolicy, p.Policy)
			}
		}
	}
	// Every owner is asked before any workload changes, so a refusal changes nothing.
	for _, p := range plans {
		line, err := p.Workload.CheckOwner(p.Changes, o.force)
		if line != "" {
			writeln(o.g.Out, "%s", line)
		}
		if err != nil {
			return err
		}
	}
	for _, p := range plans {
		patch, err := p.Patch()
		if err != nil {
			return err
		}
		if patch == nil {
			writeln(o.g.Out, "%s: nothing changed", p.Workload.Ref())
			continue
		}
		if err := o.mutate.apply(ctx, o.g, o.g.Out, patch, nil); err != nil {
			return err
		}
	}
	return nil
}
