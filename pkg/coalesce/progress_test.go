package coalesce

import (
	"context"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func newAdaptive(fc *clocktesting.FakeClock) *coalescer {
	return &coalescer{clk: fc, quiet: DefaultQuiet, cap: DefaultCap,
		adapt: &adaptiveQuiet{min: MinAdaptiveQuiet, max: MaxAdaptiveQuiet}}
}

// dueAfter steps the fake clock a millisecond at a time until c is due
// and returns how long that took; at most limit.
func dueAfter(t *testing.T, fc *clocktesting.FakeClock, c *coalescer, limit time.Duration) time.Duration {
	t.Helper()
	start := fc.Now()
	for !c.due() {
		if fc.Now().Sub(start) >= limit {
			t.Fatalf("not due within %s", limit)
		}
		fc.Step(time.Millisecond)
	}
	return fc.Now().Sub(start)
}

func paths(b *Batch) []string {
	var out []string
	for p := range b.Paths {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// TestProgressPolicy: how the progress of changes decides when a batch is
// cut, in the adaptive mode.
func TestProgressPolicy(t *testing.T) {
	tests := []struct {
		name    string
		changes []Change
		// wait is how long after the last change the batch is due; want
		// its paths; held the paths left held after it.
		wait time.Duration
		want []string
	}{
		{name: "a closed file after idle goes after CompleteSettle",
			changes: []Change{{Path: "/a", Progress: Complete}}, wait: CompleteSettle, want: []string{"/a"}},
		{name: "a file modified and then closed goes after CompleteSettle",
			changes: []Change{{Path: "/a", Progress: Writing}, {Path: "/a", Progress: Writing}, {Path: "/a", Progress: Complete}},
			wait:    CompleteSettle, want: []string{"/a"}},
		{name: "an editor's atomic save: renamed away, written, closed, moved in",
			changes: []Change{{Path: "/a", Progress: Unknown}, {Path: "/a", Progress: Writing}, {Path: "/a", Progress: Complete}, {Path: "/a~", Progress: Complete}},
			wait:    CompleteSettle, want: []string{"/a", "/a~"}},
		{name: "a removal keeps the window",
			changes: []Change{{Path: "/a", Progress: Unknown}}, wait: MinAdaptiveQuiet, want: []string{"/a"}},
		{name: "a removal beside a save keeps the window",
			changes: []Change{{Path: "/a", Progress: Complete}, {Path: "/b", Progress: Unknown}}, wait: MinAdaptiveQuiet, want: []string{"/a", "/b"}},
		{name: "a Rescan keeps the window",
			changes: []Change{{Path: "/a", Progress: Complete}, {Root: "/", Rescan: true}}, wait: MinAdaptiveQuiet, want: []string{"/a"}},
		{name: "a file still written stays out of the batch",
			changes: []Change{{Path: "/a", Progress: Complete}, {Path: "/log", Progress: Writing}}, wait: CompleteSettle, want: []string{"/a"}},
		{name: "a file written again after its close stays out",
			changes: []Change{{Path: "/a", Progress: Complete}, {Path: "/b", Progress: Complete}, {Path: "/a", Progress: Writing}}, wait: CompleteSettle, want: []string{"/b"}},
		{name: "a file still written is sent at the cap",
			changes: []Change{{Path: "/log", Progress: Writing}}, wait: DefaultCap, want: []string{"/log"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
			c := newAdaptive(fc)
			for _, ch := range tt.changes {
				c.add(ch)
			}
			if got := dueAfter(t, fc, c, 2*DefaultCap); got != tt.wait {
				t.Errorf("due %s after the last change, want %s", got, tt.wait)
			}
			if got := paths(c.take(false)); !slices.Equal(got, tt.want) {
				t.Errorf("batch = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestProgressHeldUntilClose: a held file joins the batch its close opens;
// a held file is cut at the cap from its first change, not from later ones.
func TestProgressHeldUntilClose(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c := newAdaptive(fc)
	c.add(Change{Path: "/big", Progress: Writing})
	if c.due() {
		t.Fatal("a file still written is due")
	}
	fc.Step(300 * time.Millisecond) // idle: no cut for a long while
	c.add(Change{Path: "/big", Progress: Writing})
	fc.Step(300 * time.Millisecond)
	c.add(Change{Path: "/big", Progress: Complete})
	closed := fc.Now()
	if got := dueAfter(t, fc, c, time.Second); got != CompleteSettle {
		t.Fatalf("closed after idle: due after %s, want %s", got, CompleteSettle)
	}
	b := c.take(false)
	if got := paths(b); !slices.Equal(got, []string{"/big"}) || b.First != closed {
		t.Fatalf("batch = %v first %v, want /big from its close", got, b.First)
	}
	if len(c.held) != 0 {
		t.Fatalf("still held: %v", c.held)
	}

	fc.Step(time.Second)
	start := fc.Now()
	c.add(Change{Path: "/log", Progress: Writing})
	for i := 0; i < 9; i++ {
		fc.Step(100 * time.Millisecond)
		c.add(Change{Path: "/log", Progress: Writing})
		if c.due() {
			t.Fatalf("due %s after the first write, want the cap", fc.Now().Sub(start))
		}
	}
	fc.Step(100 * time.Millisecond)
	if !c.due() {
		t.Fatal("not due at the cap")
	}
	if b := c.take(false); !slices.Equal(paths(b), []string{"/log"}) || b.First != start {
		t.Fatalf("batch = %v first %v, want /log from %v", paths(b), b.First, start)
	}
}

// TestProgressBurstKeepsWindow: right after a cut, a Complete change waits
// for a window: a burst is still cut into a few large batches. A batch cut
// on save-complete doesn't widen the window after it: the rest of a burst
// that began with one waits the shortest window, then the windows widen.
func TestProgressBurstKeepsWindow(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c := newAdaptive(fc)
	c.add(Change{Path: "/a", Progress: Complete})
	if got := dueAfter(t, fc, c, time.Second); got != CompleteSettle {
		t.Fatalf("after idle: due after %s, want %s", got, CompleteSettle)
	}
	c.take(false)
	var got []time.Duration
	for _, p := range []string{"/b", "/c", "/d"} {
		fc.Step(time.Millisecond)
		c.add(Change{Path: p, Progress: Complete})
		got = append(got, dueAfter(t, fc, c, time.Second))
		c.take(false)
	}
	want := []time.Duration{MinAdaptiveQuiet, 2 * MinAdaptiveQuiet, 4 * MinAdaptiveQuiet}
	if !slices.Equal(got, want) {
		t.Errorf("in a burst: windows %v, want %v", got, want)
	}
	fc.Step(MaxAdaptiveQuiet) // idle again
	c.add(Change{Path: "/e", Progress: Complete})
	if got := dueAfter(t, fc, c, time.Second); got != CompleteSettle {
		t.Errorf("idle again: due after %s, want %s", got, CompleteSettle)
	}
}

// TestProgressIgnoredWithoutAdaptive: with a fixed window (an exec per
// batch) progress changes nothing.
func TestProgressIgnoredWithoutAdaptive(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c := &coalescer{clk: fc, quiet: DefaultQuiet, cap: DefaultCap}
	c.add(Change{Path: "/a", Progress: Complete})
	c.add(Change{Path: "/b", Progress: Writing})
	if got := dueAfter(t, fc, c, time.Second); got != DefaultQuiet {
		t.Errorf("due after %s, want %s", got, DefaultQuiet)
	}
	if got := paths(c.take(false)); !slices.Equal(got, []string{"/a", "/b"}) {
		t.Errorf("batch = %v", got)
	}
}

// TestRunProgress: through Run, a Complete change after idle comes out
// CompleteSettle later while a file still written stays held; the held file
// comes out at its cap.
func TestRunProgress(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	clk := &armCountingClock{FakeClock: fc}
	in := make(chan Change)
	out, _ := Run(ctx, clk, Options{Quiet: DefaultQuiet, Cap: DefaultCap, Adaptive: true}, in)
	in <- Change{Path: "/log", Progress: Writing}
	in <- Change{Path: "/a", Progress: Complete}
	clk.waitArmed(t, 2)
	fc.Step(CompleteSettle)
	if got := paths(<-out); !slices.Equal(got, []string{"/a"}) {
		t.Fatalf("batch = %v, want /a alone", got)
	}
	fc.Step(DefaultCap - CompleteSettle)
	if got := paths(<-out); !slices.Equal(got, []string{"/log"}) {
		t.Fatalf("batch = %v, want /log at its cap", got)
	}
	close(in)
	if b, ok := <-out; ok {
		t.Fatalf("batch %v after the end of input, want none", paths(b))
	}
}

// TestReplay: what Run cuts, replayed from times.
func TestReplay(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int, p string, pr Progress) Timed {
		return Timed{At: t0.Add(time.Duration(ms) * time.Millisecond), Change: Change{Path: p, Progress: pr}}
	}
	changes := []Timed{
		at(0, "/a", Writing), at(1, "/a", Complete), // a save: cut at 2
		at(500, "/b", Unknown), at(505, "/b", Complete), // an atomic save: cut at its close
		at(520, "/c", Complete), at(530, "/d", Complete), // a burst after a cut on save-complete: a window of 10 ms
	}
	var got [][]string
	var cuts []time.Duration
	for _, b := range Replay(Options{Quiet: DefaultQuiet, Cap: DefaultCap, Adaptive: true}, changes) {
		got = append(got, paths(b.Batch))
		cuts = append(cuts, b.At.Sub(t0))
	}
	want := [][]string{{"/a"}, {"/b"}, {"/c"}, {"/d"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches = %v, want %v", got, want)
	}
	ms := time.Millisecond
	if wantCuts := []time.Duration{2 * ms, 506 * ms, 530 * ms, 550 * ms}; !slices.Equal(cuts, wantCuts) {
		t.Errorf("cut at %v, want %v", cuts, wantCuts)
	}
	if n := len(Replay(Options{Quiet: DefaultQuiet, Cap: DefaultCap}, changes)); n != 2 {
		t.Errorf("fixed 50 ms window: %d batches, want 2", n)
	}
}

// TestRunWrittenAgainBeforeTaken: a batch released but not yet taken gives
// up a path that is being written again; the path comes back with its close.
func TestRunWrittenAgainBeforeTaken(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	clk := &armCountingClock{FakeClock: fc}
	in := make(chan Change)
	out, _ := Run(ctx, clk, Options{Quiet: DefaultQuiet, Cap: DefaultCap, Adaptive: true}, in)
	in <- Change{Path: "/a", Progress: Complete}
	clk.waitArmed(t, 1)
	fc.Step(CompleteSettle)
	waitReleased(t, fc) // released; nobody took it
	in <- Change{Path: "/a", Progress: Writing}
	clk.waitArmed(t, 2) // held: its cap is armed
	in <- Change{Path: "/a", Progress: Complete}
	clk.waitArmed(t, 3)
	assertHeld(t, fc, out, "right after the close, in a burst")
	fc.Step(MinAdaptiveQuiet)
	b := <-out
	if got := paths(b); !slices.Equal(got, []string{"/a"}) {
		t.Fatalf("batch = %v, want /a", got)
	}
	if b.First != time.Unix(1000, 0).Add(CompleteSettle) {
		t.Errorf("batch from %v, want its change after the first batch was given up", b.First)
	}
	close(in)
	if b, ok := <-out; ok {
		t.Fatalf("a second batch %v: the first one was given up, /a goes once", paths(b))
	}
}
