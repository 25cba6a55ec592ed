package coalesce

import (
	"context"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testwait"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestCoalescer(t *testing.T) {
	tests := []struct {
		name string
		// writes at these offsets from the start (ms); the batch must not be
		// due before dueAt and must be due at it.
		writes []int
		dueAt  int
	}{
		{name: "single write waits for quiet", writes: []int{0}, dueAt: 50},
		{name: "quiet restarts on each write", writes: []int{0, 30, 60}, dueAt: 110},
		{name: "continuous writes hit the cap", writes: seq(0, 2000, 20), dueAt: 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clocktesting.NewFakeClock(time.Unix(0, 0))
			c := &coalescer{clk: fc, quiet: 50 * time.Millisecond, cap: time.Second}
			now := 0
			for _, w := range tt.writes {
				if w >= tt.dueAt {
					break
				}
				fc.Step(time.Duration(w-now) * time.Millisecond)
				now = w
				if c.due() {
					t.Fatalf("due at %dms, want %dms", now, tt.dueAt)
				}
				c.add(Change{Path: "/src/a"})
			}
			fc.Step(time.Duration(tt.dueAt-now-1) * time.Millisecond)
			if c.due() {
				t.Fatalf("due at %dms, want %dms", tt.dueAt-1, tt.dueAt)
			}
			fc.Step(time.Millisecond)
			if !c.due() {
				t.Fatalf("not due at %dms", tt.dueAt)
			}
			b := c.take(false)
			if b.First != time.Unix(0, 0) || len(b.Paths) != 1 {
				t.Errorf("batch = %+v", b)
			}
		})
	}
}

func seq(from, to, step int) []int {
	var out []int
	for i := from; i < to; i += step {
		out = append(out, i)
	}
	return out
}

func TestCoalesce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fc := clocktesting.NewFakeClock(time.Unix(0, 0))
	clk := &armCountingClock{FakeClock: fc}
	in := make(chan Change)
	out, _ := Run(ctx, clk, Options{Quiet: 50 * time.Millisecond, Cap: time.Second}, in)

	in <- Change{Root: "/src", Path: "/src/a"}
	in <- Change{Root: "/src", Path: "/src/b"}
	in <- Change{Root: "/src", Rescan: true}
	// A send returns when the coalescer received the change, before it
	// stamped it and armed its timer: stepping the clock earlier would move
	// the quiet window and the release below would never come.
	clk.waitArmed(t, 3)
	fc.Step(49 * time.Millisecond)
	assertHeld(t, fc, out, "49ms after the last change")
	fc.Step(time.Millisecond)
	b := <-out
	if len(b.Paths) != 2 || len(b.Rescans) != 1 || b.Changes != 3 {
		t.Fatalf("batch = %+v", b)
	}

	// While the consumer is busy, a released batch absorbs new changes.
	in <- Change{Path: "/src/c"}
	testwait.Waiters(t, fc, 1)
	fc.Step(50 * time.Millisecond)
	waitReleased(t, fc)
	in <- Change{Path: "/src/d"} // arrives while batch {c} waits for us
	b = <-out
	if len(b.Paths) != 2 {
		t.Fatalf("batch = %v, want c and d", b.Paths)
	}

	// Closing the input flushes what is pending.
	in <- Change{Path: "/src/e"}
	close(in)
	if b := <-out; len(b.Paths) != 1 {
		t.Fatalf("flushed batch = %v", b.Paths)
	}
	if _, ok := <-out; ok {
		t.Fatal("output not closed")
	}
}

// armCountingClock counts how often the coalescer armed its timer (a new
// timer or a Reset), so a test knows every change it sent was stamped.
type armCountingClock struct {
	*clocktesting.FakeClock
	arms atomic.Int32
}

func (c *armCountingClock) NewTimer(d time.Duration) clock.Timer {
	c.arms.Add(1)
	return &armCountingTimer{Timer: c.FakeClock.NewTimer(d), arms: &c.arms}
}

type armCountingTimer struct {
	clock.Timer
	arms *atomic.Int32
}

func (t *armCountingTimer) Reset(d time.Duration) bool {
	ok := t.Timer.Reset(d)
	t.arms.Add(1)
	return ok
}

// waitArmed waits until the timer was armed n times in all.
func (c *armCountingClock) waitArmed(t *testing.T, n int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.arms.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the coalescer armed its timer %d times, want %d", c.arms.Load(), n)
		}
		runtime.Gosched()
	}
}

// assertHeld fails if the coalescer released a batch at the fake clock's current time. It
// waits until the coalescer's goroutine has settled: a batch still held has a timer armed on
// the clock, a released one has none (the timer is stopped on release) and waits on out.
// Without this, a check right after Step races the goroutine and an early batch goes unseen.
func assertHeld(t *testing.T, fc *clocktesting.FakeClock, out <-chan *Batch, when string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case b := <-out:
			t.Fatalf("batch released %s: %+v", when, b)
		default:
		}
		if fc.HasWaiters() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the coalescer neither released a batch nor armed its timer", when)
		}
		runtime.Gosched()
	}
}

// waitReleased waits until the coalescer released its batch: its timer is gone.
func waitReleased(t *testing.T, fc *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for fc.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the coalescer did not release its batch")
		}
		runtime.Gosched()
	}
}

// TestCoalescePeeking: an open batch hands out the paths it gained every
// peekEvery, and is still cut as before, with all of them.
func TestCoalescePeeking(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fc := clocktesting.NewFakeClock(time.Unix(0, 0))
	clk := &armCountingClock{FakeClock: fc}
	in := make(chan Change)
	out, peeks := coalescePeeking(ctx, clk, 50*time.Millisecond, time.Second, in, nil, 100*time.Millisecond)
	nextPeek := func(when string) []string {
		t.Helper()
		select {
		case p := <-peeks:
			slices.Sort(p)
			return p
		case b := <-out:
			t.Fatalf("batch released %s, want a peek: %+v", when, b)
		case <-time.After(10 * time.Second):
			t.Fatalf("no peek %s", when)
		}
		return nil
	}

	in <- Change{Path: "/src/a"}
	clk.waitArmed(t, 1)
	fc.Step(40 * time.Millisecond)
	in <- Change{Path: "/src/b"}
	in <- Change{Rescan: true, Root: "/src"} // not a path: never peeked
	clk.waitArmed(t, 3)
	fc.Step(40 * time.Millisecond)
	in <- Change{Path: "/src/c"}
	clk.waitArmed(t, 4)
	assertHeld(t, fc, out, "80ms after the first change")
	fc.Step(20 * time.Millisecond) // the peek is due before the quiet window ends
	if p := nextPeek("at 100ms"); !slices.Equal(p, []string{"/src/a", "/src/b", "/src/c"}) {
		t.Fatalf("peek = %v, want a, b and c", p)
	}
	in <- Change{Path: "/src/d"}
	clk.waitArmed(t, 6)
	fc.Step(50 * time.Millisecond)
	b := <-out
	if len(b.Paths) != 4 || len(b.Rescans) != 1 {
		t.Fatalf("batch = %+v, want all four paths and the rescan", b)
	}
	select {
	case p := <-peeks:
		t.Fatalf("peek %v after its batch was cut", p)
	default:
	}
}
