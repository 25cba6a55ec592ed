package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/livesync-dev/kubectl-livesync/pkg/image"
	"github.com/livesync-dev/kubectl-livesync/pkg/inspect"
	"github.com/livesync-dev/kubectl-livesync/pkg/version"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// targetOptions choose workloads and containers: kubectl's TYPE/NAME grammar, -l and -c.
type targetOptions struct {
	selector   string
	containers []string
	volumes    []string
}

// addVolumeFlag adds --volume, which names image volumes (spec.volumes[].image) the way -c
// names containers.
func (t *targetOptions) addVolumeFlag(fs *pflag.FlagSet, help string) {
	fs.StringArrayVar(&t.volumes, "volume", nil, help)
}

func (t *targetOptions) addFlags(fs *pflag.FlagSet, containerHelp string) {
	fs.StringVarP(&t.selector, "selector", "l", "", "label selector (e.g. -l app=web) instead of a name; with no TYPE it selects pods")
	fs.StringArrayVarP(&t.containers, "container", "c", nil, containerHelp)
}

// resolve reads the workloads named by args and -l.
func (t *targetOptions) resolve(g *globalOptions, args []string) ([]*workload.Workload, error) {
	ws, err := workload.Resolve(g.builder(), g.namespace, args, t.selector)
	return ws, g.withNearNames(err)
}

// withNearNames adds the names a workload that is not found may have meant.
func (g *globalOptions) withNearNames(err error) error {
	var nf *workload.NotFoundError
	if errors.As(err, &nf) {
		nf.Near = suggest(nf.Name, nf.Names(g.builder()))
	}
	return err
}

// registryOptions configure registry access for the image commands.
type registryOptions struct {
	insecure []string
	timeout  time.Duration
	// newResolver is a seam for tests; nil means the real registry client.
	newResolver func(ctx context.Context, g *globalOptions, w *workload.Workload) (inspect.Resolver, error)
}

func (r *registryOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&r.insecure, "insecure-registry", nil, "registry HOST[:PORT] that may be reached over plain HTTP (loopback registries always may); repeatable")
	fs.DurationVar(&r.timeout, "registry-timeout", 10*time.Second, "timeout of each registry request")
}

// resolverFor builds a registry client authenticated like the workload's pods: the local docker
// config and credential helpers, then the pod template's imagePullSecrets and its service
// account's pull secrets. Reading secrets may be forbidden; that falls back quietly (said at -v 1).
func (r *registryOptions) resolverFor(ctx context.Context, g *globalOptions, w *workload.Workload) (inspect.Resolver, error) {
	if r.newResolver != nil {
		return r.newResolver(ctx, g, w)
	}
	res, err := image.NewResolver(
		image.WithInsecureRegistries(r.insecure),
		image.WithTimeout(r.timeout),
		image.WithUserAgent("kubectl-livesync/"+version.Version),
	)
	if err != nil {
		return nil, err
	}
	if warn := res.UseKubernetesAuth(ctx, g.client, w.Namespace, w.ServiceAccount(), w.PullSecrets()); warn != nil {
		g.logf(1, "registry auth: %v", warn)
	}
	return res, nil
}

// serverVersion reads the API server's version once (discovery), for notes that depend on it;
// "" when it cannot be read, said at -v 1.
func (g *globalOptions) serverVersion() string {
	v, err := g.client.Discovery().ServerVersion()
	if err != nil {
		g.logf(1, "reading the server version: %v", err)
		return ""
	}
	return v.GitVersion
}

// mutateOptions are shared by the commands that change workloads.
type mutateOptions struct {
	dryRun  bool
	timeout time.Duration
	noWait  bool
}

func (m *mutateOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&m.dryRun, "dry-run", false, "print what would change and have the API server validate it (dryRun=All) without persisting anything")
	fs.DurationVar(&m.timeout, "timeout", 5*time.Minute, "how long to wait for the rollout")
	fs.BoolVar(&m.noWait, "no-wait", false, "return after patching, without waiting for the rollout")
}

// apply patches the workload (or validates the patch under --dry-run) and waits for the rollout.
func (m *mutateOptions) apply(ctx context.Context, g *globalOptions, out io.Writer, p *workload.Patch, podTargets []workload.PodTarget) error {
	w := p.Workload
	if err := workload.Apply(p, m.dryRun); err != nil {
		return err
	}
	for _, g := range p.HandedBack {
		writeln(out, "%s: ownership handed back: %s", w.Ref(), g)
	}
	if m.dryRun {
		writeln(out, "%s: dry run, nothing changed; the API server accepted the patch: %s", w.Ref(), p.Data)
		return nil
	}
	if m.noWait {
		writeln(out, "%s patched; not waiting for the rollout (--no-wait)", w.Ref())
		return nil
	}
	start := time.Now()
	waiter := &workload.Waiter{Client: g.client, Out: out, Timeout: m.timeout}
	if !p.Pins() {
		if err := waiter.Wait(ctx, w, podTargets); err != nil {
			return err
		}
		writeln(out, "%s rolled out in %s", w.Ref(), time.Since(start).Round(100*time.Millisecond))
		return nil
	}
	// A writer that reverts the pin (a reconciler's self-heal) does it within seconds: watch
	// for it during the rollout and for the rest of the grace, and stop waiting for a rollout
	// it has undone.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type watched struct {
		reverts []workload.Revert
		err     error
	}
	done := make(chan watched, 1)
	go func() {
		r, err := p.WatchReverts(wctx, workload.RevertGrace, nil)
		if len(r) > 0 {
			cancel()
		}
		done <- watched{r, err}
	}()
	werr := waiter.Wait(wctx, w, podTargets)
	if werr == nil {
		writeln(out, "%s rolled out in %s", w.Ref(), time.Since(start).Round(100*time.Millisecond))
	}
	res := <-done
	switch {
	case len(res.reverts) > 0:
		return workload.RevertedError(w, res.reverts)
	case werr != nil:
		return werr
	case res.err != nil:
		writeln(g.ErrOut, "warning: %v", res.err)
	}
	return nil
}

func noArgsError(use string) error {
	return fmt.Errorf("name a workload: kubectl livesync %s", use)
}

// lineWriter turns writes into calls of f, one per line.
type lineWriter func(string)

func (f lineWriter) Write(b []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if l != "" {
			f(l)
		}
	}
	return len(b), nil
}
