package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
	// Argv is the command each changed container runs under the supervisor, by name.
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
		}
		if len(argv) == 0 {
			return nil, fmt.Errorf("--restart process: container %q of %s: %w: neither the pod template nor the image %s sets a command", c.Name, w.Ref(), ErrNoCommand, c.Image)
		}
		p.Argv[c.Name] = argv
		p.Changes = append(p.Changes, Change{Container: c, SetCommand: true, Command: remote.SupervisorCommand(argv)})
		rec, ok := orig[c.Name]
		if !ok {
			rec = Original{Image: c.Image, PullPolicy: c.PullPolicy, Set: &State{Image: c.Image, PullPolicy: c.PullPolicy}}
		}
		rec.Supervisor = &SupervisorRecord{Command: c.Command}
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
