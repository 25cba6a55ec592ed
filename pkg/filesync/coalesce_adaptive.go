package filesync

import "time"

// Adaptive quiet window, used when batches go through streams (see
// Engine.adaptiveQuiet). With an exec per batch every batch costs an exec
// floor, so the window must be wide enough to keep one operation in one batch;
// through a stream a batch costs a few milliseconds, so the window that is
// added to every save can be short. After idle a batch is cut once the save
// has settled (minAdaptiveQuiet: an editor's save is 3–4 events within 1–8 ms);
// when changes keep coming right after a cut (gofmt -w, a branch switch, a
// build writing into the tree), each next window doubles, up to
// maxAdaptiveQuiet, so a long operation is cut into a few large batches, not
// many small ones; the cap still bounds each batch. A gap of maxAdaptiveQuiet
// without a change is idle again.
const (
	minAdaptiveQuiet = 10 * time.Millisecond
	maxAdaptiveQuiet = 200 * time.Millisecond
)

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

// adaptiveQuiet returns the adaptive window for an engine that keeps streams
// and runs with the default quiet window; nil (a fixed window) otherwise: an
// exec per batch pays a floor per batch, and a window the user chose is kept.
func (e *Engine) adaptiveQuiet() *adaptiveQuiet {
	if e.streams == nil || e.cfg.Quiet != DefaultQuiet {
		return nil
	}
	return &adaptiveQuiet{min: minAdaptiveQuiet, max: maxAdaptiveQuiet}
}

// peekEvery is how often a batch still open hands its new paths to the
// targets (see coalescePeeking), with streams and the default quiet window:
// through a stream a batch costs a few milliseconds, so under a long burst
// (a build writing thousands of files) the stream extracts what is written
// while the rest still comes, instead of waiting for the batch's cap. Zero
// (no peeks) otherwise.
func (e *Engine) peekEvery() time.Duration {
	if e.adaptiveQuiet() == nil {
		return 0
	}
	return peekInterval
}

// peekInterval is peekEvery's value: longer than an editor's save, which the
// quiet window cuts at once (minAdaptiveQuiet), so a save never peeks.
const peekInterval = 100 * time.Millisecond
