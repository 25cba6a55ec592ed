package coalesce

import (
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// Timed is a change and when it arrived.
type Timed struct {
	At time.Time
	Change
}

// Cut is a batch Replay cut, and when.
type Cut struct {
	*Batch
	At time.Time
}

// Replay returns the batches Run would cut from changes arriving at their
// times (in order) with a consumer that takes each batch at once. The bench
// uses it to count the batches real operations are cut into.
func Replay(opts Options, changes []Timed) []Cut {
	if len(changes) == 0 {
		return nil
	}
	clk := clocktesting.NewFakePassiveClock(changes[0].At)
	c := &coalescer{clk: clk, quiet: opts.Quiet, cap: opts.Cap}
	if opts.Adaptive {
		c.adapt = &adaptiveQuiet{min: MinAdaptiveQuiet, max: MaxAdaptiveQuiet}
	}
	var out []Cut
	cutUntil := func(t time.Time) {
		for {
			d, ok := c.deadline()
			if !ok || d.After(t) {
				return
			}
			if d.After(clk.Now()) {
				clk.SetTime(d)
			}
			if b := c.take(false); b != nil {
				out = append(out, Cut{Batch: b, At: clk.Now()})
			}
		}
	}
	for _, ch := range changes {
		cutUntil(ch.At)
		if ch.At.After(clk.Now()) {
			clk.SetTime(ch.At)
		}
		c.add(ch.Change)
	}
	cutUntil(time.Unix(1<<40, 0))
	return out
}
