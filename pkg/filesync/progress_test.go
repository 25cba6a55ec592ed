package filesync

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// A start reports what it listed and hashed once it has run
// startProgressAfter, and not while its send reports its own.
func TestStartProgress(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	var got []Progress
	m := &startMeter{clk: fc, start: fc.Now(), target: Target{Pod: "web-1"}, report: func(p Progress) { got = append(got, p) }}
	m.Walked.Add(700)
	m.tick()
	fc.Step(startProgressAfter - time.Millisecond)
	m.tick()
	if len(got) != 0 {
		t.Fatalf("reported before %s: %+v", startProgressAfter, got)
	}
	fc.Step(time.Millisecond)
	m.remote.Add(300)
	m.Hashed.Add(40)
	m.tick()
	if len(got) != 1 || !got[0].Start || got[0].Listed != 1000 || got[0].Hashed != 40 || got[0].Elapsed != startProgressAfter || got[0].Target.Pod != "web-1" {
		t.Fatalf("after %s: %+v, want one report of 1000 listed, 40 hashed", startProgressAfter, got)
	}
	m.sending.Store(true)
	fc.Step(time.Second)
	m.tick()
	if len(got) != 1 {
		t.Fatalf("reported during the send: %+v", got[1:])
	}
}
