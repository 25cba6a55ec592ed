package coalesce

import "time"

// Adaptive quiet window (Options.Adaptive), used when batches go through
// streams. With an exec per batch every batch costs an exec
// floor, so the window must be wide enough to keep one operation in one batch;
// through a stream a batch costs a few milliseconds, so the window that is
// added to every save can be short. After idle a batch is cut once the save
// has settled (MinAdaptiveQuiet: an editor's save is 3–4 events within 1–8 ms);
// when changes keep coming right after a cut (gofmt -w, a branch switch, a
// build writing into the tree), each next window doubles, up to
// MaxAdaptiveQuiet, so a long operation is cut into a few large batches, not
// many small ones; the cap still bounds each batch. A gap of MaxAdaptiveQuiet
// without a change is idle again.
const (
	MinAdaptiveQuiet = 10 * time.Millisecond
	MaxAdaptiveQuiet = 200 * time.Millisecond
)

// CompleteSettle is how long a batch whose every path is Complete waits after
// its last change, after idle: the events of one save (an editor's rename
// and close, an in-place write's IN_MODIFY and IN_CLOSE_WRITE) arrive within
// 0.1 ms of each other here, and a millisecond keeps them in one batch where
// cutting at the first cut them into two.
const CompleteSettle = time.Millisecond

// adaptiveQuiet chooses the quiet window of each batch, and whether it may
// be cut on save-complete (CompleteSettle after its last change).
type adaptiveQuiet struct {
	min, max   time.Duration
	w          time.Duration // the current batch's window
	lastCut    time.Time     // the last batch cut by its window or the cap
	lastSettle time.Time     // the last batch cut on save-complete
}

// open returns the window of a batch whose first change arrived at now, and
// whether it may be cut on save-complete: only after idle. A batch cut on
// save-complete doesn't widen the next one's window: when a burst began
// with it, the rest of the burst gets the shortest window, as if the burst
// had begun with the rest, and the windows widen from there.
func (a *adaptiveQuiet) open(now time.Time) (time.Duration, bool) {
	recent := func(t time.Time) bool { return !t.IsZero() && now.Sub(t) < a.max }
	if a.w == 0 || !recent(a.lastCut) {
		a.w = a.min
	} else {
		a.w = min(2*a.w, a.max)
	}
	return a.w, !recent(a.lastCut) && !recent(a.lastSettle)
}

// cut records that the current batch was released at now, on save-complete
// if settled.
func (a *adaptiveQuiet) cut(now time.Time, settled bool) {
	if settled {
		a.lastSettle = now
	} else {
		a.lastCut = now
	}
}

// PeekInterval is the PeekEvery a stream engine uses: longer than an editor's save, which the
// quiet window cuts at once (MinAdaptiveQuiet), so a save never peeks.
const PeekInterval = 100 * time.Millisecond
