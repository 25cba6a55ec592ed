package coalesce

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestAdaptiveQuiet(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c := &coalescer{clk: fc, quiet: DefaultQuiet, cap: DefaultCap,
		adapt: &adaptiveQuiet{min: MinAdaptiveQuiet, max: MaxAdaptiveQuiet}}
	// cutAfter adds one change and steps until the batch is due, returning
	// the window it got.
	cutAfter := func() time.Duration {
		t.Helper()
		c.add(Change{Path: "/src/a"})
		start := fc.Now()
		for !c.due() {
			fc.Step(time.Millisecond)
		}
		c.take(false)
		return fc.Now().Sub(start)
	}
	if w := cutAfter(); w != MinAdaptiveQuiet {
		t.Errorf("after idle: window %s, want %s", w, MinAdaptiveQuiet)
	}
	// Changes that keep coming right after each cut widen the window.
	var got []time.Duration
	for range 6 {
		fc.Step(time.Millisecond)
		got = append(got, cutAfter())
	}
	want := []time.Duration{20, 40, 80, 160, 200, 200}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Errorf("continuous stream: windows %v, want %v ms", got, want)
			break
		}
	}
	// Idle again: back to the short window.
	fc.Step(MaxAdaptiveQuiet)
	if w := cutAfter(); w != MinAdaptiveQuiet {
		t.Errorf("after idle again: window %s, want %s", w, MinAdaptiveQuiet)
	}
	// The cap still bounds a batch whose changes never pause.
	fc.Step(time.Millisecond)
	c.add(Change{Path: "/src/b"})
	start := fc.Now()
	for !c.due() {
		fc.Step(5 * time.Millisecond)
		c.add(Change{Path: "/src/b"})
	}
	if d := fc.Now().Sub(start); d != DefaultCap {
		t.Errorf("continuous writes were cut after %s, want the cap %s", d, DefaultCap)
	}
}
