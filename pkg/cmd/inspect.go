package cmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/livesync-dev/kubectl-livesync/pkg/inspect"
)

// InspectOptions holds everything `kubectl livesync inspect` needs.
type InspectOptions struct {
	g        *globalOptions
	target   targetOptions
	registry registryOptions
	output   string
	args     []string
}

func newCmdInspect(g *globalOptions) *cobra.Command {
	o := &InspectOptions{g: g}
	cmd := &cobra.Command{
		Use:   "inspect (TYPE/NAME | TYPE NAME | POD | [TYPE] -l SELECTOR) [-c CONTAINER] [-o table|json|yaml]",
		Short: "Show each container's and image volume's image, pinned, running and registry digests, pull policy and a verdict",
		Long: `Show, per container and image volume of the workload's pod template, the image as written, its
tag and pinned digest, the pull policy as written and as Kubernetes defaults it, the digest each
running pod actually runs (and whether the registry knows it as the tag's index, platform
manifest or config digest), how the image got onto the pod's node (from the kubelet's events),
the digest the registry serves for the tag now, and a verdict: current, stale, mixed, pinned or
unknown. The notes take the cluster's Kubernetes version and the workload's pull secrets into
account.`,
		Example: `  # Is deployment my-app running what :dev points at?
  kubectl livesync inspect deploy/my-app

  # Machine-readable, for scripts
  kubectl livesync inspect deploy/my-app -o json

  # Every pod labelled app=web, one container
  kubectl livesync inspect -l app=web -c app`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.args = args
			return o.g.run(cmd, o)
		},
	}
	o.target.addFlags(cmd.Flags(), "container to inspect (repeatable); default: every container, init containers included, and every image volume")
	o.target.addVolumeFlag(cmd.Flags(), "image volume (spec.volumes[].image) to inspect (repeatable); default: every one, unless -c is given")
	o.registry.addFlags(cmd.Flags())
	cmd.Flags().StringVarP(&o.output, "output", "o", inspect.FormatTable, "output format: table, json or yaml")
	return cmd
}

// Validate checks the flags before anything talks to the cluster.
func (o *InspectOptions) Validate() error {
	return inspect.ValidFormat(o.output)
}

// Run prints the report of every workload the arguments name.
func (o *InspectOptions) Run(ctx context.Context) error {
	reports, err := o.reports(ctx)
	if err != nil {
		return err
	}
	return inspect.Print(o.g.Out, o.output, reports)
}

// reports builds the report of every workload the arguments name; `mcp` returns them.
func (o *InspectOptions) reports(ctx context.Context) ([]*inspect.Report, error) {
	ws, err := o.target.resolve(o.g, o.args)
	if err != nil {
		return nil, err
	}
	var reports []*inspect.Report
	opts := inspect.Options{ServerVersion: o.g.serverVersion()}
	for _, w := range ws {
		cs, err := w.Images(o.target.containers, o.target.volumes)
		if err != nil {
			return nil, err
		}
		res, err := o.registry.resolverFor(ctx, o.g, w)
		if err != nil {
			return nil, err
		}
		rep, err := inspect.Build(ctx, o.g.client, res, w, cs, opts)
		if err != nil {
			return nil, err
		}
		reports = append(reports, rep)
	}
	return reports, nil
}
