package workload

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

// MinFollowInterval is the shortest registry polling interval --interval accepts: a registry
// is a shared service, and a tag moves at the speed of a build, not of a poll.
const MinFollowInterval = time.Second

// CheckFollowInterval is the one check of --interval, for refresh --watch and --follow-tag.
func CheckFollowInterval(d time.Duration) error {
	if d < MinFollowInterval {
		return fmt.Errorf("--interval %s is too short: use %s or more", d, MinFollowInterval)
	}
	return nil
}

// Follow calls fn every interval until ctx ends. An error from fn goes to warn (unless ctx
// ended, which is how following stops) and the next tick tries again: a registry or
// apiserver that is briefly away must not end a session. A nil clk means the real clock.
func Follow(ctx context.Context, clk clock.WithTicker, interval time.Duration, fn func(context.Context) error, warn func(error)) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	tick := clk.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		if ctx.Err() != nil {
			return // a tick and the end came together: the end wins
		}
		if err := fn(ctx); err != nil && ctx.Err() == nil && warn != nil {
			warn(err)
		}
	}
}
