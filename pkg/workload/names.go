package workload

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/kubectl/pkg/scheme"
)

// Kinds are the workload kinds livesync accepts, as kubectl prints them; shell completion
// offers them as "KIND/".
var Kinds = []string{"daemonset", "deployment", "pod", "replicaset", "statefulset"}

// kindAliases are the spellings of Kinds livesync accepts, kubectl's short names included.
var kindAliases = map[string]bool{
	"daemonset": true, "daemonsets": true, "ds": true, "daemonset.apps": true, "daemonsets.apps": true,
	"deployment": true, "deployments": true, "deploy": true, "deployment.apps": true, "deployments.apps": true,
	"pod": true, "pods": true, "po": true,
	"replicaset": true, "replicasets": true, "rs": true, "replicaset.apps": true, "replicasets.apps": true,
	"statefulset": true, "statefulsets": true, "sts": true, "statefulset.apps": true, "statefulsets.apps": true,
}

// IsKind reports whether s names one of Kinds, in any spelling kubectl accepts.
func IsKind(s string) bool { return kindAliases[strings.ToLower(s)] }

// SplitTarget returns how many leading args name the workload (kubectl's grammar: TYPE/NAME,
// TYPE NAME, a bare pod name, or an optional TYPE with -l) and whether that name is complete.
func SplitTarget(args []string, selector string) (n int, done bool) {
	if len(args) == 0 {
		return 0, false
	}
	first := args[0]
	switch {
	case selector != "":
		if IsKind(first) && !strings.Contains(first, "/") {
			return 1, true
		}
		return 0, true
	case strings.Contains(first, "/") || !IsKind(first):
		return 1, true
	case len(args) >= 2:
		return 2, true
	default:
		return 1, false // "TYPE " typed, NAME next
	}
}

// Names lists the names of kind in namespace (those selector selects, if set), sorted.
func Names(b *resource.Builder, namespace, kind, selector string) ([]string, error) {
	infos, err := b.WithScheme(scheme.Scheme, scheme.Scheme.PrioritizedVersionsAllGroups()...).
		NamespaceParam(namespace).DefaultNamespace().
		ResourceTypeOrNameArgs(true, kind).
		LabelSelectorParam(selector).
		Flatten().
		Do().Infos()
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", kind, err)
	}
	var out []string
	for _, info := range infos {
		out = append(out, info.Name)
	}
	slices.Sort(out)
	return out, nil
}

// ContainerNames lists the containers (init containers included) of the workloads args and
// selector name, each name once.
func ContainerNames(b *resource.Builder, namespace string, args []string, selector string) ([]string, error) {
	ws, err := Resolve(b, namespace, args, selector)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, w := range ws {
		cs, _ := w.Containers(nil)
		for _, c := range cs {
			if !slices.Contains(names, c.Name) {
				names = append(names, c.Name)
			}
		}
	}
	return names, nil
}
