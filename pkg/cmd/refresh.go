package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
	args     []string
}

func newCmdRefresh(g *globalOptions) *cobra.Command {
	o := &RefreshOptions{g: g}
	cmd := &cobra.Command{
		Use:   "refresh (TYPE/NAME | TYPE NAME | POD | TYPE -l SELECTOR) [-c CONTAINER] [--dry-run] [--watch]",
		Short: "Pin a moved tag to its new digest (repo:tag@sha256:...) and wait for the rollout",
		Long: `Resolve each container's tag in its registry. When the tag moved (pods run another digest, or
the spec pins an older one), patch only that container's image to repo:tag@sha256:<new>,
record the original image and pull policy in the livesync.dev/original annotation, and wait
for the rollout like "kubectl rollout status". A digest-pinned rollout is deterministic: every
replica runs the same bytes, whatever its node has cached. Undo with "kubectl livesync restore".`,
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
	o.target.addFlags(cmd.Flags(), "container to refresh (repeatable); default: every container whose tag moved")
	o.registry.addFlags(cmd.Flags())
	o.mutate.addFlags(cmd.Flags())
	cmd.Flags().BoolVar(&o.watch, "watch", false, "keep polling the registry (HEAD only) and refresh each time the tag moves, until interrupted")
	cmd.Flags().DurationVar(&o.interval, "interval", 30*time.Second, "registry polling interval with --watch")
	return cmd
}

// Validate checks the flags before anything talks to the cluster.
func (o *RefreshOptions) Validate() error {
	if o.watch && o.interval < time.Second {
		return fmt.Errorf("--interval %s is too short: use 1s or more", o.interval)
	}
	if o.watch && o.mutate.dryRun {
		return errors.New("--watch and --dry-run cannot be combined: a dry run changes nothing to watch")
	}
	return nil
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
	r := refresher{g: o.g, registry: &o.registry, mutate: &o.mutate, containers: o.target.containers, resolvers: map[string]inspect.Resolver{}}
	for _, w := range ws {
		if err := r.refresh(ctx, w); err != nil {
			return err
		}
	}
	if !o.watch {
		return nil
	}
	writeln(o.g.Out, "watching the registry every %s; Ctrl-C to stop", o.interval)
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		// Re-read the workloads: the last refresh changed them, and so may anyone else.
		if ws, err = o.target.resolve(o.g, o.args); err != nil {
			writeln(o.g.ErrOut, "warning: %v", err)
			continue
		}
		r.quiet = true
		for _, w := range ws {
			if err := r.refresh(ctx, w); err != nil && ctx.Err() == nil {
				writeln(o.g.ErrOut, "warning: %v", err)
			}
		}
	}
}

// refresher pins moved tags; it keeps one registry client per workload so --watch reuses
// connections.
type refresher struct {
	g          *globalOptions
	registry   *registryOptions
	mutate     *mutateOptions
	containers []string
	resolvers  map[string]inspect.Resolver
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

func (r *refresher) refresh(ctx context.Context, w *workload.Workload) error {
	cs, err := w.Containers(r.containers)
	if err != nil {
		return err
	}
	if err := w.CanRollOut(); err != nil {
		return err
	}
	key := w.Namespace + "/" + w.Ref()
	res, ok := r.resolvers[key]
	if !ok {
		if res, err = r.registry.resolverFor(ctx, r.g, w); err != nil {
			return err
		}
		r.resolvers[key] = res
	}
	rep, err := inspect.Build(ctx, r.g.client, res, w, cs)
	if err != nil {
		return err
	}
	var (
		changes  []workload.Change
		digests  = map[string]string{}
		stale    bool
		untagged []string
	)
	for _, c := range rep.Containers {
		if c.RegistryErr != nil {
			return fmt.Errorf("%s: container %q: %w", w.Ref(), c.Name, c.RegistryErr)
		}
		if c.Ref.Tag == "" {
			untagged = append(untagged, c.Name)
			r.say("%s: container %q: image %q is pinned to a digest with no tag to follow; nothing to refresh", w.Ref(), c.Name, c.Image)
			continue
		}
		if !c.Stale() {
			if !r.quiet {
				r.say("%s: container %q: current, %s serves %s", w.Ref(), c.Name, c.Ref.WithoutDigest(), inspect.Short(c.RegistryDigest))
			}
			continue
		}
		stale = true
		old := c.RunningDigests()
		if len(old) == 0 && c.PinnedDigest != "" {
			old = []string{c.PinnedDigest}
		}
		var olds []string
		for _, d := range old {
			if d != c.RegistryDigest {
				olds = append(olds, inspect.Short(d))
			}
		}
		r.say("%s: container %q: %s -> %s", w.Ref(), c.Name, strings.Join(olds, ", "), inspect.Short(c.RegistryDigest))
		want := c.Ref.WithDigest(c.RegistryDigest)
		digests[c.Name] = c.RegistryDigest
		if want != c.Image {
			ctr := workload.Container{Name: c.Name, Init: c.Init, Image: c.Image, PullPolicy: c.PullPolicy}
			changes = append(changes, workload.Change{Container: ctr, Image: want})
		}
	}
	if len(untagged) == len(rep.Containers) && len(untagged) > 0 && len(r.containers) > 0 {
		return fmt.Errorf("%s: nothing to refresh: every chosen container is pinned to a digest without a tag", w.Ref())
	}
	if !stale {
		if !r.quiet {
			r.say("%s: already current, nothing changed", w.Ref())
		}
		return nil
	}
	if len(changes) == 0 {
		// The spec already pins the new digest; only the rollout is behind.
		if r.mutate.dryRun || r.mutate.noWait {
			r.say("%s: the spec already pins the new digest; its rollout is in progress", w.Ref())
			return nil
		}
		waiter := &workload.Waiter{Client: r.g.client, Out: r.out(), Timeout: r.mutate.timeout}
		return waiter.Wait(ctx, w, nil)
	}
	for _, ch := range changes {
		r.say("%s: pinning container %q to %s", w.Ref(), ch.Container.Name, ch.Image)
	}
	p, err := workload.BuildPatch(w, changes, false)
	if err != nil {
		return err
	}
	return r.mutate.apply(ctx, r.g, r.out(), p, podTargetsFor(rep, w, changes, digests))
}
