package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/utils/clock"
)

// RevertGrace is how long refresh and pull-policy watch the workload after their write for
// another writer changing what they set: a reconciler that reverts drift (Argo CD's self-heal,
// Flux with a short interval) does it within seconds of the write it sees. A revert later than
// that is still seen by inspect and by a session following the tag.
const RevertGrace = 5 * time.Second

// ErrReverted means another writer changed a field livesync had just set.
var ErrReverted = errors.New("the pin did not hold")

// Revert is a field livesync set that another writer changed after it.
type Revert struct {
	Container Container
	Field     string
	// Manager is the field manager that owns the field now ("" when managedFields do not say).
	Manager string
	// After is the time from livesync's write to the change being seen.
	After time.Duration
	// Now is the field's value now.
	Now string
}

// String reads `container "app" image reverted by kustomize-controller 4s after the pin (now
// app:dev)`.
func (r Revert) String() string {
	by := r.Manager
	if by == "" {
		by = "another writer"
	}
	now := r.Now
	if now == "" {
		now = "unset"
	}
	return fmt.Sprintf("%s %s reverted by %s %s after the pin (now %s)", r.Container.Label(), r.Field, by, r.After.Round(time.Second), now)
}

// watchFunc opens a watch of the one workload from resourceVersion; a seam for tests.
type watchFunc func(ctx context.Context, resourceVersion string) (watch.Interface, error)

// Reverts checks a workload read after the patch for fields of the patch's changes that
// someone else changed since, at after from the write. A field that no longer holds what
// livesync set, and that livesync no longer owns, was written by another manager.
func (p *Patch) Reverts(now *Workload, after time.Duration) []Revert {
	var out []Revert
	for _, c := range p.Changes {
		cur, ok := now.find(c.Container)
		if !ok {
			continue
		}
		check := func(field, set, is string) {
			if set == "" || set == is {
				return
			}
			r := Revert{Container: c.Container, Field: field, After: after, Now: is}
			for _, o := range now.FieldOwners(c.Container, field) {
				if o.Manager != FieldManager {
					r.Manager = o.Manager
					break
				}
			}
			out = append(out, r)
		}
		check(FieldImage, c.Image, cur.Image)
		check(FieldPullPolicy, c.PullPolicy, cur.PullPolicy)
	}
	return out
}

// WatchReverts watches the workload from the patch's write (Apply keeps the resourceVersion
// it left, so a change made before the call is seen too) for grace, and returns the first
// reverts seen; none when nobody changed what the patch set. Call it right after Apply. A nil
// clock is the real one.
func (p *Patch) WatchReverts(ctx context.Context, grace time.Duration, clk clock.Clock) ([]Revert, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if p.appliedVersion == "" {
		return nil, nil
	}
	start := clk.Now()
	open := p.watch
	if open == nil {
		w := p.Workload
		h := resource.NewHelper(w.Info.Client, w.Info.Mapping)
		open = func(_ context.Context, rv string) (watch.Interface, error) {
			return h.WatchSingle(w.Namespace, w.Name, rv)
		}
	}
	wi, err := open(ctx, p.appliedVersion)
	if err != nil {
		return nil, fmt.Errorf("watching %s for a revert: %w", p.Workload.Ref(), err)
	}
	defer wi.Stop()
	timeout := clk.After(grace)
	for {
		select {
		case <-ctx.Done():
			return nil, nil
		case <-timeout:
			return nil, nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return nil, nil // the server ended the watch early; what it saw so far was no revert
			}
			if ev.Type != watch.Modified {
				continue
			}
			now, err := FromObject(ev.Object)
			if err != nil {
				continue
			}
			if r := p.Reverts(now, clk.Since(start)); len(r) > 0 {
				return r, nil
			}
		}
	}
}

// RevertedError is the one-line error of reverts: what, by whom, and what to do.
func RevertedError(w *Workload, reverts []Revert) error {
	msg := reverts[0].String()
	if len(reverts) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(reverts)-1)
	}
	hold := "hold the writer that owns it"
	if o := ownerOfManager(reverts[0].Manager); o != nil {
		if wo := w.Owner(nil); wo != nil && wo.Tool == o.Tool {
			o = wo
		} else {
			o.explain()
		}
		if o.Hold != "" {
			hold = fmt.Sprintf("hold it with %q", o.Hold)
		}
	}
	return fmt.Errorf("%s: %s: %w: %s, then run again", w.Ref(), msg, ErrReverted, hold)
}
