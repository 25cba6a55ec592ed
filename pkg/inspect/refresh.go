package inspect

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/client-go/kubernetes"

	"github.com/livesync-dev/kubectl-livesync/pkg/image"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// RefreshAction is refresh's decision for one container.
type RefreshAction int

const (
	// RefreshCurrent: the spec and every pod are on what the tag serves now.
	RefreshCurrent RefreshAction = iota
	// RefreshMoved: the tag moved; the container is pinned to the digest it serves now.
	RefreshMoved
	// RefreshUntagged: the image is a bare digest, with no tag to follow.
	RefreshUntagged
)

// RefreshStep is refresh's decision for one container or image volume, with the line that
// tells the user.
type RefreshStep struct {
	// Container is the container's name, or "volume/NAME" for an image volume (its Key).
	Container string
	Action    RefreshAction
	// Pin is the image refresh writes (repo:tag@sha256:…); "" when the spec already has it,
	// and only the rollout is behind.
	Pin     string
	Message string
}

// RefreshPlan is what refresh does to one workload. Commands print Lines and apply Patch, or
// only wait when RolloutBehind.
type RefreshPlan struct {
	Workload *workload.Workload
	Steps    []RefreshStep
	// Changes pin the moved containers whose spec does not pin the new digest yet.
	Changes []workload.Change
	// Digests maps each moved container to the digest its pods must end up running (image
	// volumes are not in it: a bare Pod's volumes cannot change).
	Digests map[string]string
	// moved reports that some container or image volume moved.
	moved bool
}

// PlanRefresh resolves the tag of each chosen container and image volume (workload.Images:
// all when neither is named) with res and decides what moved and what to pin, all in one
// patch, so one rollout. A registry error is an error: refresh must not pin on a half answer.
// Naming only images pinned to a bare digest is an error too: there is nothing to follow.
func PlanRefresh(ctx context.Context, client kubernetes.Interface, res Resolver, w *workload.Workload, containers, volumes []string) (*RefreshPlan, error) {
	cs, err := w.Images(containers, volumes)
	if err != nil {
		return nil, err
	}
	if err := w.CanRollOut(); err != nil {
		return nil, err
	}
	rep, err := Build(ctx, client, res, w, cs, Options{})
	if err != nil {
		return nil, err
	}
	p := &RefreshPlan{Workload: w, Digests: map[string]string{}}
	untagged, all := 0, rep.All()
	for _, c := range all {
		label := c.Spec.Label()
		if c.RegistryErr != nil {
			return nil, fmt.Errorf("%s: %s: %w", w.Ref(), label, c.RegistryErr)
		}
		s := RefreshStep{Container: c.Spec.Key()}
		switch {
		case c.Ref.Tag == "":
			untagged++
			s.Action = RefreshUntagged
			s.Message = fmt.Sprintf("%s: %s: image %q is pinned to a digest with no tag to follow; nothing to refresh", w.Ref(), label, c.Image)
		case !c.Stale() && c.unplaced() != "":
			s.Message = fmt.Sprintf("%s: %s: pod %s runs a digest the registry cannot place (see inspect); nothing to pin", w.Ref(), label, c.unplaced())
		case !c.Stale():
			s.Message = fmt.Sprintf("%s: %s: current, %s serves %s", w.Ref(), label, c.Ref.WithoutDigest(), Short(c.RegistryDigest))
		default:
			if c.Spec.Volume && w.Kind == workload.KindPod {
				return nil, fmt.Errorf("%s: %s: a Pod's volumes cannot be changed while it exists: refresh the workload that owns it (e.g. its Deployment)", w.Ref(), label)
			}
			s.Action = RefreshMoved
			p.moved = true
			s.Message = fmt.Sprintf("%s: %s: %s -> %s", w.Ref(), label, strings.Join(c.oldDigests(), ", "), Short(c.RegistryDigest))
			if !c.Spec.Volume {
				p.Digests[c.Name] = c.RegistryDigest
			}
			if want := c.Ref.WithDigest(c.RegistryDigest); want != c.Image {
				s.Pin = want
				p.Changes = append(p.Changes, workload.Change{Container: c.Spec, Image: want})
			}
		}
		p.Steps = append(p.Steps, s)
	}
	if untagged > 0 && untagged == len(all) && (len(containers) > 0 || len(volumes) > 0) {
		return nil, fmt.Errorf("%s: nothing to refresh: every chosen image is pinned to a digest without a tag", w.Ref())
	}
	return p, nil
}

// oldDigests returns, shortened, the digests other than the registry's that the pods run, or
// that the spec pins when no pod runs any.
func (c *Container) oldDigests() []string {
	old := c.RunningDigests()
	if len(old) == 0 && c.PinnedDigest != "" {
		old = []string{c.PinnedDigest}
	}
	var out []string
	for _, d := range old {
		if d != c.RegistryDigest {
			out = append(out, Short(d))
		}
	}
	if len(out) == 0 && c.unreported() {
		out = append(out, "(digest not reported)")
	}
	return out
}

// unplaced names the first pod whose running digest the registry could not place, or "".
func (c *Container) unplaced() string {
	for _, p := range c.Pods {
		if p.Match == image.MatchNone {
			return p.Name
		}
	}
	return ""
}

// Stale reports whether some container's tag moved.
func (p *RefreshPlan) Stale() bool { return p.moved }

// RolloutBehind reports that a tag moved but the spec already pins its new digest: there is
// nothing to patch, only a rollout to wait for.
func (p *RefreshPlan) RolloutBehind() bool { return p.Stale() && len(p.Changes) == 0 }

// Lines returns what refresh tells the user, one line each: every container's decision, then
// what it pins. quiet leaves out the lines that say nothing moved, for polling.
func (p *RefreshPlan) Lines(quiet bool) []string {
	var out []string
	for _, s := range p.Steps {
		if !quiet || s.Action != RefreshCurrent {
			out = append(out, s.Message)
		}
	}
	if !p.Stale() && !quiet {
		out = append(out, p.Workload.Ref()+": already current, nothing changed")
	}
	for _, s := range p.Steps {
		if s.Pin != "" {
			out = append(out, fmt.Sprintf("%s: pinning %s to %s", p.Workload.Ref(), workload.LabelOfKey(s.Container), s.Pin))
		}
	}
	return out
}

// Patch returns the patch that pins the moved containers and records their originals, or nil
// when there is nothing to patch.
func (p *RefreshPlan) Patch() (*workload.Patch, error) {
	if len(p.Changes) == 0 {
		return nil, nil
	}
	return workload.BuildPatch(p.Workload, p.Changes, false)
}
