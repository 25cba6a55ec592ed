package workload

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/kubectl/pkg/scheme"
)

// ErrNoWorkload is returned when the command line names no workload at all.
var ErrNoWorkload = errors.New("name a workload (e.g. deploy/my-app, pod/web-0, or a pod name) or pass -l SELECTOR")

// ErrNoMatch is wrapped by the error Resolve returns when -l selects nothing.
var ErrNoMatch = errors.New("nothing matches")

// BuilderArgs turns the workload part of a command line into resource.Builder arguments using
// kubectl's grammar: TYPE/NAME, "TYPE NAME", a bare NAME meaning a pod, or -l SELECTOR with an
// optional TYPE (pods when absent). A name together with -l is a conflict.
func BuilderArgs(args []string, selector string) ([]string, error) {
	switch len(args) {
	case 0:
		if selector == "" {
			return nil, ErrNoWorkload
		}
		return []string{"pods"}, nil
	case 1:
		a := args[0]
		if strings.Contains(a, "/") {
			if selector != "" {
				return nil, fmt.Errorf("both a name (%q) and -l %q were given: use one of them", a, selector)
			}
			return []string{a}, nil
		}
		if selector != "" {
			return []string{a}, nil
		}
		return []string{"pod/" + a}, nil
	case 2:
		if selector != "" {
			return nil, fmt.Errorf("both a name (%q) and -l %q were given: use one of them", args[1], selector)
		}
		if strings.Contains(args[0], "/") || strings.Contains(args[1], "/") {
			return nil, fmt.Errorf("use either TYPE/NAME or TYPE NAME, not %q", strings.Join(args, " "))
		}
		return args, nil
	default:
		return nil, fmt.Errorf("too many arguments %q: name one workload as TYPE/NAME or TYPE NAME", strings.Join(args, " "))
	}
}

// Resolve reads the workloads named on the command line through kubectl's resource builder,
// so every kubectl alias (deploy, sts, ds, rs, po) and fully qualified name works.
func Resolve(b *resource.Builder, namespace string, args []string, selector string) ([]*Workload, error) {
	bargs, err := BuilderArgs(args, selector)
	if err != nil {
		return nil, err
	}
	r := b.WithScheme(scheme.Scheme, scheme.Scheme.PrioritizedVersionsAllGroups()...).
		NamespaceParam(namespace).DefaultNamespace().
		ResourceTypeOrNameArgs(true, bargs...).
		LabelSelectorParam(selector).
		SingleResourceType().
		Flatten().
		Do()
	infos, err := r.Infos()
	if err != nil {
		return nil, explainGetError(err, namespace)
	}
	if len(infos) == 0 {
		return nil, fmt.Errorf("%w: no %s match -l %q in namespace %q", ErrNoMatch, bargs[0], selector, namespace)
	}
	var out []*Workload
	for _, info := range infos {
		w, err := FromObject(info.Object)
		if err != nil {
			return nil, err
		}
		w.Info = info
		out = append(out, w)
	}
	return out, nil
}

// NotFoundError is a named workload that is not in its namespace. Near, when the caller
// filled it (NearNames), holds the names it may have meant.
type NotFoundError struct {
	Resource, Kind, Name, Namespace string
	Near                            []string
}

func (e *NotFoundError) Error() string {
	msg := fmt.Sprintf("%s %q not found in namespace %q: check the name, or pass -n NAMESPACE", e.Kind, e.Name, e.Namespace)
	if len(e.Near) > 0 {
		msg += "; did you mean " + strings.Join(e.Near, " or ") + "?"
	}
	return msg
}

// Names lists the names of e's resource in its namespace, for a "did you mean"; nil when they
// can't be read.
func (e *NotFoundError) Names(b *resource.Builder) []string {
	infos, err := b.WithScheme(scheme.Scheme, scheme.Scheme.PrioritizedVersionsAllGroups()...).
		NamespaceParam(e.Namespace).DefaultNamespace().
		ResourceTypeOrNameArgs(true, e.Resource).
		Flatten().Do().Infos()
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(infos))
	for _, info := range infos {
		names = append(names, info.Name)
	}
	return names
}

func explainGetError(err error, namespace string) error {
	var status apierrors.APIStatus
	if errors.As(err, &status) && apierrors.IsNotFound(err) {
		if d := status.Status().Details; d != nil && d.Name != "" {
			kind := strings.TrimSuffix(d.Kind, "s")
			if kind == "namespace" {
				// The API server reports a missing namespace as the object not found.
				return fmt.Errorf("namespace %q not found: check -n, or list them with kubectl get namespaces", d.Name)
			}
			return &NotFoundError{Resource: d.Kind, Kind: kind, Name: d.Name, Namespace: namespace}
		}
	}
	if apierrors.IsForbidden(err) {
		// Reading a kind livesync can't use anyway (a service, a job) is forbidden to a user
		// bound to docs/rbac.yaml: name the real problem rather than send them asking for
		// a Role they don't need.
		if errors.As(err, &status) {
			if d := status.Status().Details; d != nil && d.Kind != "" && !hasPodTemplate(d.Group, d.Kind) {
				return errNoPodTemplate(strings.TrimSuffix(d.Kind, "s"))
			}
		}
		return fmt.Errorf("%w: ask for a Role with the get and list verbs on it", err)
	}
	return err
}

// hasPodTemplate reports whether a resource (group and plural name, as in a Status's details)
// is one FromObject accepts.
func hasPodTemplate(group, resource string) bool {
	switch group {
	case "":
		return resource == "pods"
	case "apps":
		return resource == "deployments" || resource == "statefulsets" || resource == "daemonsets" || resource == "replicasets"
	}
	return false
}
