package workload

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// RestoreStep is restore's decision for one recorded container.
type RestoreStep struct {
	// Container is the container as the template has it now.
	Container Container
	Original  Original
	// Change holds the fields restore puts back (empty fields stay as they are); for a
	// skipped container, what --force would put back.
	Change Change
	// Conflict says what someone else changed since livesync set it, e.g. "image changed
	// since livesync pinned it (now app:v2)"; "" when there is nothing in the way.
	Conflict string
	// Skipped reports that the container is left as is, its record kept: a conflict without
	// --force.
	Skipped bool
}

// RestorePlan is what restore does to one workload. Commands print it and apply Patch.
type RestorePlan struct {
	Workload *Workload
	// Steps are the recorded containers the template still has, sorted by name.
	Steps []RestoreStep
	// Gone names recorded containers the template no longer has; their records are dropped.
	Gone []string
}

// PlanRestore decides, per recorded container, what restore puts back. Restore undoes only
// what livesync changed: a field livesync set and nobody changed since goes back to its
// original; a field livesync never changed stays as it is. When someone else changed a field
// that livesync had set (kubectl set image after a refresh), the container is left as is and
// its record kept, so that a later --force can still restore it. With force every recorded
// original is put back, whoever changed what.
func PlanRestore(w *Workload, force bool) (*RestorePlan, error) {
	orig, err := w.Originals()
	if err != nil {
		return nil, err
	}
	all, err := w.Images(nil, nil)
	if err != nil {
		return nil, err
	}
	p := &RestorePlan{Workload: w}
	seen := map[string]bool{}
	for _, c := range all {
		o, ok := orig[c.Key()]
		if !ok {
			continue
		}
		seen[c.Key()] = true
		p.Steps = append(p.Steps, planStep(c, o, force))
	}
	for name := range orig {
		if !seen[name] {
			p.Gone = append(p.Gone, name)
		}
	}
	sort.Slice(p.Steps, func(i, j int) bool { return p.Steps[i].Container.Key() < p.Steps[j].Container.Key() })
	sort.Strings(p.Gone)
	return p, nil
}

func planStep(c Container, o Original, force bool) RestoreStep {
	cur := State{Image: c.Image, PullPolicy: c.PullPolicy}
	set := o.setFor(cur)
	imageMoved, policyMoved := cur.Image != set.Image, cur.PullPolicy != set.PullPolicy
	// A conflict is a field livesync changed that someone changed again, to anything but the
	// original (putting the original back by hand is what restore would do anyway).
	var conflicts []string
	if imageMoved && set.Image != o.Image && cur.Image != o.Image {
		conflicts = append(conflicts, fmt.Sprintf("image changed since livesync pinned it (now %s)", cur.Image))
	}
	if policyMoved && set.PullPolicy != o.PullPolicy && cur.PullPolicy != o.PullPolicy {
		conflicts = append(conflicts, fmt.Sprintf("imagePullPolicy changed since livesync set it (now %s)", policyOrDefault(cur.PullPolicy)))
	}
	// The supervisor is livesync's while the command is still one it built; a command someone
	// set since is theirs (putting the original back by hand is restore's job done).
	var unwrap bool
	if o.Supervisor != nil {
		_, wrapped := remote.Supervised(c.Command)
		switch {
		case wrapped:
			unwrap = true
		case !slices.Equal(c.Command, o.Supervisor.Command):
			conflicts = append(conflicts, fmt.Sprintf("command changed since livesync wrapped it in its supervisor (now %s)", quoteArgv(c.Command)))
		}
	}
	s := RestoreStep{Container: c, Original: o, Change: Change{Container: c}, Conflict: strings.Join(conflicts, " and ")}
	s.Skipped = s.Conflict != "" && !force
	// Without force a field someone else changed is theirs and stays; with force, and for a
	// skipped step (Change is then what --force would do), every recorded field goes back.
	all := force || s.Skipped
	if (all || !imageMoved) && cur.Image != o.Image {
		s.Change.Image = o.Image
	}
	if (all || !policyMoved) && o.PullPolicy != "" && cur.PullPolicy != o.PullPolicy {
		s.Change.PullPolicy = o.PullPolicy
	}
	if o.Supervisor != nil && (unwrap || (all && !slices.Equal(c.Command, o.Supervisor.Command))) {
		s.Change.SetCommand, s.Change.Command = true, o.Supervisor.Command
	}
	return s
}

// quoteArgv shows a command for a message: its words quoted, or "none" when unset.
func quoteArgv(argv []string) string {
	if argv == nil {
		return "none"
	}
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = fmt.Sprintf("%q", a)
	}
	return "[" + strings.Join(q, " ") + "]"
}

func policyOrDefault(p string) string {
	if p == "" {
		return "unset"
	}
	return p
}

// Empty reports that nothing was recorded.
func (p *RestorePlan) Empty() bool { return len(p.Steps) == 0 && len(p.Gone) == 0 }

// Changes returns the changes of the containers restored, leaving out those already at their
// originals.
func (p *RestorePlan) Changes() []Change {
	var out []Change
	for _, s := range p.Steps {
		if !s.Skipped && !s.Change.empty() {
			out = append(out, s.Change)
		}
	}
	return out
}

// Kept returns the records that stay in the annotation: those of skipped containers.
func (p *RestorePlan) Kept() Originals {
	out := Originals{}
	for _, s := range p.Steps {
		if s.Skipped {
			out[s.Container.Key()] = s.Original
		}
	}
	return out
}

// Patch returns the patch that applies the plan: the restored fields, and the annotation
// reduced to the kept records (removed when none is kept). It returns nil when the plan
// changes nothing: every recorded container is skipped.
func (p *RestorePlan) Patch() (*Patch, error) {
	kept := p.Kept()
	if len(p.Gone) == 0 && len(kept) == len(p.Steps) {
		return nil, nil
	}
	patch, err := buildPatch(p.Workload, p.Changes(), kept)
	if err != nil {
		return nil, err
	}
	patch.handBacks, patch.restoring = p.handBacks(), true
	return patch, nil
}
