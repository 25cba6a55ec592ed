package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/ignore"
	"github.com/livesync-dev/kubectl-livesync/pkg/image"
	"github.com/livesync-dev/kubectl-livesync/pkg/inspect"
	"github.com/livesync-dev/kubectl-livesync/pkg/watch"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// SyncOptions holds everything the root command, `kubectl livesync WORKLOAD LOCAL:REMOTE...`, needs.
type SyncOptions struct {
	g        *globalOptions
	target   targetOptions
	registry registryOptions
	mutate   mutateOptions

	initial    string
	excludes   []string
	gitignore  bool
	onSync     string
	onSyncWait time.Duration
	execWait   time.Duration
	pullPolicy string
	refresh    bool
	followTag  bool
	interval   time.Duration
	quiet      time.Duration
	batchCap   time.Duration
	parallel   int
	output     string
	once       bool
	massDelete bool

	args     []string
	mappings []filesync.Mapping
	mode     filesync.InitialMode
}

func newCmdSync(g *globalOptions) *cobra.Command {
	o := &SyncOptions{g: g}
	cmd := &cobra.Command{
		Use:   "livesync (TYPE/NAME | TYPE NAME | POD | [TYPE] -l SELECTOR) LOCAL:REMOTE [LOCAL:REMOTE ...]",
		Short: "Live-sync local files into the running containers of a workload; pin and follow mutable image tags",
		Long: `Copy LOCAL into REMOTE in the chosen container of every running pod of the workload, then watch
LOCAL and copy every change, deletes included, into every replica. Pods that appear later and
containers that restart are synced as soon as they run. Stop with Ctrl-C.

LOCAL is a directory or a file; REMOTE is an absolute path in the container. .git/, editor temp
files, .livesyncignore patterns (gitignore syntax) and --exclude patterns are never synced.

The subcommands inspect a workload's images and pin moved tags to digests.`,
		Example: `  # Sync ./src into /app of every replica of deploy/my-app, then keep syncing
  kubectl livesync deploy/my-app ./src:/app

  # Two mappings, a chosen container, and a command after every sync
  kubectl livesync deploy/my-app ./src:/app/src ./static:/app/static -c web --on-sync 'kill -HUP 1'

  # Pin the moved :dev tag first, and keep following it while syncing
  kubectl livesync deploy/my-app ./src:/app --refresh --follow-tag

  # Sync once (e.g. in CI) and exit non-zero unless every replica converged
  kubectl livesync deploy/my-app ./src:/app --once

  # Machine-readable events (NDJSON) for editors and scripts
  kubectl livesync deploy/my-app ./src:/app -o json`,
		// Arbitrary args: the first one is a workload, not a subcommand.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && o.target.selector == "" {
				return cmd.Help()
			}
			o.args = args
			return o.g.run(cmd, o)
		},
	}
	f := cmd.Flags()
	o.target.addFlags(f, "container to sync into, repeatable: every named container of each pod is synced; default: the kubectl.kubernetes.io/default-container annotation, else the first")
	o.registry.addFlags(f)
	o.mutate.addFlags(f)
	f.StringVar(&o.initial, "initial", string(filesync.InitialUpload), "initial sync of each new container: upload (send what differs), mirror (also delete remote files that are not local), none")
	f.StringArrayVar(&o.excludes, "exclude", nil, "do not sync paths matching this gitignore-style pattern; repeatable")
	f.BoolVar(&o.gitignore, "gitignore", false, "also honour .gitignore files (off by default: locally built, git-ignored outputs are often what you want to sync)")
	f.StringVar(&o.onSync, "on-sync", "", "run `sh -c CMD` in each container after each applied batch and the initial sync, without holding up the next batch; $LIVESYNC_CHANGED lists the changed remote paths")
	f.DurationVar(&o.onSyncWait, "on-sync-timeout", filesync.DefaultOnSyncTimeout, "close an --on-sync command's exec after this long and report it (what it started keeps running in the container)")
	f.DurationVar(&o.execWait, "exec-timeout", filesync.DefaultExecTimeout, "cancel and retry a file transfer or listing after this long without progress (a frozen or overloaded container)")
	f.StringVar(&o.pullPolicy, "pull-policy", "", "set this imagePullPolicy on the workload first (Always|IfNotPresent|Never), like the pull-policy command")
	f.BoolVar(&o.refresh, "refresh", false, "pin a moved tag to its new digest first, like the refresh command")
	f.BoolVar(&o.followTag, "follow-tag", false, "while syncing, poll the registry and pin each new push of the tag; new pods get their initial sync")
	f.DurationVar(&o.interval, "interval", 30*time.Second, "registry polling interval with --follow-tag")
	f.DurationVar(&o.quiet, "batch-quiet", filesync.DefaultQuiet, "a batch is sent after this long without a new change")
	f.DurationVar(&o.batchCap, "batch-max", filesync.DefaultCap, "a batch is sent at most this long after its first change, even while changes keep coming")
	f.IntVar(&o.parallel, "parallel", 8, "at most this many containers are written to at once")
	f.StringVarP(&o.output, "output", "o", "text", "output: text, or json for NDJSON events (initial-sync, batch, on-sync, target-added, target-removed, waiting, restarting, error, held, refresh, dry-run)")
	f.BoolVar(&o.once, "once", false, "initial sync and exit once the --on-sync runs finished or timed out; the exit code says whether every container converged (not how --on-sync went)")
	f.BoolVar(&o.massDelete, "allow-mass-delete", false, "let a batch or initial sync delete more than 50 remote entries and more than half of a mapping's, or mirror an emptied local root; without it such deletes are held and reported")
	return cmd
}

// Validate checks arguments and flags before anything talks to the cluster.
func (o *SyncOptions) Validate() error {
	var wargs []string
	for _, a := range o.args {
		if strings.Contains(a, ":") {
			m, err := filesync.ParseMapping(a)
			if err != nil {
				return err
			}
			abs, err := filepath.Abs(string(m.Local))
			if err != nil {
				return fmt.Errorf("mapping %q: %w", a, err)
			}
			m.Local = filesync.LocalPath(abs)
			o.mappings = append(o.mappings, m)
		} else {
			wargs = append(wargs, a)
		}
	}
	o.args = wargs
	if len(o.mappings) == 0 {
		return fmt.Errorf("%q is not a command, and no LOCAL:REMOTE mapping was given: e.g. kubectl livesync deploy/my-app ./src:/app, or see kubectl livesync --help", strings.Join(wargs, " "))
	}
	if err := filesync.ValidateMappings(o.mappings); err != nil {
		return err
	}
	// A symlinked LOCAL (./current -> releases/v2) is resolved once, here, so the watcher and
	// the engine agree on one real root; a link re-pointed later is not followed.
	for i, m := range o.mappings {
		real, err := filepath.EvalSymlinks(string(m.Local))
		if err != nil {
			return fmt.Errorf("mapping %q: resolving local path: %w", m, err)
		}
		o.mappings[i].Local = filesync.LocalPath(real)
	}
	if slices.Contains(o.target.containers, "") {
		return errors.New(`-c "": name a container, or leave -c out to sync into the default one`)
	}
	mode, err := filesync.ParseInitialMode(o.initial)
	if err != nil {
		return err
	}
	o.mode = mode
	if o.pullPolicy != "" {
		if err := image.ValidPullPolicy(o.pullPolicy); err != nil {
			return err
		}
	}
	switch {
	case o.output != "text" && o.output != "json":
		return fmt.Errorf("invalid output %q: use text or json", o.output)
	case o.quiet <= 0 || o.batchCap < o.quiet:
		return fmt.Errorf("--batch-quiet %s must be positive and at most --batch-max %s", o.quiet, o.batchCap)
	case o.parallel < 1:
		return fmt.Errorf("--parallel %d: use 1 or more", o.parallel)
	case o.execWait < time.Second:
		return fmt.Errorf("--exec-timeout %s is too short: use 1s or more", o.execWait)
	case o.onSyncWait <= 0:
		return fmt.Errorf("--on-sync-timeout %s: use a positive duration", o.onSyncWait)
	case o.followTag && o.interval < time.Second:
		return fmt.Errorf("--interval %s is too short: use 1s or more", o.interval)
	case o.once && o.followTag:
		return errors.New("--once and --follow-tag cannot be combined: --once exits after the initial sync")
	case o.mutate.dryRun && (o.followTag || o.refresh || o.pullPolicy != ""):
		return errors.New("--dry-run syncs nothing and changes no workload: drop --refresh, --follow-tag and --pull-policy, or use the refresh and pull-policy commands with --dry-run")
	}
	return nil
}

// Run changes the image side if asked, then syncs until interrupted (or once).
func (o *SyncOptions) Run(ctx context.Context) error {
	w, err := o.resolveOne()
	if err != nil {
		return err
	}
	containers, err := syncContainers(w, o.target.containers, o.g.ErrOut)
	if w.Kind == selectedPods && (len(o.target.containers) > 0 || len(w.Spec.Containers) == 0) {
		// Pods picked by -l may differ, or not exist yet: the tracker says which lack the
		// container, and picks each pod's default container when none was named.
		containers, err = slices.Compact(slices.Clone(o.target.containers)), nil
	}
	if err != nil {
		return err
	}
	rep := newSyncReporter(o.g.Out, o.g.ErrOut, o.output == "json")
	ref := refresher{g: o.g, registry: &o.registry, mutate: &o.mutate, containers: containers, resolvers: map[string]inspect.Resolver{}, log: rep.refreshed}
	if o.pullPolicy != "" {
		if err := o.setPullPolicy(ctx, &ref, w, containers); err != nil {
			return err
		}
	}
	if o.refresh {
		if err := ref.refresh(ctx, w); err != nil {
			return err
		}
	}

	matchers := make([]filesync.Matcher, len(o.mappings))
	var roots []string
	for i, m := range o.mappings {
		roots = append(roots, string(m.Local))
		if isDir(string(m.Local)) {
			mt, err := ignore.New(string(m.Local), ignore.Options{Excludes: o.excludes, GitIgnore: o.gitignore})
			if err != nil {
				return err
			}
			matchers[i] = mt
		}
	}
	cfg := filesync.Config{
		Mappings: o.mappings, Matchers: matchers, Initial: o.mode,
		Quiet: o.quiet, Cap: o.batchCap, Parallelism: o.parallel,
		OnSync: o.onSync, OnSyncTimeout: o.onSyncWait, ExecTimeout: o.execWait, DryRun: o.mutate.dryRun, AllowMassDelete: o.massDelete,
	}
	restCfg, err := o.g.configFlags.ToRESTConfig()
	if err != nil {
		return err
	}
	engine := filesync.New(&workload.PodExecutor{Config: restCfg, Client: o.g.client}, cfg, filesync.WithReporter(rep))
	tracker := &workload.Tracker{Client: o.g.client, Workload: w, Containers: containers, Sink: engine, Reporter: rep}
	tctx, stopTracking := context.WithCancel(ctx)
	defer stopTracking()
	synced := make(chan struct{})
	go tracker.Run(tctx, synced)
	select {
	case <-synced:
	case <-ctx.Done():
		return nil
	}

	if o.once || o.mutate.dryRun {
		ok, err := engine.Once(ctx)
		rep.summary()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("not every container of %s converged; see the errors above", w.Ref())
		}
		if rep.targetCount() == 0 {
			if len(containers) == 0 {
				return fmt.Errorf("%s has no running pod to sync into", w.Ref())
			}
			return fmt.Errorf("%s has no running pod with container %q to sync into", w.Ref(), strings.Join(containers, ", "))
		}
		return nil
	}

	watcher, err := watch.New(roots, watch.Options{Skip: skipper(roots, matchers)})
	if err != nil {
		return err
	}
	defer func() { _ = watcher.Close() }()
	changes := make(chan filesync.Change, 1024)
	go pump(ctx, watcher, roots, matchers, changes, rep)
	if o.followTag {
		go o.followTags(ctx, w, &ref)
	}
	rep.watching(roots)
	err = engine.Run(ctx, changes)
	rep.summary()
	if ctx.Err() != nil {
		return nil // Ctrl-C is how a session ends
	}
	return err
}

// selectedPods is the Kind of the workload -l without a TYPE makes: the pods it selects.
const selectedPods = "Pods"

// resolveOne reads the workload. -l without a TYPE selects pods, tracked by that selector.
func (o *SyncOptions) resolveOne() (*workload.Workload, error) {
	ws, err := o.target.resolve(o.g, o.args)
	noMatch := errors.Is(err, workload.ErrNoMatch) && len(o.args) == 0
	if noMatch {
		// No pod matches -l yet: wait for one (the tracker says so) rather than fail.
		ws, err = []*workload.Workload{{Namespace: o.g.namespace, Spec: &corev1.PodSpec{}}}, nil
	}
	if err != nil {
		return nil, err
	}
	if len(ws) == 1 && !noMatch {
		return ws[0], nil
	}
	if len(o.args) == 0 && o.target.selector != "" {
		sel, err := labels.Parse(o.target.selector)
		if err != nil {
			return nil, fmt.Errorf("parsing -l %q: %w", o.target.selector, err)
		}
		w := *ws[0]
		w.Kind, w.Name, w.Selector = selectedPods, o.target.selector, sel
		return &w, nil
	}
	var names []string
	for _, w := range ws {
		names = append(names, w.Ref())
	}
	return nil, fmt.Errorf("-l %q matches %d workloads (%s): sync one at a time", o.target.selector, len(ws), strings.Join(names, ", "))
}

func (o *SyncOptions) setPullPolicy(ctx context.Context, ref *refresher, w *workload.Workload, containers []string) error {
	cs, err := w.Containers(containers)
	if err != nil {
		return err
	}
	var changes []workload.Change
	for _, c := range cs {
		if c.PullPolicy != o.pullPolicy {
			changes = append(changes, workload.Change{Container: c, PullPolicy: o.pullPolicy})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	if w.Kind == workload.KindPod {
		return fmt.Errorf("%s: a Pod's imagePullPolicy cannot be changed while it exists: use --pull-policy on the workload that owns it", w.Ref())
	}
	p, err := workload.BuildPatch(w, changes, false)
	if err != nil {
		return err
	}
	if err := o.mutate.apply(ctx, o.g, ref.out(), p, nil); err != nil {
		return err
	}
	// The next patch (refresh) needs the new resourceVersion.
	fresh, err := o.resolveOne()
	if err != nil {
		return err
	}
	*w = *fresh
	return nil
}

// followTags pins each new push of the tag; the tracker then sees the new pods and the engine
// gives them their initial sync.
func (o *SyncOptions) followTags(ctx context.Context, w *workload.Workload, ref *refresher) {
	ref.quiet = true
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		fresh, err := o.resolveOne()
		if err == nil {
			err = ref.refresh(ctx, fresh)
		}
		if err != nil && ctx.Err() == nil {
			ref.log(fmt.Sprintf("warning: following the tag: %v", err))
		}
	}
}

// skipper adapts the per-root matchers to the watcher's Skip hook.
func skipper(roots []string, matchers []filesync.Matcher) func(root, rel string, isDir bool) bool {
	byRoot := map[string]filesync.Matcher{}
	for i, r := range roots {
		if matchers[i] != nil {
			byRoot[r] = matchers[i]
		}
	}
	return func(root, rel string, isDir bool) bool {
		m := byRoot[root]
		return m != nil && rel != "" && m.Match(filepath.ToSlash(rel), isDir)
	}
}

// pump turns watcher events into engine changes. An edit of a .livesyncignore (or .gitignore
// with --gitignore) reloads the root's matcher and refreshes the root's watches, which ends in
// a Rescan of the root.
func pump(ctx context.Context, w watch.Watcher, roots []string, matchers []filesync.Matcher, out chan<- filesync.Change, rep *syncReporter) {
	defer close(out)
	reload := map[string]*ignore.Matcher{}
	for i, r := range roots {
		if m, ok := matchers[i].(*ignore.Matcher); ok {
			reload[r] = m
		}
	}
	events, errs := w.Events(), w.Errors()
	for events != nil || errs != nil {
		select {
		case <-ctx.Done():
			return
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			rep.warn(err)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			c := filesync.Change{Root: ev.Root, Path: ev.Path, Rescan: ev.Rescan}
			if m := reload[ev.Root]; m != nil && !ev.Rescan {
				if rel, err := filepath.Rel(ev.Root, ev.Path); err == nil && m.IsIgnoreFile(filepath.ToSlash(rel)) {
					if err := m.Reload(); err != nil {
						rep.warn(err)
					}
					w.Refresh(ev.Root) // rewatches what the matcher now leaves, then sends a Rescan
					continue
				}
			}
			select {
			case out <- c:
			case <-ctx.Done():
				return
			}
		}
	}
}

// syncContainers picks the containers to sync into: each one named with -c, checked against
// the workload, or else the default one, the way kubectl exec picks it (with its "Defaulted
// container" message). Each becomes a target of its own in every pod.
func syncContainers(w *workload.Workload, names []string, warn io.Writer) ([]string, error) {
	if len(names) == 0 {
		c, err := w.SyncContainer("", warn)
		if err != nil {
			return nil, err
		}
		return []string{c}, nil
	}
	var out []string
	for _, n := range names {
		if slices.Contains(out, n) {
			continue
		}
		c, err := w.SyncContainer(n, warn)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
