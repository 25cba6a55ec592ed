package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/livesync-dev/kubectl-livesync/pkg/check"
	"github.com/livesync-dev/kubectl-livesync/pkg/inspect"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/project"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/session"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// CheckOptions holds everything `kubectl livesync check` needs.
type CheckOptions struct {
	g        *globalOptions
	target   targetOptions
	registry registryOptions
	helper   session.Config // Helper and HelperImage only
	output   string
	args     []string
	roots    []string
}

func newCmdCheck(g *globalOptions) *cobra.Command {
	o := &CheckOptions{g: g}
	cmd := &cobra.Command{
		Use:   "check (TYPE/NAME | TYPE NAME | POD | ENTRY) [LOCAL:REMOTE ...] [-c CONTAINER]",
		Short: "Say what a sync and the image commands will be able to do here, each with its fix, before anything is written",
		Long: `Check a workload before anything is written: the RBAC verbs livesync uses
(SelfSubjectAccessReview), whether exec into the container is allowed (RBAC and admission
policies), whether the container has sh and tar and may write each REMOTE, the namespace's
PodSecurity level, whether a helper container would be admitted (a server-side dry run of the
exact patch a session sends), and whether the replicas run the tag's current image.

Only reads: one read-only exec in one running pod, and dry runs. Exits 1 when something the sync
needs fails, 0 otherwise (warnings included). ENTRY is the name of an entry of livesync.yaml.`,
		Example: `  # What will work for deploy/my-app, and how to fix what won't
  kubectl livesync check deploy/my-app ./src:/app

  # The same for an entry of livesync.yaml, as JSON
  kubectl livesync check api -o json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.args = args
			return o.g.run(cmd, o)
		},
	}
	o.target.addFlags(cmd.Flags(), "container to check; default: the kubectl.kubernetes.io/default-container annotation, else the first")
	o.registry.addFlags(cmd.Flags())
	addHelperFlags(cmd.Flags(), &o.helper)
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output: text or json")
	return cmd
}

// Validate reads the workload and mappings from the arguments or the livesync.yaml entry.
func (o *CheckOptions) Validate() error {
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("invalid output format %q: use text or json", o.output)
	}
	if err := validateHelper(&o.helper); err != nil {
		return err
	}
	if len(o.args) == 1 && !strings.Contains(o.args[0], "/") && o.target.selector == "" {
		if err := o.fromEntry(o.args[0]); err != nil {
			return err
		}
	}
	var wargs []string
	for _, a := range o.args {
		if !strings.Contains(a, ":") {
			wargs = append(wargs, a)
			continue
		}
		m, err := planner.ParseMapping(a)
		if err != nil {
			return err
		}
		o.roots = append(o.roots, string(m.Remote))
	}
	o.args = wargs
	if len(o.roots) == 0 {
		o.roots = []string{"/"} // the container's tools and exec, without a mapping to judge
	}
	return nil
}

// fromEntry takes the workload, namespace, container, helper and mappings of the named entry
// of the nearest livesync.yaml, when there is one with that name.
func (o *CheckOptions) fromEntry(name string) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	path, err := project.Find(wd)
	if errors.Is(err, project.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	f, err := project.Load(path)
	if err != nil {
		return err
	}
	s, err := f.Entry(name)
	if err != nil {
		return nil // not an entry: a pod's name
	}
	if s.Selector != "" {
		o.args, o.target.selector = nil, s.Selector
	} else {
		o.args = []string{s.Workload}
	}
	o.args = append(o.args, s.Mappings...)
	if s.Namespace != "" && o.g.namespace == "" {
		o.g.namespace = s.Namespace
	}
	if len(o.target.containers) == 0 {
		o.target.containers = s.Containers
	}
	if s.Helper != "" {
		o.helper.Helper = s.Helper
	}
	return nil
}

// Run collects the verdicts and prints them.
func (o *CheckOptions) Run(ctx context.Context) error {
	w, err := workload.ResolveTarget(o.g.builder(), o.g.namespace, o.args, o.target.selector)
	if err != nil {
		return o.g.withNearNames(err)
	}
	ns := w.Namespace
	var vs []check.Verdict
	group, resource := "", "pods"
	if w.Info != nil && w.Info.Mapping != nil {
		group, resource = w.Info.Mapping.Resource.Group, w.Info.Mapping.Resource.Resource
	}
	vs = append(vs, check.RBAC(ctx, o.g.client, ns, check.Needs(group, resource)))
	pod, container, why := o.pick(ctx, w)
	if pod == nil {
		vs = append(vs, check.Verdict{Check: "exec", Status: check.Warn, Detail: why, Fix: "start the workload, then check again: the sync waits for a running pod anyway"})
	} else {
		t := remote.Target{Namespace: ns, Pod: pod.Name, Container: container}
		restCfg, err := o.g.restConfig()
		if err != nil {
			return err
		}
		vs = append(vs, check.Container(ctx, &workload.PodExecutor{Config: restCfg, Client: o.g.client, ExecPerBatch: true}, t, o.roots, o.helper.Helper)...)
		helper, level := check.Helper(ctx, &workload.Helpers{Client: o.g.client, Image: o.helper.HelperImage}, t, o.helper.Helper)
		vs = append(vs, check.PodSecurity(ctx, o.g.client, ns, level), helper)
	}
	vs = append(vs, o.imageVerdict(ctx, w))
	if err := o.print(w, vs); err != nil {
		return err
	}
	if check.Failed(vs) {
		return errChecksFailed
	}
	return nil
}

// errChecksFailed is check's exit 1: the lines above say what failed and how to fix it.
var errChecksFailed = errors.New("some checks failed: see the fixes above")

// pick chooses the running pod and container a session would sync into first.
func (o *CheckOptions) pick(ctx context.Context, w *workload.Workload) (*corev1.Pod, string, string) {
	name, err := w.SyncContainer(firstOr(o.target.containers), io.Discard)
	if err != nil {
		return nil, "", err.Error()
	}
	pods, err := w.Pods(ctx, o.g.client)
	if err != nil {
		return nil, "", err.Error()
	}
	for i := range pods {
		if st := workload.ContainerStatus(&pods[i], name, false); st != nil && st.State.Running != nil {
			return &pods[i], name, ""
		}
	}
	return nil, "", fmt.Sprintf("no pod of %s runs container %q now: exec, tools and the helper can't be checked", w.Ref(), name)
}

func firstOr(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// imageVerdict is inspect's verdict of the synced containers in one line.
func (o *CheckOptions) imageVerdict(ctx context.Context, w *workload.Workload) check.Verdict {
	v := check.Verdict{Check: "image"}
	cs, err := w.Images(o.target.containers, nil)
	if err == nil {
		var res inspect.Resolver
		if res, err = o.registry.resolverFor(ctx, o.g, w); err == nil {
			var rep *inspect.Report
			if rep, err = inspect.Build(ctx, o.g.client, res, w, cs, inspect.Options{ServerVersion: o.g.serverVersion()}); err == nil {
				var lines []string
				v.Status = check.OK
				for _, c := range rep.Containers {
					lines = append(lines, fmt.Sprintf("%s: %s", c.Name, c.Verdict))
					if c.Stale() {
						v.Status, v.Fix = check.Warn, "kubectl livesync refresh "+w.Ref()+" pins the tag's new digest"
					}
				}
				v.Detail = strings.Join(lines, "; ")
				return v
			}
		}
	}
	return check.Verdict{Check: "image", Status: check.Warn, Detail: "cannot tell which image the replicas run: " + err.Error(), Fix: "kubectl livesync inspect " + w.Ref() + " says more"}
}

func (o *CheckOptions) print(w *workload.Workload, vs []check.Verdict) error {
	if o.output == "json" {
		enc := json.NewEncoder(o.g.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Workload string          `json:"workload"`
			Verdicts []check.Verdict `json:"verdicts"`
		}{w.Namespace + "/" + w.Ref(), vs})
	}
	for _, v := range vs {
		line := fmt.Sprintf("%-4s %-12s %s", v.Status, v.Check, v.Detail)
		if v.Fix != "" && v.Status != check.OK {
			line += ": " + v.Fix
		}
		writeln(o.g.Out, "%s", line)
	}
	return nil
}
