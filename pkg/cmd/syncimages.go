package cmd

import (
	"context"
	"fmt"

	"github.com/livesync-dev/kubectl-livesync/pkg/session"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// syncImages is the image side of a sync session (--pull-policy, --refresh, --follow-tag),
// done by the code of the pull-policy and refresh commands, its lines sent to the session's
// reporter.
type syncImages struct {
	refresher *refresher
}

var _ session.Images = (*syncImages)(nil)

// SetPullPolicy patches policy onto the containers that lack it and waits for the rollout.
func (s *syncImages) SetPullPolicy(ctx context.Context, w *workload.Workload, containers []string, policy string) error {
	cs, err := w.Containers(containers)
	if err != nil {
		return err
	}
	var changes []workload.Change
	for _, c := range cs {
		if c.PullPolicy != policy {
			changes = append(changes, workload.Change{Container: c, PullPolicy: policy})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	if w.Kind == workload.KindPod {
		return fmt.Errorf("%s: a Pod's imagePullPolicy cannot be changed while it exists: use --pull-policy on the workload that owns it", w.Ref())
	}
	p, err := workload.BuildPatch(w, changes, false)
	if err != nil {
		return err
	}
	r := s.refresher
	return r.mutate.apply(ctx, r.g, r.out(), p, nil)
}

// Refresh pins the containers' moved tags; quiet leaves out the "already current" lines.
func (s *syncImages) Refresh(ctx context.Context, w *workload.Workload, containers []string, quiet bool) error {
	s.refresher.containers, s.refresher.quiet = containers, quiet
	return s.refresher.refresh(ctx, w)
}
