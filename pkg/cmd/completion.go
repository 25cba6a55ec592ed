package cmd

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/kubectl/pkg/scheme"

	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// binaryName is what the completion scripts complete: the plugin binary as a user types it when
// calling it without kubectl. `kubectl livesync` completes through kubectl and the
// kubectl_complete-livesync shim instead.
const binaryName = "kubectl-livesync"

// completionTimeout bounds each API request made while the user waits on <TAB>, unless
// --request-timeout says otherwise.
const completionTimeout = "5s"

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
		}
	}

	_ = root.RegisterFlagCompletionFunc("namespace", g.completeNamespaces)
	_ = root.RegisterFlagCompletionFunc("context", g.completeKubeconfig(func(c clientcmdapi.Config) []string { return sortedKeys(c.Contexts) }))
	_ = root.RegisterFlagCompletionFunc("cluster", g.completeKubeconfig(func(c clientcmdapi.Config) []string { return sortedKeys(c.Clusters) }))
	_ = root.RegisterFlagCompletionFunc("user", g.completeKubeconfig(func(c clientcmdapi.Config) []string { return sortedKeys(c.AuthInfos) }))

	fixed := map[string][]string{
		"initial":     {"upload", "mirror", "none"},
		"pull-policy": pullPolicies,
	}
	outputs := map[string][]string{
		"livesync": {"text", "json"},
		"inspect":  {"table", "json", "yaml"},
		"version":  {"json"},
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

// workloadKinds are offered as "KIND/" for the first argument; the names are the ones kubectl
// prints, the aliases the ones livesync accepts (kubectl's short names included).
var workloadKinds = []string{"daemonset", "deployment", "pod", "replicaset", "statefulset"}

var kindAliases = map[string]bool{
	"daemonset": true, "daemonsets": true, "ds": true, "daemonset.apps": true, "daemonsets.apps": true,
	"deployment": true, "deployments": true, "deploy": true, "deployment.apps": true, "deployments.apps": true,
	"pod": true, "pods": true, "po": true,
	"replicaset": true, "replicasets": true, "rs": true, "replicaset.apps": true, "replicasets.apps": true,
	"statefulset": true, "statefulsets": true, "sts": true, "statefulset.apps": true, "statefulsets.apps": true,
}

func isKind(s string) bool { return kindAliases[strings.ToLower(s)] }

// splitTarget returns how many leading args name the workload (kubectl's grammar: TYPE/NAME,
// TYPE NAME, a bare pod name, or an optional TYPE with -l) and whether that name is complete.
func splitTarget(args []string, selector string) (n int, done bool) {
	if len(args) == 0 {
		return 0, false
	}
	first := args[0]
	switch {
	case selector != "":
		if isKind(first) && !strings.Contains(first, "/") {
			return 1, true
		}
		return 0, true
	case strings.Contains(first, "/") || !isKind(first):
		return 1, true
	case len(args) >= 2:
		return 2, true
	default:
		return 1, false // "TYPE " typed, NAME next
	}
}

// splitMappings separates the LOCAL:REMOTE mappings of the sync command from the workload
// arguments; no TYPE/NAME contains a colon.
func splitMappings(args []string) (target, mappings []string) {
	for _, a := range args {
		if strings.Contains(a, ":") {
			mappings = append(mappings, a)
		} else {
			target = append(target, a)
		}
	}
	return target, mappings
}

// completeTarget completes the workload part of the arguments from the cluster and hands the
// rest to after.
func (g *globalOptions) completeTarget(after cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		selector, _ := cmd.Flags().GetString("selector")
		target, rest := splitMappings(args)
		n, done := splitTarget(target, selector)
		if done {
			return after(cmd, append(target[n:], rest...), toComplete)
		}
		if selector != "" {
			// An optional TYPE, or what follows the workload.
			comps, dir := after(cmd, args, toComplete)
			return append(filterPrefix(workloadKinds, toComplete), comps...), dir
		}
		if n == 1 {
			return g.completeNames(cmd, target[0], "", toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		if kind, name, ok := strings.Cut(toComplete, "/"); ok {
			return g.completeNames(cmd, kind, kind+"/", name), cobra.ShellCompDirectiveNoFileComp
		}
		// KIND/ or a bare pod name; no space after "deployment/" so its names can follow.
		dir := cobra.ShellCompDirectiveNoFileComp
		var comps []cobra.Completion
		for _, k := range filterPrefix(workloadKinds, toComplete) {
			comps = append(comps, k+"/")
			dir |= cobra.ShellCompDirectiveNoSpace
		}
		return append(comps, g.completeNames(cmd, "pods", "", toComplete)...), dir
	}
}

// completeNames lists the names of kind in the namespace that start with toComplete, each
// prefixed with prefix.
func (g *globalOptions) completeNames(cmd *cobra.Command, kind, prefix, toComplete string) []cobra.Completion {
	if !isKind(kind) || !g.clientsForCompletion() {
		return nil
	}
	selector, _ := cmd.Flags().GetString("selector")
	infos, err := g.builder().WithScheme(scheme.Scheme, scheme.Scheme.PrioritizedVersionsAllGroups()...).
		NamespaceParam(g.namespace).DefaultNamespace().
		ResourceTypeOrNameArgs(true, kind).
		LabelSelectorParam(selector).
		Flatten().
		Do().Infos()
	if err != nil {
		cobra.CompErrorln(fmt.Sprintf("listing %s: %v", kind, err))
		return nil
	}
	var out []cobra.Completion
	for _, info := range infos {
		if strings.HasPrefix(info.Name, toComplete) {
			out = append(out, prefix+info.Name)
		}
	}
	slices.Sort(out)
	return out
}

// completeContainers lists the containers (init containers included) of the workload the
// arguments name.
func (g *globalOptions) completeContainers(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	selector, _ := cmd.Flags().GetString("selector")
	target, _ := splitMappings(args)
	n, done := splitTarget(target, selector)
	if (!done && selector == "") || !g.clientsForCompletion() {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ws, err := workload.Resolve(g.builder(), g.namespace, target[:n], selector)
	if err != nil {
		cobra.CompErrorln(err.Error())
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, w := range ws {
		cs, err := w.Containers(nil)
		if err != nil {
			continue
		}
		for _, c := range cs {
			if !slices.Contains(names, c.Name) {
				names = append(names, c.Name)
			}
		}
	}
	return filterPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
}

func (g *globalOptions) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if !g.clientsForCompletion() {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	list, err := g.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		cobra.CompErrorln(fmt.Sprintf("listing namespaces: %v", err))
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, ns := range list.Items {
		names = append(names, ns.Name)
	}
	slices.Sort(names)
	return filterPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeKubeconfig completes the names of one section of the kubeconfig, without the cluster.
func (g *globalOptions) completeKubeconfig(section func(clientcmdapi.Config) []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		cfg, err := g.configFlags.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			cobra.CompErrorln(fmt.Sprintf("reading kubeconfig: %v", err))
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return filterPrefix(section(cfg), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// clientsForCompletion builds the clients like every command does, with a short default
// request timeout so that an unreachable cluster does not hang the shell.
func (g *globalOptions) clientsForCompletion() bool {
	if t := g.configFlags.Timeout; t != nil && (*t == "" || *t == "0") {
		*t = completionTimeout
	}
	if err := g.complete(); err != nil {
		cobra.CompErrorln(err.Error())
		return false
	}
	return true
}

// fixedValues completes one of values, like cobra.FixedCompletions but filtered by what is typed.
func fixedValues(values []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return filterPrefix(values, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

func filterPrefix(values []string, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, v := range values {
		if strings.HasPrefix(v, prefix) {
			out = append(out, v)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
