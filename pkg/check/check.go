// Package check says, before anything is written, what a sync and the image commands will be
// able to do with a workload, each verdict with its fix. It asks the places that already know
// (RBAC through SelfSubjectAccessReview, the container through remote's read-only preflight,
// admission through workload's dry-run of the helper patch) and only collects their answers.
package check

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// Status is how a verdict came out.
type Status string

// The statuses of a verdict.
const (
	OK   Status = "ok"
	Warn Status = "warn" // works, with a limit the user should know
	Fail Status = "fail" // will not work until the fix is applied
)

// Verdict is one thing that will or will not work, and what to do about it.
type Verdict struct {
	Check  string `json:"check"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Access is one RBAC permission livesync needs, and for what.
type Access struct {
	Verb, Group, Resource, Subresource string
	For                                string
}

func (a Access) String() string {
	r := a.Resource
	if a.Subresource != "" {
		r += "/" + a.Subresource
	}
	if a.Group != "" {
		r += "." + a.Group
	}
	return a.Verb + " " + r
}

// Needs are the permissions of docs/rbac.yaml that a session and the image commands use on a
// workload of resource (deployments, statefulsets, …; "" for a bare pod).
func Needs(group, resource string) []Access {
	needs := []Access{
		{Verb: "get", Resource: "pods", For: "sync"},
		{Verb: "list", Resource: "pods", For: "sync"},
		{Verb: "watch", Resource: "pods", For: "sync"},
		{Verb: "create", Resource: "pods", Subresource: "exec", For: "sync"},
		{Verb: "patch", Resource: "pods", Subresource: "ephemeralcontainers", For: "helper containers"},
		{Verb: "create", Resource: "pods", Subresource: "portforward", For: "--forward"},
		{Verb: "get", Resource: "pods", Subresource: "log", For: "--logs"},
		{Verb: "list", Resource: "events", For: "inspect's pull column"},
		{Verb: "get", Resource: "secrets", For: "registry credentials of the pods"},
	}
	if resource != "" && resource != "pods" {
		needs = append(needs,
			Access{Verb: "get", Group: group, Resource: resource, For: "sync"},
			Access{Verb: "watch", Group: group, Resource: resource, For: "sync"},
			Access{Verb: "patch", Group: group, Resource: resource, For: "refresh, pull-policy, restore, --restart process"},
		)
	}
	return needs
}

// RBAC asks the API server, one SelfSubjectAccessReview each, whether the caller has every
// access in ns; missing ones for the sync itself fail, the others warn.
func RBAC(ctx context.Context, client kubernetes.Interface, ns string, needs []Access) Verdict {
	var missing, missingSync []string
	for _, a := range needs {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource},
		}}
		got, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return Verdict{Check: "rbac", Status: Fail, Detail: fmt.Sprintf("cannot ask the API server what you may do: %v", err),
				Fix: "grant create on selfsubjectaccessreviews.authorization.k8s.io (every user has it by default)"}
		}
		if got.Status.Allowed {
			continue
		}
		missing = append(missing, a.String()+" ("+a.For+")")
		if a.For == "sync" {
			missingSync = append(missingSync, a.String())
		}
	}
	switch {
	case len(missing) == 0:
		return Verdict{Check: "rbac", Status: OK, Detail: fmt.Sprintf("every verb livesync uses is allowed in namespace %q", ns)}
	case len(missingSync) > 0:
		return Verdict{Check: "rbac", Status: Fail, Detail: "missing in namespace " + ns + ": " + strings.Join(missing, ", "),
			Fix: "ask for the Role in docs/rbac.yaml (kubectl apply -n " + ns + " -f docs/rbac.yaml, and a RoleBinding to you)"}
	}
	return Verdict{Check: "rbac", Status: Warn, Detail: "missing in namespace " + ns + ": " + strings.Join(missing, ", "),
		Fix: "the sync works; for the rest ask for the Role in docs/rbac.yaml"}
}

// Container runs remote's read-only preflight for each remote root in t: whether exec is
// admitted at all, and what the container has (sh, tar, a writable root).
func Container(ctx context.Context, ex remote.Executor, t remote.Target, roots []string, helper string) []Verdict {
	where := fmt.Sprintf("container %q of pod %q", t.Container, t.Pod)
	var out []Verdict
	for i, root := range roots {
		c, err := remote.Preflight(ctx, ex, clock.RealClock{}, remote.RetryPolicy{Tries: 1}, t, root)
		if err != nil {
			var se *remote.SyncError
			switch {
			case errors.Is(err, remote.ErrExecForbidden) && errors.As(err, &se):
				return append(out, Verdict{Check: "exec", Status: Fail, Detail: se.Msg, Fix: se.Hint})
			case errors.Is(err, remote.ErrTarMissing):
				v := Verdict{Check: "tools", Status: Fail, Detail: "no sh in " + where, Fix: "use an image with sh and tar, or --helper ephemeral (see the helper check)"}
				if helper != "never" {
					v.Status, v.Fix = Warn, "livesync syncs through a helper container (see the helper check)"
				}
				return append(out, Verdict{Check: "exec", Status: OK, Detail: "exec into " + where + " is allowed"}, v)
			}
			return append(out, Verdict{Check: "exec", Status: Fail, Detail: err.Error(), Fix: "check that the pod runs: kubectl get pod " + t.Pod + " -n " + t.Namespace})
		}
		if i == 0 {
			out = append(out, Verdict{Check: "exec", Status: OK, Detail: fmt.Sprintf("exec into %s is allowed (runs as uid %s)", where, c.UID)})
		}
		out = append(out, tools(c, where, root, helper))
	}
	return out
}

// tools words what the preflight found about one remote root.
func tools(c *remote.Check, where, root, helper string) Verdict {
	v := Verdict{Check: "tools", Status: OK}
	var have []string
	if c.Tar {
		have = append(have, "sh and tar")
	}
	if c.Stream {
		have = append(have, "dd (one kept-open stream)")
	}
	v.Detail = fmt.Sprintf("%s has %s; %s is %s", where, strings.Join(have, ", "), root, map[string]string{
		remote.RootDir: "a directory", remote.RootMissing: "missing (it will be created)", remote.RootNotDir: "not a directory"}[c.Root])
	switch {
	case !c.Tar && helper == "never":
		v.Status, v.Detail = Fail, fmt.Sprintf("%s has sh but no tar", where)
		v.Fix = "use an image with tar, or drop --helper never"
	case !c.Tar:
		v.Status, v.Detail = Warn, fmt.Sprintf("%s has sh but no tar", where)
		v.Fix = "livesync syncs through a helper container (see the helper check)"
	case c.Root == remote.RootNotDir:
		v.Status, v.Fix = Fail, fmt.Sprintf("map a directory inside it, or a file onto %s", root)
	case !c.Writable:
		v.Status, v.Detail = Fail, fmt.Sprintf("%s may not write %s (uid %s)", where, root, c.UID)
		v.Fix = remote.PermissionHint(root)
	case !c.Stream:
		v.Detail += "; no dd: an exec per batch instead of one stream"
	}
	return v
}

// PodSecurity reads the namespace's enforced PodSecurity level; where the caller may not read
// namespaces (docs/rbac.yaml does not grant it), level is what the helper's dry run learned
// from the API server ("" when it learned nothing).
func PodSecurity(ctx context.Context, client kubernetes.Interface, ns, level string) Verdict {
	n, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case err == nil && n.Labels["pod-security.kubernetes.io/enforce"] != "":
		level = n.Labels["pod-security.kubernetes.io/enforce"]
	case err == nil:
		level = "privileged (no enforce label: the cluster's default applies)"
	case level != "":
		level += " (as the API server answered the helper's dry run; you may not read the namespace)"
	default:
		return Verdict{Check: "pod-security", Status: Warn, Detail: fmt.Sprintf("cannot read namespace %q: %v", ns, err),
			Fix: "the helper check says what the API server admits"}
	}
	return Verdict{Check: "pod-security", Status: OK, Detail: fmt.Sprintf("namespace %q enforces PodSecurity %s", ns, level)}
}

// Helper asks the API server, with a server-side dry run of the exact ephemeral-container
// patch a session would send, whether a helper container would be admitted, and as whom. It
// also returns the PodSecurity level the answer showed ("" when it showed none).
func Helper(ctx context.Context, h *workload.Helpers, t remote.Target, mode string) (Verdict, string) {
	if mode == "never" {
		return Verdict{Check: "helper", Status: OK, Detail: "not used (--helper never)"}, ""
	}
	dry := *h
	dry.DryRun = true
	hp, err := dry.Ensure(ctx, t.Namespace, t.Pod, t.Container, "")
	if err != nil {
		return Verdict{Check: "helper", Status: Warn, Detail: err.Error(),
			Fix: "needed only for images without sh or tar, or with --helper ephemeral"}, ""
	}
	how := "would be admitted as " + string(hp.Profile)
	if hp.Reused {
		how = "is running (" + hp.Name + ")"
	}
	return Verdict{Check: "helper", Status: OK, Detail: fmt.Sprintf("a helper container (%s) %s in pod %q (server-side dry run)", h.Image, how, t.Pod)}, hp.Level
}

// Failed reports whether any verdict failed.
func Failed(vs []Verdict) bool {
	for _, v := range vs {
		if v.Status == Fail {
			return true
		}
	}
	return false
}
