// Package coalesce cuts a stream of file changes into batches: a batch is due
// once the changes paused for a quiet window, or a cap after its first change,
// so a save becomes one batch and a continuous writer still syncs. The clock is
// injected (k8s.io/utils/clock), as in Tilt's fsevent coalescer.
//
// With Options.Adaptive, changes also say how far along they are (Progress,
// from the kernel on Linux) and the quiet window is waited for only where it
// is needed:
//
//   - after idle (the batch's window is MinAdaptiveQuiet), a batch whose every
//     path is Complete (a writer closed it, it was moved in, a new directory)
//     is cut CompleteSettle after its last change: a save is over when its
//     writer closes the file, and waiting longer only adds to every save;
//   - a path still Writing (its writer has it open) is held out of batches
//     until a change says it is Complete (its close), or for at most Cap: it
//     never holds up the batch around it, and a file is not sent while it is
//     being written;
//   - a path of Unknown progress (a removal or a rename away, which an
//     editor's atomic save does just before it writes the file again;
//     anything a walk, a poll, macOS or Windows reports) and a Rescan keep
//     the quiet window, and so does every batch of a burst (see
//     adaptiveQuiet.open): gofmt -w, cp -r and a branch switch are still
//     cut into a few large batches.
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
	Progress   Progress // read only with Options.Adaptive
}

// Progress says whether the change at a path is over (see the package
// documentation); pkg/session maps watch.Progress to it.
type Progress uint8

// The progress of a change.
const (
	Unknown  Progress = iota // wait for the quiet window
	Writing                  // its writer has the file open: hold it until Complete, or Cap
	Complete                 // over: no need to wait
)

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

	// With adapt set: the progress of each path of cur, how many of them
	// are Unknown, and the paths held out of batches while Writing, with
	// the arrival of their first change.
	progress map[string]Progress
	unknown  int
	held     map[string]time.Time
	settleOK bool // cur opened after idle: it may be cut on save-complete
	// tempUntil: cur waits at least until then for the rename of a
	// temporary file closed in it (see TempSettle).
	tempUntil time.Time
}

func (c *coalescer) add(ch Change) {
	now := c.clk.Now()
	if c.adapt != nil && !ch.Rescan {
		if ch.Progress == Writing {
			c.hold(ch.Path, now)
			return
		}
		c.unhold(ch.Path)
		if ch.Progress == Complete && TempName(ch.Path) {
			// Closed, but to be renamed: not save-complete (see TempSettle).
			ch.Progress = Unknown
			c.tempUntil = now.Add(TempSettle)
		}
	}
	if c.cur == nil {
		c.cur = &Batch{Paths: map[string]struct{}{}, Rescans: map[string]struct{}{}, First: now}
		if c.adapt != nil {
			c.quiet, c.settleOK = c.adapt.open(now)
		}
		c.peekAt = now.Add(c.peekEvery)
	}
	c.cur.add(ch)
	c.last = now
	if c.adapt != nil {
		c.track(ch)
	}
	if c.peekEvery > 0 && !ch.Rescan {
		if c.fresh == nil {
			c.fresh = map[string]struct{}{}
		}
		c.fresh[ch.Path] = struct{}{}
	}
}

// track notes the progress of a change added to cur.
func (c *coalescer) track(ch Change) {
	if ch.Rescan {
		c.unknown++ // a Rescan keeps the window
		return
	}
	if c.progress == nil {
		c.progress = map[string]Progress{}
	}
	if old, ok := c.progress[ch.Path]; ok && old == Unknown {
		c.unknown--
	}
	c.progress[ch.Path] = ch.Progress
	if ch.Progress == Unknown {
		c.unknown++
	}
}

// hold takes path out of cur, if there, and holds it until a change says
// it is Complete, or for at most cap.
func (c *coalescer) hold(path string, now time.Time) {
	if c.cur != nil {
		if _, ok := c.cur.Paths[path]; ok {
			delete(c.cur.Paths, path)
			delete(c.fresh, path)
			if c.progress[path] == Unknown {
				c.unknown--
			}
			delete(c.progress, path)
			if len(c.cur.Paths) == 0 && len(c.cur.Rescans) == 0 {
				c.cur = nil
			}
		}
	}
	if c.held == nil {
		c.held = map[string]time.Time{}
	}
	if _, ok := c.held[path]; !ok {
		c.held[path] = now
	}
}

// unhold ends the hold of path, if any: a change that isn't Writing came.
func (c *coalescer) unhold(path string) { delete(c.held, path) }

// heldSince returns the first arrival among the held paths: a walk of
// them, which are few (files open for writing right now).
func (c *coalescer) heldSince() (time.Time, bool) {
	var first time.Time
	for _, t := range c.held {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first, len(c.held) > 0
}

// deadline returns when the current batch is due, and false without one.
func (c *coalescer) deadline() (time.Time, bool) {
	held, holding := c.heldSince()
	if c.cur == nil {
		return held.Add(c.cap), holding
	}
	d := c.last.Add(c.quiet)
	if c.settleOK && c.unknown == 0 {
		d = c.last.Add(CompleteSettle) // after idle and every path Complete
	}
	if c.tempUntil.After(d) {
		d = c.tempUntil
	}
	if capAt := c.cur.First.Add(c.cap); capAt.Before(d) {
		d = capAt
	}
	if holding && held.Add(c.cap).Before(d) {
		d = held.Add(c.cap)
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

// take cuts the current batch. Held paths join it once the first of them
// was held for cap, or with all set (the input ended).
func (c *coalescer) take(all bool) *Batch {
	now := c.clk.Now()
	b := c.cur
	settled := b != nil && c.settleOK && c.unknown == 0 && now.Before(c.last.Add(c.quiet)) && now.Before(b.First.Add(c.cap))
	c.cur = nil
	c.tempUntil = time.Time{}
	clear(c.fresh) // the batch carries them
	clear(c.progress)
	c.unknown = 0
	if held, ok := c.heldSince(); ok && (all || !now.Before(held.Add(c.cap))) {
		if b == nil {
			b = &Batch{Paths: map[string]struct{}{}, Rescans: map[string]struct{}{}, First: held}
		}
		for p, t := range c.held {
			b.Paths[p] = struct{}{}
			b.Changes++
			if t.Before(b.First) {
				b.First = t
			}
		}
		clear(c.held)
	}
	if c.adapt != nil && b != nil {
		c.adapt.cut(now, settled)
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
					if b := c.take(true); b != nil {
						ready = merge(ready, b)
					}
					stop()
				case ready != nil && c.adapt != nil && !ch.Rescan && ch.Progress == Writing:
					// Written again before the consumer took it: held.
					delete(ready.Paths, ch.Path)
					if len(ready.Paths) == 0 && len(ready.Rescans) == 0 {
						ready = nil
					}
					c.add(ch)
					arm()
				case ready != nil:
					c.unhold(ch.Path)
					ready.add(ch)
				default:
					c.add(ch)
					arm()
				}
			case <-timerC:
				if c.due() {
					ready = merge(ready, c.take(false))
					peeked = nil // the batch carries them
					arm()
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
	if b == nil {
		return into
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
