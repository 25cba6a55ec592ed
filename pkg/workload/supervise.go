package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// EntrypointReader reads an image's entrypoint and cmd from its registry, for a container
// whose template sets no command.
type EntrypointReader interface {
	Entrypoint(ctx context.Context, image string) (entrypoint, cmd []string, err error)
}

// SupervisePlan is what --restart process changes in one workload: the commands it wraps in
// livesync's supervisor (see remote.SupervisorCommand).
type SupervisePlan struct {
	Workload *Workload
	Changes  []Change
	// Already names the containers whose command is livesync's supervisor already.
	Already []string
	// Argv is the command each changed container runs under the supervisor, by name, as the
	// template writes it (see escapeExpansion).
	Argv map[string][]string
	orig Originals
}

// ErrNoCommand means a container has no command to supervise: neither its template nor its
// image sets one.
var ErrNoCommand = errors.New("no command to supervise")

// PlanSupervise plans the one rollout that makes the named containers run their own command
// under livesync's supervisor, which restarts it in place when asked: the template's command
// (its args stay args), or, when the template sets none, the image's entrypoint, followed by
// the image's cmd unless the template sets args (then Kubernetes runs those instead). Each
// container's command before is recorded in OriginalAnnotation, for restore. A Pod's command
// cannot change, and a ReplicaSet does not roll out: both are refused.
func PlanSupervise(ctx context.Context, w *Workload, names []string, images EntrypointReader) (*SupervisePlan, error) {
	switch w.Kind {
	case KindPod:
		return nil, fmt.Errorf("--restart process: a running Pod's command cannot change: name the workload that owns %s (e.g. deploy/NAME)", w.Ref())
	case KindSelected:
		return nil, fmt.Errorf("--restart process changes one workload's pod template: name it as TYPE/NAME instead of -l")
	}
	if err := w.CanRollOut(); err != nil {
		return nil, err
	}
	orig, err := w.Originals()
	if err != nil {
		return nil, err
	}
	cs, err := w.Containers(names)
	if err != nil {
		return nil, err
	}
	p := &SupervisePlan{Workload: w, Argv: map[string][]string{}, orig: orig}
	for _, c := range cs {
		if c.Init {
			return nil, fmt.Errorf("--restart process: container %q of %s is an init container, which runs to its end: sync into a regular one", c.Name, w.Ref())
		}
		if _, ok := remote.Supervised(c.Command); ok {
			p.Already = append(p.Already, c.Name)
			continue
		}
		// The template's command is written the way the kubelet reads it ($(VAR) expands, $$ is
		// $) and stays so; what comes from the image or from livesync is escaped into that form.
		argv := slices.Clone(c.Command)
		if len(argv) == 0 {
			ep, cmd, err := images.Entrypoint(ctx, c.Image)
			if err != nil {
				return nil, fmt.Errorf("--restart process: reading the entrypoint of container %q's image %s: %w", c.Name, c.Image, err)
			}
			argv = slices.Clone(ep)
			if len(c.Args) == 0 {
				argv = append(argv, cmd...)
			}
			for i, a := range argv {
				argv[i] = escapeExpansion(a)
			}
		}
		if len(argv) == 0 {
			return nil, fmt.Errorf("--restart process: container %q of %s: %w: neither the pod template nor the image %s sets a command", c.Name, w.Ref(), ErrNoCommand, c.Image)
		}
		p.Argv[c.Name] = argv
		command := remote.SupervisorCommand(argv)
		command[2] = escapeExpansion(command[2])
		p.Changes = append(p.Changes, Change{Container: c, SetCommand: true, Command: command})
		rec, ok := orig[c.Name]
		if !ok {
			rec = Original{Image: c.Image, PullPolicy: c.PullPolicy, Set: &State{Image: c.Image, PullPolicy: c.PullPolicy}}
		}
		rec.Supervisor = &SupervisorRecord{Command: c.Command}
		rec.recordOwners(w, c, FieldCommand, true)
		orig[c.Name] = rec
	}
	return p, nil
}

// Patch returns the patch that installs the supervisor, or nil when every container runs it
// already.
func (p *SupervisePlan) Patch() (*Patch, error) {
	if len(p.Changes) == 0 {
		return nil, nil
	}
	return buildPatch(p.Workload, p.Changes, p.orig)
}

// escapeExpansion writes s so that the kubelet's expansion of a container's command, which
// turns $$ into $ and $(VAR) into VAR's value, gives s back.
func escapeExpansion(s string) string { return strings.ReplaceAll(s, "$", "$$") }
