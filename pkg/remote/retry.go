package remote

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// RetryPolicy says how often a transient failure is retried: Tries attempts in
// all, waiting Backoff, 2×Backoff, 4×Backoff… between them.
type RetryPolicy struct {
	Tries   int
	Backoff time.Duration
}

// DefaultRetry tries three times, after 100ms and 200ms.
var DefaultRetry = RetryPolicy{Tries: 3, Backoff: 100 * time.Millisecond}

// Do runs fn until it succeeds, fails with a non-transient error, the tries
// are used up or ctx is done. It returns fn's last error.
func (p RetryPolicy) Do(ctx context.Context, clk clock.Clock, fn func() error) error {
	wait := p.Backoff
	for try := 1; ; try++ {
		err := fn()
		if err == nil || try >= p.Tries || !IsTransient(err) {
			return err
		}
		t := clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C():
		}
		wait *= 2
	}
}
