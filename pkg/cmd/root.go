// Package cmd holds the cobra commands of kubectl-livesync: flags in, typed options out,
// Complete/Validate/Run, no business logic. It is the only importer of cobra and pflag.
package cmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes"
)

// globalOptions are shared by every subcommand: kubeconfig flags, streams and verbosity.
type globalOptions struct {
	configFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams
	verbosity int
	// connectTimeout bounds the API server's first answer (--connect-timeout).
	connectTimeout time.Duration

	// Seams filled by complete; tests may set them first.
	namespace string
	client    kubernetes.Interface
	builder   func() *resource.Builder
}

// complete reads the namespace and builds the clients from the kubeconfig flags. A real
// cluster is asked for its version first (bounded by --connect-timeout): one that is missing,
// refuses, is silent or rejects the credentials fails here in one line.
func (g *globalOptions) complete(ctx context.Context) error {
	if g.client == nil {
		cfg, err := g.restConfig()
		if err != nil {
			return err
		}
		if err := g.probe(ctx, cfg, g.connectTimeout); err != nil {
			return err
		}
		if g.client, err = kubernetes.NewForConfig(cfg); err != nil {
			return fmt.Errorf("creating a Kubernetes client: %w", err)
		}
	}
	ns, _, err := g.configFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return fmt.Errorf("reading kubeconfig: %w", err)
	}
	if g.namespace == "" {
		g.namespace = ns
	}
	if g.builder == nil {
		g.builder = func() *resource.Builder { return resource.NewBuilder(g.configFlags) }
	}
	return nil
}

// runner is the Validate/Run half of the Options pattern every command follows.
type runner interface {
	Validate() error
	Run(ctx context.Context) error
}

// run validates the flags, then completes the clients, then runs: bad input is refused before
// anything reaches the cluster.
func (g *globalOptions) run(cmd *cobra.Command, r runner) error {
	if err := r.Validate(); err != nil {
		return usageError{err}
	}
	// A write no one watches is refused before the cluster is even asked (see guardWrites).
	if gr, ok := r.(interface{ guard() error }); ok {
		if err := gr.guard(); err != nil {
			return err
		}
	}
	if err := g.complete(cmd.Context()); err != nil {
		return err
	}
	return r.Run(cmd.Context())
}

// logf prints a diagnostic line to stderr when -v is at least level.
func (g *globalOptions) logf(level int, format string, args ...any) {
	if g.verbosity >= level {
		fmt.Fprintf(g.ErrOut, format+"\n", args...)
	}
}

// NewCmdLiveSync returns the root command, `kubectl livesync`, with every subcommand.
func NewCmdLiveSync(streams genericiooptions.IOStreams) *cobra.Command {
	return newCmdRoot(&globalOptions{
		configFlags: genericclioptions.NewConfigFlags(true),
		IOStreams:   streams,
	})
}

// newCmdRoot builds the command tree around g; tests pass a g with fake clients.
func newCmdRoot(g *globalOptions) *cobra.Command {
	streams := g.IOStreams
	cmd := newCmdSync(g)
	cmd.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl livesync"}
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	cmd.CompletionOptions.DisableDefaultCmd = true // replaced by newCmdCompletion

	flags := cmd.PersistentFlags()
	g.configFlags.AddFlags(flags)
	flags.IntVarP(&g.verbosity, "v", "v", 0, "log level: 1 shows why registry auth fell back to local credentials and the client library's own log lines")
	flags.DurationVar(&g.connectTimeout, "connect-timeout", DefaultConnectTimeout, "how long to wait for the API server's first answer; a cluster that does not answer in time fails in one line")
	cmd.PersistentPreRun = func(*cobra.Command, []string) {
		if g.verbosity < 1 {
			// client-go's own log lines (discovery retries, dropped watches) are noise beside
			// the one line that says what failed; -v 1 shows them.
			klog.SetLogger(logr.Discard())
		}
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{flagTypoError(c, err)} })

	cmd.AddCommand(
		newCmdInit(g),
		newCmdCheck(g),
		newCmdInspect(g),
		newCmdRefresh(g),
		newCmdPullPolicy(g),
		newCmdRestore(g),
		newCmdWait(g),
		newCmdMCP(g),
		newCmdVersion(g),
		newCmdCompletion(),
	)
	markUsageErrors(cmd)
	registerCompletions(cmd, g)
	addDocsToHelp(cmd)
	return cmd
}

// writeln ignores write errors on purpose: a closed stdout must not turn success into failure.
func writeln(w io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(w, format+"\n", args...)
}
