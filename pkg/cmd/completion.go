package cmd

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/livesync-dev/kubectl-livesync/pkg/control"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncstate"
)

// binaryName is what the completion scripts complete: the plugin binary as a user types it when
// calling it without kubectl. `kubectl livesync` completes through kubectl and the
// kubectl_complete-livesync shim instead.
const binaryName = "kubectl-livesync"

// completionTimeout bounds each API request made while the user waits on <TAB>, unless
// --request-timeout says otherwise.
const completionTimeout = "5s"

// completionProbeTimeout bounds the API server's first answer while completing.
const completionProbeTimeout = 2 * time.Second

func newCmdCompletion() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print the shell completion script for kubectl-livesync",
		Long: `Print the completion script for the given shell, for calling the plugin binary directly
(kubectl-livesync <TAB>).

For "kubectl livesync <TAB>", kubectl's own completion (kubectl completion SHELL) asks an
executable named kubectl_complete-livesync on your PATH; it ships in the release archive next to
the binary, and "make install" installs it. It runs "kubectl-livesync __complete ARGS...".
It completes subcommands, flags, workload kinds and names, container names (-c), namespaces
(-n) and contexts (--context) from your kubeconfig and cluster.`,
		Example: `  # bash (needs the bash-completion package for the best results)
  source <(kubectl livesync completion bash)

  # zsh
  kubectl livesync completion zsh > "${fpath[1]}/_kubectl-livesync"

  # fish
  kubectl livesync completion fish > ~/.config/fish/completions/kubectl-livesync.fish

  # PowerShell
  kubectl livesync completion powershell | Out-String | Invoke-Expression`,
		ValidArgs:             []string{"bash", "zsh", "fish", "powershell"},
		Args:                  cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeCompletion(cmd.Root(), cmd.OutOrStdout(), args[0])
		},
	}
}

// writeCompletion renders cobra's script for shell under the binary's name: the scripts
// register themselves for the root command's name, which is "livesync" here.
func writeCompletion(root *cobra.Command, w io.Writer, shell string) error {
	use := root.Use
	root.Use = binaryName
	defer func() { root.Use = use }()
	switch shell {
	case "bash":
		return root.GenBashCompletionV2(w, true)
	case "zsh":
		return root.GenZshCompletion(w)
	case "fish":
		return root.GenFishCompletion(w, true)
	case "powershell":
		return root.GenPowerShellCompletionWithDesc(w)
	}
	return fmt.Errorf("unsupported shell %q: use bash, zsh, fish or powershell", shell)
}

// registerCompletions wires dynamic completion into the tree NewCmdLiveSync built: workload
// arguments, -c, -n, --context and the fixed values of some flags. It keys on command and flag
// names so the command files stay free of completion code.
func registerCompletions(root *cobra.Command, g *globalOptions) {
	// After the workload come LOCAL:REMOTE mappings: complete local paths.
	root.ValidArgsFunction = g.completeTarget(func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return nil, cobra.ShellCompDirectiveDefault
	})
	for _, c := range root.Commands() {
		switch c.Name() {
		case "inspect", "refresh", "restore":
			c.ValidArgsFunction = g.completeTarget(cobra.NoFileCompletions)
		case "pull-policy":
			c.ValidArgsFunction = g.completeTarget(fixedValues(pullPolicies))
		case "check":
			// As the root: a workload, then LOCAL:REMOTE mappings.
			c.ValidArgsFunction = root.ValidArgsFunction
		case "wait":
			_ = c.RegisterFlagCompletionFunc("entry", completeRunningEntries)
		}
	}

	_ = root.RegisterFlagCompletionFunc("namespace", g.completeNamespaces)
	_ = root.RegisterFlagCompletionFunc("context", g.completeKubeconfig(func(c clientcmdapi.Config) []string { return sortedKeys(c.Contexts) }))
	_ = root.RegisterFlagCompletionFunc("cluster", g.completeKubeconfig(func(c clientcmdapi.Config) []string { return sortedKeys(c.Clusters) }))
	_ = root.RegisterFlagCompletionFunc("user", g.completeKubeconfig(func(c clientcmdapi.Config) []string { return sortedKeys(c.AuthInfos) }))

	fixed := map[string][]string{
		"for":         {"synced", "restarted", "ready"},
		"initial":     {"upload", "mirror", "none"},
		"pull-policy": pullPolicies,
	}
	outputs := map[string][]string{
		"livesync": {"text", "json"},
		"check":    {"text", "json"},
		"inspect":  {"table", "json", "yaml"},
		"version":  {"json"},
		"wait":     {"json"},
	}
	for _, c := range append([]*cobra.Command{root}, root.Commands()...) {
		local := c.LocalNonPersistentFlags()
		if local.Lookup("container") != nil {
			_ = c.RegisterFlagCompletionFunc("container", g.completeContainers)
		}
		for name, values := range fixed {
			if local.Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, fixedValues(values))
			}
		}
		if values, ok := outputs[c.Name()]; ok && local.Lookup("output") != nil {
			_ = c.RegisterFlagCompletionFunc("output", fixedValues(values))
		}
	}
}

var pullPolicies = []string{"Always", "IfNotPresent", "Never"}

// completeRunningEntries lists the livesync.yaml entries of the running sessions.
func completeRunningEntries(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	dir, err := syncstate.DefaultDir()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	infos, _ := control.Sessions(context.Background(), dir)
	var names []string
	for _, in := range infos {
		if in.Name != "" && !slices.Contains(names, in.Name) {
			names = append(names, in.Name)
		}
	}
	return filterPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
}
