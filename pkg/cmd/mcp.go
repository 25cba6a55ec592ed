package cmd

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"

	"github.com/spf13/cobra"

	"github.com/livesync-dev/kubectl-livesync/pkg/control"
	"github.com/livesync-dev/kubectl-livesync/pkg/mcp"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncstate"
	"github.com/livesync-dev/kubectl-livesync/pkg/version"
)

// MCPOptions holds `kubectl livesync mcp`'s flags.
type MCPOptions struct {
	g        *globalOptions
	registry registryOptions
	// mu guards the clients inspect completes on its first call: tool calls may come at once.
	mu sync.Mutex
}

func newCmdMCP(g *globalOptions) *cobra.Command {
	o := &MCPOptions{g: g}
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the running sessions to coding agents: a Model Context Protocol server over stdio",
		Long: `Serve the kubectl livesync sessions that sync the current directory to a coding agent, as a Model
Context Protocol server over stdin and stdout. Its tools only read:

  status   what each session syncs, and how each replica is
  wait     until every replica runs the current local bytes (as kubectl livesync wait)
  logs     what the containers wrote since the last sync (the session runs with --logs)
  inspect  a workload's images: running digest, registry digest (as kubectl livesync inspect)

The sessions run as usual, in a terminal or in the background; the agent's client starts this
command in the project's directory.`,
		Example: `  # In an MCP client's configuration (Claude Code, VS Code, ...): the command and its arguments
  {"command": "kubectl", "args": ["livesync", "mcp"]}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !control.Supported {
				return usageError{errors.New("mcp needs the sessions' control sockets, which are not supported on Windows yet")}
			}
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			state, err := syncstate.DefaultDir()
			if err != nil {
				return err
			}
			cfg := mcp.Config{StateDir: state, Dir: resolvedDir(wd), Version: version.Get().Version, DefaultTimeout: DefaultWaitTimeout, Inspect: o.inspect}
			return mcp.Serve(cmd.Context(), cfg, io.NopCloser(g.In), nopCloser{g.Out})
		},
	}
	o.registry.addFlags(cmd.Flags())
	return cmd
}

// inspect reports a workload's images as `inspect -o json` does, read-only.
func (o *MCPOptions) inspect(ctx context.Context, workload, namespace string) (any, error) {
	o.mu.Lock()
	err := o.g.complete(ctx)
	g := *o.g // a copy: each call its namespace
	o.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if namespace != "" {
		g.namespace = namespace
	}
	g.Out = io.Discard // stdout is the protocol's
	opts := &InspectOptions{g: &g, registry: o.registry, args: []string{workload}}
	return opts.reports(ctx)
}

// nopCloser leaves stdout open when the server ends.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
