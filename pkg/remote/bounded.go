package remote

import (
	"context"
	"io"

	"k8s.io/utils/clock"
)

// Bounded limits concurrent execs across all targets and bounds each
// one by its limit, which starts once the exec has its slot.
type Bounded struct {
	Executor
	sem   chan struct{}
	clk   clock.Clock
	limit Limit
}

// NewBounded returns an executor with n slots of its own, each exec
// bounded by l.
func NewBounded(ex Executor, n int, clk clock.Clock, l Limit) *Bounded {
	return &Bounded{Executor: ex, sem: make(chan struct{}, n), clk: clk, limit: l}
}

// Within returns b with another limit, sharing b's slots.
func (b *Bounded) Within(l Limit) *Bounded {
	c := *b
	c.limit = l
	return &c
}

// Exec waits for a slot, then runs argv within b's limit (see ExecWithin).
func (b *Bounded) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-b.sem }()
	return ExecWithin(ctx, b.clk, b.limit, b.Executor, t, argv, stdin, stdout, stderr)
}
