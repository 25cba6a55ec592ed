package watch

import (
	"sync"
	"time"
)

// item is a queued hint, before it becomes an Event, or a deferred chore.
type item struct {
	kind itemKind
	root int    // index into watcher.roots
	path string // absolute, under the root as the user named it
	eventFlags
	checked bool // Skip was already consulted (walks do it themselves)
	// recheck counts the writer checks of a path that said Writing without
	// an event since (see recheckLater).
	recheck uint8
}

type itemKind uint8

const (
	kindPath      itemKind = iota // a hint for path
	kindRescan                    // events of the root may have been lost
	kindRewalk                    // walk the new directory at path once more
	kindRewatch                   // rebuild the root's notify watch
	kindCheckRoot                 // is the root's watched directory still the one watched?
	kindRecheck                   // key of a path's writer check to come (see recheckLater)
)

type itemKey struct {
	kind itemKind
	root int
	path string
}

func (it *item) key() itemKey { return itemKey{it.kind, it.root, it.path} }

// keep reports whether a queued Rescan leaves the item alone: the consumer's
// rescan covers hints and walks, but not repairs of notify's tree, nor the
// watch of a directory created (watchNew) or the bookkeeping of one removed
// (staleDir): dropped, a directory created while a Rescan waited got no watch
// of its own, and every later change inside it was lost (seen in the fault
// suite: a directory made during a rewatch's Rescan never synced again).
func (it *item) keep() bool {
	return it.kind == kindRewatch || it.kind == kindCheckRoot || it.movedAway || it.created || it.removed
}

// queue is the unbounded, de-duplicating buffer between the goroutines that
// produce hints (notify drainers, pollers, walks) and the one that hands
// them to the consumer. Producers never block on the consumer.
type queue struct {
	mu      sync.Mutex
	items   []*item
	pending map[itemKey]*item // queued items other than Rescans, to merge duplicates
	rescans map[int]bool      // roots with a queued Rescan
	errs    []error
	ready   chan struct{} // poked after every push
	// maxBehind bounds the queue while a Rescan is queued (see push).
	maxBehind int
}

// maxHintsBehindRescan is queue.maxBehind: 64 Ki hints, a few MiB.
const maxHintsBehindRescan = 1 << 16

func newQueue() *queue {
	return &queue{
		pending: map[itemKey]*item{},
		rescans: map[int]bool{},
		ready:   make(chan struct{}, 1),

		maxBehind: maxHintsBehindRescan,
	}
}

// push queues it. An item already queued absorbs it. A queued Rescan of
// the root covers later items too, since the consumer rescans after it
// receives the Rescan: a new Rescan drops the root's queued walks, and later
// walks are dropped until it is popped; except those that keep(). Hints
// stay, before and after the Rescan, while the queue holds fewer than
// maxBehind items: the consumer can send what they name before its walk of
// the whole root, which takes a second per 100,000 files; beyond that they are
// dropped, so a storm of events costs bounded memory.
func (q *queue) push(it item) {
	q.mu.Lock()
	defer q.poke()
	defer q.mu.Unlock()
	if it.kind == kindRescan {
		if q.rescans[it.root] {
			return
		}
		q.rescans[it.root] = true
		kept := q.items[:0]
		for _, old := range q.items {
			if old.root == it.root && old.kind != kindPath && !old.keep() {
				delete(q.pending, old.key())
				continue
			}
			kept = append(kept, old)
		}
		clear(q.items[len(kept):])
		q.items = append(kept, &it)
		return
	}
	if q.rescans[it.root] && !it.keep() && (it.kind != kindPath || len(q.items) >= q.maxBehind) {
		return
	}
	if old, ok := q.pending[it.key()]; ok {
		old.isDir = old.isDir || it.isDir
		old.dirKnown = old.dirKnown || it.dirKnown
		old.created = old.created || it.created
		old.movedAway = old.movedAway || it.movedAway
		old.gone = old.gone || it.gone
		old.removed = old.removed || it.removed
		old.progress = max(old.progress, it.progress)
		old.checked = old.checked && it.checked
		return
	}
	q.pending[it.key()] = &it
	q.items = append(q.items, &it)
}

// pop takes the oldest item, if any.
func (q *queue) pop() (item, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return item{}, false
	}
	it := q.items[0]
	q.items[0] = nil
	q.items = q.items[1:]
	if it.kind == kindRescan {
		delete(q.rescans, it.root)
	} else {
		delete(q.pending, it.key())
	}
	return *it, true
}

func (q *queue) pushErr(err error) {
	q.mu.Lock()
	q.errs = append(q.errs, err)
	q.mu.Unlock()
	q.poke()
}

func (q *queue) peekErr() (error, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.errs) == 0 {
		return nil, false
	}
	return q.errs[0], true
}

func (q *queue) dropErr() {
	q.mu.Lock()
	q.errs[0] = nil
	q.errs = q.errs[1:]
	q.mu.Unlock()
}

func (q *queue) poke() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// burstBuckets is how many buckets a burst window is cut into. The window
// the count covers is always at least the full window (one bucket more):
// a backlog delivered within the window is counted whole.
const burstBuckets = 10

// burst counts events in a sliding window; see the package documentation.
type burst struct {
	mu     sync.Mutex
	limit  int
	window time.Duration
	counts [burstBuckets + 1]int
	index  [burstBuckets + 1]int64 // which bucket (time / bucket width) counts[i] holds
	fired  time.Time               // when add last reported true
	armed  bool                    // fired is set
}

// add counts one event at now and reports whether the events of the last
// window (at least window, at most a tenth more) reached the limit. While
// they stay at the limit it reports true again once per window.
func (b *burst) add(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	width := max(int64(b.window/burstBuckets), 1)
	cur := now.UnixNano() / width
	slot := int(cur % int64(len(b.counts)))
	if b.index[slot] != cur {
		b.index[slot], b.counts[slot] = cur, 0
	}
	b.counts[slot]++
	sum := 0
	for i, n := range b.counts {
		if b.index[i] > cur-int64(len(b.counts)) && b.index[i] <= cur {
			sum += n
		}
	}
	if sum < b.limit || b.armed && now.Sub(b.fired) < b.window {
		return false
	}
	b.fired, b.armed = now, true
	return true
}
