package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/forward"
	"github.com/livesync-dev/kubectl-livesync/pkg/inspect"
	"github.com/livesync-dev/kubectl-livesync/pkg/logs"
	"github.com/livesync-dev/kubectl-livesync/pkg/memlimit"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/project"
	"github.com/livesync-dev/kubectl-livesync/pkg/report"
	"github.com/livesync-dev/kubectl-livesync/pkg/session"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncback"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// SyncOptions holds everything the root command, `kubectl livesync WORKLOAD LOCAL:REMOTE...`,
// needs; the flags fill the session's typed Config directly.
type SyncOptions struct {
	g         *globalOptions
	target    targetOptions
	registry  registryOptions
	mutate    mutateOptions
	cfg       session.Config
	initial   string
	output    string
	transport string
	args      []string

	// file is --file; project is the livesync.yaml being run, with its entries' sessions.
	file    string
	project *project.File
	// trustFile is --trust-file: the file's entries may reach outside its directory and add
	// helper containers (see untrusted).
	trustFile bool
	only      string
	entries   []entry
	// near are the names a mistyped first argument may have meant: the subcommands and the
	// entries of the nearest livesync.yaml.
	near []string
	// fromFile are the entry fields the entry being checked took from livesync.yaml.
	fromFile map[string]bool
	flags    *pflag.FlagSet
}

func newCmdSync(g *globalOptions) *cobra.Command { return newCmdSyncFor(&SyncOptions{g: g}) }

func newCmdSyncFor(o *SyncOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "livesync (TYPE/NAME | TYPE NAME | POD | [TYPE] -l SELECTOR) LOCAL:REMOTE [LOCAL:REMOTE ...]",
		Short: "Live-sync local files into the running containers of a workload; pin and follow mutable image tags",
		Long: `Copy LOCAL into REMOTE in the chosen container of every running pod of the workload, then watch
LOCAL and copy every change, deletes included, into every replica. Pods that appear later and
containers that restart are synced as soon as they run. Stop with Ctrl-C.

LOCAL is a directory or a file; REMOTE is an absolute path in the container. .git/, editor temp
files, .livesyncignore patterns (gitignore syntax) and --exclude patterns are never synced.

With no workload given, the entries of the nearest livesync.yaml (this directory or a parent) run;
` + "`kubectl livesync init`" + ` writes one from a command line:

  apiVersion: livesync.dev/v1alpha1
  kind: LiveSync
  syncs:
    - name: api
      workload: deploy/api
      mappings:
        - ./api:/app

The subcommands inspect a workload's images and pin moved tags to digests.`,
		Example: `  # Sync ./src into /app of every replica of deploy/my-app, then keep syncing
  kubectl livesync deploy/my-app ./src:/app

  # Two mappings, a chosen container, and a command after every sync
  kubectl livesync deploy/my-app ./src:/app/src ./static:/app/static -c web --on-sync 'kill -HUP 1'

  # Sync a locally built binary and restart it in place after every save (undo: restore)
  kubectl livesync deploy/my-app ./bin:/app/bin --restart process

  # Have the app reload after every sync, when it reloads on SIGHUP
  kubectl livesync deploy/my-app ./conf:/etc/app --restart signal:HUP

  # Pin the moved :dev tag first, and keep following it while syncing
  kubectl livesync deploy/my-app ./src:/app --refresh --follow-tag

  # The whole loop in one terminal: sync, restart, a port-forward and the logs that follow
  # the workload through rollouts and restarts
  kubectl livesync deploy/my-app ./bin:/app/bin --restart process --forward 8080:http --logs

  # Sync once (e.g. in CI) and exit non-zero unless every replica converged
  kubectl livesync deploy/my-app ./src:/app --once

  # Run every entry of the nearest livesync.yaml, or only the entry named api
  kubectl livesync
  kubectl livesync api

  # Machine-readable events (NDJSON) for editors and scripts
  kubectl livesync deploy/my-app ./src:/app -o json`,
		// Arbitrary args: the first one is a workload, not a subcommand.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.args, o.flags = args, cmd.Flags()
			if err := o.findProject(); err != nil {
				return err
			}
			if o.project == nil && len(args) == 0 && o.target.selector == "" {
				return errNothingToSync
			}
			for _, c := range cmd.Commands() {
				o.near = append(o.near, c.Name())
			}
			return o.g.run(cmd, o)
		},
	}
	f := cmd.Flags()
	o.addEntryFlags(f)
	o.registry.addFlags(f)
	o.mutate.addFlags(f)
	f.StringVar(&o.file, "file", "", "run the entries of this livesync.yaml (default: the nearest livesync.yaml, when no workload is given)")
	f.BoolVar(&o.trustFile, "trust-file", false, "let livesync.yaml's entries sync a LOCAL outside the file's directory and add helper containers (helper: ephemeral, helperImage), as you would run a Makefile you trust")
	f.DurationVar(&o.cfg.Sync.ExecTimeout, "exec-timeout", filesync.DefaultExecTimeout, "cancel and retry a file transfer or listing after this long without progress (a frozen or overloaded container)")
	f.DurationVar(&o.cfg.Sync.Quiet, "batch-quiet", coalesce.DefaultQuiet, "a batch is sent after this long without a new change")
	f.DurationVar(&o.cfg.Sync.Cap, "batch-max", coalesce.DefaultCap, "a batch is sent at most this long after its first change, even while changes keep coming")
	f.StringVar(&o.transport, "transport", "stream", "how batches reach a container: stream (one kept-open exec per container; an exec per batch where the container lacks dd) or exec (an exec per batch, for proxies that cut long-lived connections)")
	f.IntVar(&o.cfg.Sync.Parallelism, "parallel", 8, "at most this many containers are written to at once")
	f.StringVarP(&o.output, "output", "o", "text", "output: text, or json for NDJSON events (initial-sync, batch, on-sync, restarted, target-added, target-removed, waiting, restarting, error, recovered, held, refresh, dry-run, dry-run-sync-back, synced-back, conflict, sync-back-source, sync-back-trigger, ancestor, watching, progress, forward, log, helper, note)")
	f.BoolVar(&o.cfg.Once, "once", false, "initial sync and exit once the --on-sync runs finished or timed out; the exit code says whether every container converged (not how --on-sync went)")
	f.DurationVar(&o.cfg.SyncBack.Interval, "sync-back-interval", syncback.DefaultInterval, "how often the source container is scanned for --sync-back paths")
	f.BoolVar(&o.cfg.SyncBack.Inotify, "sync-back-inotify", true, "with --sync-back, also run inotifywait in the source container where its image has it, so that what it writes comes back at once (its watches count against the node's inotify limits); false: scan at --sync-back-interval only")
	f.BoolVar(&o.cfg.SyncBack.Deletes, "sync-back-deletes", false, "with --sync-back, delete local files the container deleted (never a locally changed one; mass deletes are held)")
	addLogsFlags(f, &o.cfg.LogsConfig)
	f.BoolVar(&o.cfg.State.Forget, "forget-state", false, "start without the ancestor saved by the last session of this sync (and delete it): the local side wins, as on a first start; see docs/state.md")
	f.BoolVar(&o.cfg.Sync.AllowMassDelete, "allow-mass-delete", false, "let a batch or initial sync delete more than 50 remote entries and more than half of a mapping's, or mirror an emptied local root; without it such deletes are held and reported")
	return cmd
}

// addEntryFlags adds the flags an entry of livesync.yaml can carry too (see entryFields);
// init takes the same ones.
func (o *SyncOptions) addEntryFlags(f *pflag.FlagSet) {
	o.target.addFlags(f, "container to sync into, repeatable: every named container of each pod is synced; default: the kubectl.kubernetes.io/default-container annotation, else the first")
	f.StringVar(&o.initial, "initial", string(planner.InitialUpload), "initial sync of each new container: upload (send what differs), mirror (also delete remote files that are not local), none")
	f.StringArrayVar(&o.cfg.Excludes, "exclude", nil, "do not sync paths matching this gitignore-style pattern; repeatable")
	f.BoolVar(&o.cfg.GitIgnore, "gitignore", false, "also honour .gitignore files (off by default: locally built, git-ignored outputs are often what you want to sync)")
	f.StringVar(&o.cfg.Sync.OnSync, "on-sync", "", "run `sh -c CMD` in each container after each applied batch and the initial sync, without holding up the next batch; $LIVESYNC_CHANGED lists the changed remote paths")
	f.DurationVar(&o.cfg.Sync.OnSyncTimeout, "on-sync-timeout", filesync.DefaultOnSyncTimeout, "close an --on-sync command's exec after this long and report it (what it started keeps running in the container)")
	f.Var(restartFlag{&o.cfg.Restart}, "restart", "restart the app after each batch that changed something: none, signal:SIG (send SIG, e.g. HUP, to the container's main process, if it handles it) or process (roll out once with livesync's supervisor as the container's command, which restarts the process in place, keeping the synced files; undo with kubectl livesync restore)")
	f.StringVar(&o.cfg.PullPolicy, "pull-policy", "", "set this imagePullPolicy on the workload first (Always|IfNotPresent|Never), like the pull-policy command")
	f.BoolVar(&o.cfg.Refresh, "refresh", false, "pin a moved tag to its new digest first, like the refresh command")
	f.BoolVar(&o.cfg.FollowTag, "follow-tag", false, "while syncing, poll the registry and pin each new push of the tag; new pods get their initial sync")
	f.DurationVar(&o.cfg.Interval, "interval", 30*time.Second, "registry polling interval with --follow-tag")
	addHelperFlags(f, &o.cfg)
	f.Var(forwardFlag{&o.cfg.Forward}, "forward", "keep this local port forwarded to the workload for the whole session, as kubectl port-forward does, but to whichever pod is Ready and synced, across rollouts and restarts: REMOTE is a port number or a container port's name, LOCAL 0 picks a free port, ADDRESS defaults to 127.0.0.1; repeatable")
	f.BoolVar(&o.cfg.Logs, "logs", false, "show the synced containers' output, each line prefixed pod/container, following new pods and restarted containers")
	f.StringArrayVar(&o.cfg.SyncBack.Globs, "sync-back", nil, "bring files the container writes at paths matching this gitignore-style pattern (relative to each LOCAL) home, from the oldest pod, never over a local edit; repeatable")
}

// Validate checks arguments and flags before anything talks to the cluster.
func (o *SyncOptions) Validate() error {
	if o.transport != "stream" && o.transport != "exec" {
		return fmt.Errorf("invalid --transport %q: use stream or exec", o.transport)
	}
	if o.project != nil {
		return o.validateEntries()
	}
	var wargs []string
	var ms []planner.Mapping
	for _, a := range o.args {
		if !strings.Contains(a, ":") {
			wargs = append(wargs, a)
			continue
		}
		m, err := planner.ParseMapping(a)
		if err != nil {
			return err
		}
		ms = append(ms, m)
	}
	o.args = wargs
	if len(ms) == 0 {
		if len(wargs) == 1 {
			if hint := didYouMean(wargs[0], o.near); hint != "" {
				return usageError{fmt.Errorf("%q is not a command, an entry of livesync.yaml, or a workload with a LOCAL:REMOTE mapping%s", wargs[0], hint)}
			}
		}
		return usageError{fmt.Errorf("%q is not a command, and no LOCAL:REMOTE mapping was given: e.g. kubectl livesync deploy/my-app ./src:/app, or see kubectl livesync --help", strings.Join(wargs, " "))}
	}
	o.cfg.Containers = o.target.containers
	return o.check(&o.cfg, ms, o.initial)
}

// guard refuses a session's changes to its workload in a run no one watches on a cluster
// that is not local (see guardWrites); file sync is no such change.
func (o *SyncOptions) guard() error {
	if o.project == nil {
		return o.guardSession(o.cfg, "")
	}
	for _, e := range o.entries {
		if err := o.guardSession(e.cfg, e.name); err != nil {
			return err
		}
	}
	return nil
}

// Run hands the session (or one per entry of livesync.yaml) to pkg/session with the real
// cluster, watcher and registry behind it.
func (o *SyncOptions) Run(ctx context.Context) error {
	memlimit.Follow()
	restCfg, err := o.g.configFlags.ToRESTConfig()
	if err != nil {
		return err
	}
	reporter := report.NewPrinter(o.g.Out, o.g.ErrOut, o.output == "json")
	reporter.DryRun = o.mutate.dryRun
	if report.Interactive(o.g.In, o.g.Out, o.g.ErrOut, o.output == "json") {
		reporter.AskOn(o.g.In, workingDir())
	}
	if o.project != nil {
		return o.runEntries(ctx, restCfg, reporter)
	}
	d := o.deps(restCfg, o.cfg, reporter, o.g.ErrOut, o.g.namespace, o.args, o.target.selector)
	d.Releases = reporter.Releases("", o.cfg)
	return session.Run(ctx, o.cfg, d)
}

// deps are the real cluster, watcher and registry behind one session.
func (o *SyncOptions) deps(restCfg *rest.Config, cfg session.Config, reporter session.Reporter, notes io.Writer, namespace string, args []string, selector string) session.Deps {
	refresher := &refresher{g: o.g, registry: &o.registry, mutate: &o.mutate, resolvers: map[string]inspect.Resolver{}, log: reporter.Refreshed}
	pods := &workload.PodExecutor{Config: restCfg, Client: o.g.client, ExecPerBatch: o.transport == "exec"}
	return session.Deps{
		PortForward: &forward.PodDialer{Config: restCfg, Client: o.g.client},
		Logs:        logs.ClientOpener{Client: o.g.client},
		Resolve: func() (*workload.Workload, error) {
			w, err := workload.ResolveTarget(o.g.builder(), namespace, args, selector)
			return w, o.g.withNearNames(err)
		},
		Client:   o.g.client,
		Executor: helperExecutor(pods, cfg, reporter),
		Images:   &syncImages{refresher: refresher, pods: pods},
		Reporter: reporter,
		Notes:    notes,
		Cluster:  clusterID(restCfg),
	}
}

// clusterID names the cluster for the saved state's key: its API server
// and the CA that authenticates it, not the context's name.
func clusterID(c *rest.Config) string {
	ca := c.CAData
	if len(ca) == 0 && c.CAFile != "" {
		ca, _ = os.ReadFile(c.CAFile)
	}
	return session.ClusterID(c.Host, ca, c.Insecure)
}

// workingDir is the working directory, or "" when it can't be read (paths are then shown
// absolute).
func workingDir() string {
	wd, _ := os.Getwd()
	return wd
}
