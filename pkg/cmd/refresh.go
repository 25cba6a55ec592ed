package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	"github.com/livesync-dev/kubectl-livesync/pkg/inspect"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// RefreshOptions holds everything `kubectl livesync refresh` needs.
type RefreshOptions struct {
	g        *globalOptions
	target   targetOptions
	registry registryOptions
	mutate   mutateOptions
	watch    bool
	interval time.Duration
	force    bool
	args     []string
	// clock ticks --watch; nil means the real clock.
	clock clock.WithTicker
}

func newCmdRefresh(g *globalOptions) *cobra.Command {
	o := &RefreshOptions{g: g}
	cmd := &cobra.Command{
		Use:   "refresh (TYPE/NAME | TYPE NAME | POD | TYPE -l SELECTOR) [-c CONTAINER] [--dry-run] [--watch]",
		Short: "Pin a moved tag to its new digest (repo:tag@sha256:...) and wait for the rollout",
		Long: `Resolve each container's and image volume's tag in its registry. When the tag moved (pods run
another digest, or the spec pins an older one), patch only that image to repo:tag@sha256:<new>
(all moved images in one patch, so one rollout), record the original image and pull policy in
the livesync.dev/original annotation, and wait for the rollout like "kubectl rollout status".
Before patching it checks that the registry still serves each new digest (--force skips that). A digest-pinned rollout is deterministic: every
replica runs the same bytes, whatever its node has cached. Undo with "kubectl livesync restore".
When Helm, Argo CD or Flux owns the workload it says first what that tool will do to the pin;
it refuses a workload that Flux or Argo CD re-applies on its own unless --force (hold it first).`,
		Example: `  # Pin deploy/my-app to what :dev points at now, and wait
  kubectl livesync refresh deploy/my-app

  # Show the patch and have the API server validate it, without changing anything
  kubectl livesync refresh deploy/my-app --dry-run

  # Keep following the tag: pin every new push until Ctrl-C
  kubectl livesync refresh deploy/my-app --watch --interval 10s`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.args = args
			return o.g.run(cmd, o)
		},
	}
	o.target.addFlags(cmd.Flags(), "container to refresh (repeatable); default: every container and image volume whose tag moved")
	o.target.addVolumeFlag(cmd.Flags(), "image volume (spec.volumes[].image) to refresh (repeatable); default: every one whose tag moved, unless -c is given")
	cmd.Flags().BoolVar(&o.force, "force", false, "pin even when the registry no longer serves the new digest, or when Flux or Argo CD owns the workload and will revert the pin (by default refresh checks first and changes nothing)")
	o.registry.addFlags(cmd.Flags())
	o.mutate.addFlags(cmd.Flags())
	cmd.Flags().BoolVar(&o.watch, "watch", false, "keep polling the registry (HEAD only) and refresh each time the tag moves, until interrupted")
	cmd.Flags().DurationVar(&o.interval, "interval", 30*time.Second, "registry polling interval with --watch")
	return cmd
}

// Validate checks the flags before anything talks to the cluster.
func (o *RefreshOptions) Validate() error {
	if o.watch {
		if err := workload.CheckFollowInterval(o.interval); err != nil {
			return err
		}
	}
	if o.watch && o.mutate.dryRun {
		return errors.New("--watch and --dry-run cannot be combined: a dry run changes nothing to watch")
	}
	return nil
}

// guard refuses the change in a run no one watches on a cluster that is not local (see
// guardWrites); --dry-run changes nothing.
func (o *RefreshOptions) guard() error {
	if o.mutate.dryRun {
		return nil
	}
	return o.g.guardWrites("kubectl livesync refresh", nil)
}

// Run refreshes every named workload once and, with --watch, again whenever a tag moves.
func (o *RefreshOptions) Run(ctx context.Context) error {
	ws, err := o.target.resolve(o.g, o.args)
	if err != nil {
		return err
	}
	// A record livesync cannot read is refused before any workload changes (see Originals).
	for _, w := range ws {
		if _, err := w.Originals(); err != nil {
			return err
		}
	}
	r := refresher{g: o.g, registry: &o.registry, mutate: &o.mutate, containers: o.target.containers, volumes: o.target.volumes, force: o.force, resolvers: map[string]inspect.Resolver{}}
	for _, w := range ws {
		if err := r.refresh(ctx, w); err != nil {
			return err
		}
	}
	if !o.watch {
		return nil
	}
	writeln(o.g.Out, "watching the registry every %s; Ctrl-C to stop", o.interval)
	r.quiet = true
	warn := func(err error) { writeln(o.g.ErrOut, "warning: %v", err) }
	// Another writer reverting a pin ends the watch: pinning each new push again would be a
	// rollout loop against it.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var reverted error
	workload.Follow(ctx, o.clock, o.interval, func(ctx context.Context) error {
		// Re-read the workloads: the last refresh changed them, and so may anyone else.
		ws, err := o.target.resolve(o.g, o.args)
		if err != nil {
			return err
		}
		for _, w := range ws {
			err := r.refresh(ctx, w)
			switch {
			case errors.Is(err, workload.ErrReverted) || errors.Is(err, workload.ErrReconciled):
				reverted = err
				stop()
				return nil
			case err != nil && ctx.Err() == nil:
				warn(err)
			}
		}
		return nil
	}, warn)
	if reverted != nil {
		return fmt.Errorf("--watch stops: %w", reverted)
	}
	return nil
}

// refresher pins moved tags; it keeps one registry client per workload so --watch reuses
// connections.
type refresher struct {
	g          *globalOptions
	registry   *registryOptions
	mutate     *mutateOptions
	containers []string
	volumes    []string
	// force skips the check that the registry still serves each new pin.
	force     bool
	resolvers map[string]inspect.Resolver
	// quiet suppresses "already current" lines during --watch polling.
	quiet bool
	// log, when set, receives each output line instead of stdout (the sync session's reporter).
	log func(string)
}

func (r *refresher) say(format string, args ...any) {
	if r.log != nil {
		r.log(fmt.Sprintf(format, args...))
		return
	}
	writeln(r.g.Out, format, args...)
}

// out is where rollout progress goes.
func (r *refresher) out() io.Writer {
	if r.log != nil {
		return lineWriter(r.log)
	}
	return r.g.Out
}

// refresh prints and applies the refresh plan of one workload.
func (r *refresher) refresh(ctx context.Context, w *workload.Workload) error {
	key := w.Namespace + "/" + w.Ref()
	res, ok := r.resolvers[key]
	if !ok {
		var err error
		if res, err = r.registry.resolverFor(ctx, r.g, w); err != nil {
			return err
		}
		r.resolvers[key] = res
	}
	p, err := inspect.PlanRefresh(ctx, r.g.client, res, w, r.containers, r.volumes)
	if err != nil {
		return err
	}
	for _, l := range p.Lines(r.quiet) {
		r.say("%s", l)
	}
	switch {
	case !p.Stale():
		return nil
	case p.RolloutBehind() && (r.mutate.dryRun || r.mutate.noWait):
		r.say("%s: the spec already pins the new digest; its rollout is in progress", w.Ref())
		return nil
	case p.RolloutBehind():
		waiter := &workload.Waiter{Client: r.g.client, Out: r.out(), Timeout: r.mutate.timeout}
		return waiter.Wait(ctx, w, nil)
	}
	line, err := w.CheckOwner(p.Changes, r.force)
	if line != "" {
		r.say("%s", line)
	}
	if err != nil {
		return err
	}
	if !r.force {
		if err := inspect.CheckPins(ctx, res, w, p.Changes); err != nil {
			return err
		}
	}
	patch, err := p.Patch()
	if err != nil {
		return err
	}
	targets, err := workload.PodTargets(ctx, r.g.client, w, p.Changes, p.Digests)
	if err != nil {
		return err
	}
	return r.mutate.apply(ctx, r.g, r.out(), patch, targets)
}
