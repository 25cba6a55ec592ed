package cmd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

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
		n, done := workload.SplitTarget(target, selector)
		if done {
			return after(cmd, append(target[n:], rest...), toComplete)
		}
		if selector != "" {
			// An optional TYPE, or what follows the workload.
			comps, dir := after(cmd, args, toComplete)
			return append(filterPrefix(workload.Kinds, toComplete), comps...), dir
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
		for _, k := range filterPrefix(workload.Kinds, toComplete) {
			comps = append(comps, k+"/")
			dir |= cobra.ShellCompDirectiveNoSpace
		}
		return append(comps, g.completeNames(cmd, "pods", "", toComplete)...), dir
	}
}

// completeNames lists the names of kind in the namespace that start with toComplete, each
// prefixed with prefix.
func (g *globalOptions) completeNames(cmd *cobra.Command, kind, prefix, toComplete string) []cobra.Completion {
	if !workload.IsKind(kind) || !g.clientsForCompletion() {
		return nil
	}
	selector, _ := cmd.Flags().GetString("selector")
	names, err := workload.Names(g.builder(), g.namespace, kind, selector)
	if err != nil {
		cobra.CompErrorln(err.Error())
		return nil
	}
	var out []cobra.Completion
	for _, n := range filterPrefix(names, toComplete) {
		out = append(out, prefix+n)
	}
	return out
}

// completeContainers lists the containers (init containers included) of the workload the
// arguments name.
func (g *globalOptions) completeContainers(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	selector, _ := cmd.Flags().GetString("selector")
	target, _ := splitMappings(args)
	n, done := workload.SplitTarget(target, selector)
	if (!done && selector == "") || !g.clientsForCompletion() {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names, err := workload.ContainerNames(g.builder(), g.namespace, target[:n], selector)
	if err != nil {
		cobra.CompErrorln(err.Error())
		return nil, cobra.ShellCompDirectiveNoFileComp
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
	// The probe gets the smaller part of the 5 s the shell waits: a server that accepts the
	// connection and never answers fails it, and the requests after it get the rest.
	g.connectTimeout = min(g.connectTimeout, completionProbeTimeout)
	if err := g.complete(context.Background()); err != nil {
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
