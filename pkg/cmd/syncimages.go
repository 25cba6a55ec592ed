package cmd

import (
	"context"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"

	"github.com/livesync-dev/kubectl-livesync/pkg/session"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// syncImages is the image side of a sync session (--pull-policy, --refresh, --follow-tag),
// done by the code of the pull-policy and refresh commands, its lines sent to the session's
// reporter.
type syncImages struct {
	refresher *refresher
	// pods execs in containers directly, not through a helper: --restart process checks the
	// image's own /bin/sh.
	pods remote.Executor
}

var _ session.Images = (*syncImages)(nil)

// SetPullPolicy patches policy onto the containers that lack it and waits for the rollout:
// the pull-policy command's plan, with its refusals.
func (s *syncImages) SetPullPolicy(ctx context.Context, w *workload.Workload, containers []string, policy string) error {
	plan, err := workload.PlanPullPolicy(w, containers, nil, policy)
	if err != nil {
		return err
	}
	p, err := plan.Patch()
	if err != nil || p == nil {
		return err
	}
	r := s.refresher
	line, err := w.CheckOwner(plan.Changes, false)
	if line != "" {
		r.say("%s", line)
	}
	if err != nil {
		return err
	}
	return r.mutate.apply(ctx, r.g, r.out(), p, nil)
}

// Refresh pins the containers' moved tags; quiet leaves out the "already current" lines.
func (s *syncImages) Refresh(ctx context.Context, w *workload.Workload, containers []string, quiet bool) error {
	s.refresher.containers, s.refresher.quiet = containers, quiet
	return s.refresher.refresh(ctx, w)
}
