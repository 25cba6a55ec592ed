package cmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/livesync-dev/kubectl-livesync/pkg/image"
	"github.com/livesync-dev/kubectl-livesync/pkg/inspect"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// RestoreOptions holds everything `kubectl livesync restore` needs.
type RestoreOptions struct {
	g      *globalOptions
	target targetOptions
	mutate mutateOptions
	args   []string
}

func newCmdRestore(g *globalOptions) *cobra.Command {
	o := &RestoreOptions{g: g}
	cmd := &cobra.Command{
		Use:   "restore (TYPE/NAME | TYPE NAME | POD | TYPE -l SELECTOR) [--dry-run]",
		Short: "Put back the images and pull policies that refresh and pull-policy changed",
		Long: `Read the livesync.dev/original annotation, put every recorded image and pull policy back,
remove the annotation and wait for the rollout. Nothing recorded: says so and changes nothing.`,
		Example: `  # Undo every livesync change on deploy/my-app
  kubectl livesync restore deploy/my-app

  # Show what would be restored
  kubectl livesync restore deploy/my-app --dry-run`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.args = args
			return o.g.run(cmd, o)
		},
	}
	cmd.Flags().StringVarP(&o.target.selector, "selector", "l", "", "label selector (e.g. -l app=web) instead of a name")
	o.mutate.addFlags(cmd.Flags())
	return cmd
}

// Validate checks the arguments before anything talks to the cluster.
func (o *RestoreOptions) Validate() error {
	if len(o.args) == 0 && o.target.selector == "" {
		return noArgsError("restore deploy/my-app")
	}
	return nil
}

// Run restores every named workload.
func (o *RestoreOptions) Run(ctx context.Context) error {
	ws, err := o.target.resolve(o.g, o.args)
	if err != nil {
		return err
	}
	for _, w := range ws {
		orig, err := workload.ParseOriginals(w.Annotations)
		if err != nil {
			return err
		}
		if len(orig) == 0 {
			writeln(o.g.Out, "%s: nothing recorded to restore", w.Ref())
			continue
		}
		changes := workload.RestoreChanges(w, orig)
		var diff []workload.Change
		for _, ch := range changes {
			c := ch.Container
			d := workload.Change{Container: c}
			if ch.Image != c.Image {
				d.Image = ch.Image
				writeln(o.g.Out, "%s: container %q: image %s -> %s", w.Ref(), c.Name, c.Image, ch.Image)
			}
			if ch.PullPolicy != "" && ch.PullPolicy != c.PullPolicy {
				d.PullPolicy = ch.PullPolicy
				writeln(o.g.Out, "%s: container %q: imagePullPolicy %s -> %s", w.Ref(), c.Name, c.PullPolicy, ch.PullPolicy)
			}
			if d.Image != "" || d.PullPolicy != "" {
				diff = append(diff, d)
			}
		}
		p, err := workload.BuildPatch(w, diff, true)
		if err != nil {
			return err
		}
		var targets []workload.PodTarget
		if w.Kind == workload.KindPod {
			cs, _ := w.Containers(nil)
			rep, err := inspect.Build(ctx, o.g.client, noResolver{}, w, cs)
			if err != nil {
				return err
			}
			targets = podTargetsFor(rep, w, diff, nil)
		}
		if len(diff) == 0 {
			writeln(o.g.Out, "%s: images and pull policies are already the originals; removing the record", w.Ref())
		}
		if err := o.mutate.apply(ctx, o.g, o.g.Out, p, targets); err != nil {
			return err
		}
	}
	return nil
}

// noResolver answers without a registry: restore only needs the pods' container IDs.
type noResolver struct{}

func (noResolver) Resolve(context.Context, image.Reference) (string, error) { return "", nil }
