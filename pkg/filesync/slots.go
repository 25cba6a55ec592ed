package filesync

import (
	"context"
	"io"

	"k8s.io/utils/clock"
)

// boundedExecutor limits concurrent execs across all targets and bounds each
// one by its limit, which starts once the exec has its slot.
type boundedExecutor struct {
	Executor
	sem   chan struct{}
	clk   clock.Clock
	limit limit
}

// newBoundedExecutor returns an executor with n slots of its own, each exec
// bounded by l.
func newBoundedExecutor(ex Executor, n int, clk clock.Clock, l limit) *boundedExecutor {
	return &boundedExecutor{Executor: ex, sem: make(chan struct{}, n), clk: clk, limit: l}
}

// within returns b with another limit, sharing b's slots.
func (b *boundedExecutor) within(l limit) *boundedExecutor {
	c := *b
	c.limit = l
	return &c
}

func (b *boundedExecutor) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-b.sem }()
	return execWithin(ctx, b.clk, b.limit, b.Executor, t, argv, stdin, stdout, stderr)
}
