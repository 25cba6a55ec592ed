// Package coalesce cuts a stream of file changes into batches: a batch is due
// once the changes paused for a quiet window, or a cap after its first change,
// so a save becomes one batch and a continuous writer still syncs. The clock is
// injected (k8s.io/utils/clock), as in Tilt's fsevent coalescer.
package coalesce

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Change says that something at Path (absolute, under the local root Root) may
// have changed. What changed is decided by Lstat when the batch is planned.
// Rescan means events were lost and all of Root must be compared.
// pkg/session adapts watch.Event to Change.
type Change struct {
	Root, Path string
	Rescan     bool
}

// Default coalescing windows.
const (
	DefaultQuiet = 50 * time.Millisecond
	DefaultCap   = time.Second
)

// Batch is a set of coalesced changes.
type Batch struct {
	Paths   map[string]struct{} // absolute local paths
	Rescans map[string]struct{} // local roots to compare in full
	First   time.Time           // arrival of the first change, for latency
	Changes int                 // raw changes merged into this batch
}

func (b *Batch) add(c Change) {
	if c.Rescan {
		b.Rescans[c.Root] = struct{}{}
	} else {
		b.Paths[c.Path] = struct{}{}
	}
	b.Changes++
}

// coalescer cuts changes into batches: a batch is due once no change arrived
// for quiet, or cap after its first change, so a continuous stream of writes
// still syncs.
type coalescer struct {
	clk        clock.PassiveClock
	quiet, cap time.Duration
	cur        *Batch
	last       time.Time
	adapt      *adaptiveQuiet // nil: quiet is fixed (adaptive.go)

	// peekEvery, if set, is how often an open batch hands out the paths it
	// gained since the last peek (see coalescePeeking); fresh holds them, and
	// peekAt is when they are next due.
	peekEvery time.Duration
	fresh     map[string]struct{}
	peekAt    time.Time
}

func (c *coalescer) add(ch Change) {
	now := c.clk.Now()
	if c.cur == nil {
		c.cur = &Batch{Paths: map[string]struct{}{}, Rescans: map[string]struct{}{}, First: now}
		if c.adapt != nil {
			c.quiet = c.adapt.open(now)
		}
		c.peekAt = now.Add(c.peekEvery)
	}
	c.cur.add(ch)
	c.last = now
	if c.peekEvery > 0 && !ch.Rescan {
		if c.fresh == nil {
			c.fresh = map[string]struct{}{}
		}
		c.fresh[ch.Path] = struct{}{}
	}
}

// deadline returns when the current batch is due, and false without one.
func (c *coalescer) deadline() (time.Time, bool) {
	if c.cur == nil {
		return time.Time{}, false
	}
	d := c.last.Add(c.quiet)
	if capAt := c.cur.First.Add(c.cap); capAt.Before(d) {
		d = capAt
	}
	return d, true
}

// wake returns when the coalescer has something to do next: release the
// current batch or hand out a peek.
func (c *coalescer) wake() (time.Time, bool) {
	d, ok := c.deadline()
	if ok && len(c.fresh) > 0 && c.peekAt.Before(d) {
		d = c.peekAt
	}
	return d, ok
}

// peek returns the paths gained since the last peek once they are due, and
// nil before.
func (c *coalescer) peek() []string {
	now := c.clk.Now()
	if len(c.fresh) == 0 || now.Before(c.peekAt) {
		return nil
	}
	out := make([]string, 0, len(c.fresh))
	for p := range c.fresh {
		out = append(out, p)
	}
	clear(c.fresh)
	c.peekAt = now.Add(c.peekEvery)
	return out
}

// due reports whether the current batch should be released now.
func (c *coalescer) due() bool {
	d, ok := c.deadline()
	return ok && !c.clk.Now().Before(d)
}

func (c *coalescer) take() *Batch {
	b := c.cur
	c.cur = nil
	clear(c.fresh) // the batch carries them
	if c.adapt != nil && b != nil {
		c.adapt.cut(c.clk.Now())
	}
	return b
}

// Options are how Run cuts batches.
type Options struct {
	// Quiet: a batch is due once no change arrived for Quiet; Cap: at the
	// latest Cap after its first change, so a continuous stream of writes
	// still syncs.
	Quiet, Cap time.Duration
	// Adaptive chooses each batch's quiet window between MinAdaptiveQuiet and
	// MaxAdaptiveQuiet instead of Quiet (see adaptive.go).
	Adaptive bool
	// PeekEvery, if set, is how often an open batch hands out the paths it
	// gained since the last peek.
	PeekEvery time.Duration
}

// Run batches changes from in until ctx is done or in is closed (then the
// pending batch is flushed and the channels closed). While the consumer is
// busy, a released batch keeps absorbing new changes.
//
// With opts.PeekEvery set it also hands out on its second channel, every
// PeekEvery while a batch is open, the paths the batch gained since the last
// such peek. The batch itself is cut as before, with all its paths: a peek
// only lets the consumer start on them early (copies only), while a long
// burst still writes.
func Run(ctx context.Context, clk clock.Clock, opts Options, in <-chan Change) (<-chan *Batch, <-chan []string) {
	var adapt *adaptiveQuiet
	if opts.Adaptive {
		adapt = &adaptiveQuiet{min: MinAdaptiveQuiet, max: MaxAdaptiveQuiet}
	}
	return coalescePeeking(ctx, clk, opts.Quiet, opts.Cap, in, adapt, opts.PeekEvery)
}

func coalescePeeking(ctx context.Context, clk clock.Clock, quiet, capWait time.Duration, in <-chan Change, adapt *adaptiveQuiet, peekEvery time.Duration) (<-chan *Batch, <-chan []string) {
	out := make(chan *Batch)
	peeks := make(chan []string)
	go func() {
		defer close(out)
		defer close(peeks)
		c := &coalescer{clk: clk, quiet: quiet, cap: capWait, adapt: adapt, peekEvery: peekEvery}
		var (
			timer  clock.Timer
			ready  *Batch   // released, waiting for the consumer
			peeked []string // a peek waiting for the consumer
			closed bool
		)
		stop := func() {
			if timer != nil {
				timer.Stop()
				timer = nil
			}
		}
		defer stop()
		arm := func() {
			d, ok := c.wake()
			if !ok {
				stop()
				return
			}
			wait := d.Sub(clk.Now())
			if timer == nil {
				timer = clk.NewTimer(wait)
			} else {
				timer.Stop()
				timer.Reset(wait)
			}
		}
		for {
			var (
				send   chan<- *Batch
				peek   chan<- []string
				timerC <-chan time.Time
			)
			if ready != nil {
				send = out
			} else if closed {
				return
			}
			if peeked != nil {
				peek = peeks
			}
			if timer != nil {
				timerC = timer.C()
			}
			select {
			case <-ctx.Done():
				return
			case ch, ok := <-in:
				switch {
				case !ok:
					in, closed = nil, true
					if b := c.take(); b != nil {
						ready = merge(ready, b)
					}
					stop()
				case ready != nil:
					ready.add(ch)
				default:
					c.add(ch)
					arm()
				}
			case <-timerC:
				if c.due() {
					ready = merge(ready, c.take())
					peeked = nil // the batch carries them
					stop()
				} else {
					if p := c.peek(); p != nil {
						peeked = append(peeked, p...)
					}
					arm()
				}
			case send <- ready:
				ready = nil
			case peek <- peeked:
				peeked = nil
			}
		}
	}()
	return out, peeks
}

func merge(into, b *Batch) *Batch {
	if into == nil {
		return b
	}
	for p := range b.Paths {
		into.Paths[p] = struct{}{}
	}
	for r := range b.Rescans {
		into.Rescans[r] = struct{}{}
	}
	if b.First.Before(into.First) {
		into.First = b.First
	}
	into.Changes += b.Changes
	return into
}
