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

// adaptiveQuiet chooses the quiet window of each batch.
type adaptiveQuiet struct {
	min, max time.Duration
	w        time.Duration // the current batch's window
	lastCut  time.Time
}

// open returns the window of a batch whose first change arrived at now.
func (a *adaptiveQuiet) open(now time.Time) time.Duration {
	if a.w == 0 || a.lastCut.IsZero() || now.Sub(a.lastCut) >= a.max {
		a.w = a.min
	} else {
		a.w = min(2*a.w, a.max)
	}
	return a.w
}

// cut records that the current batch was released at now.
func (a *adaptiveQuiet) cut(now time.Time) { a.lastCut = now }

// PeekInterval is the PeekEvery a stream engine uses: longer than an editor's save, which the
// quiet window cuts at once (MinAdaptiveQuiet), so a save never peeks.
const PeekInterval = 100 * time.Millisecond
