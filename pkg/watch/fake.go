package watch

import "sync"

// FakeWatcher is a Watcher whose events and errors are pushed by hand, for
// the tests of packages that consume a Watcher.
type FakeWatcher struct {
	events chan Event
	errs   chan error
	done   chan struct{}
	once   sync.Once
	mu     sync.RWMutex // held for reading while sending, for writing to close the channels

	refreshMu sync.Mutex
	refreshed []string
}

var _ Watcher = (*FakeWatcher)(nil)

// NewFakeWatcher returns a FakeWatcher with unbuffered channels, so that
// Send returns only once the consumer has the event.
func NewFakeWatcher() *FakeWatcher {
	return &FakeWatcher{events: make(chan Event), errs: make(chan error), done: make(chan struct{})}
}

// Send delivers ev on Events. It blocks until ev is received or the
// FakeWatcher is closed, and reports whether ev was received.
func (f *FakeWatcher) Send(ev Event) bool { return send(f, f.events, ev) }

// SendError delivers err on Errors, like Send.
func (f *FakeWatcher) SendError(err error) bool { return send(f, f.errs, err) }

func send[T any](f *FakeWatcher, ch chan<- T, v T) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	select {
	case <-f.done: // ch may be closed already
		return false
	default:
	}
	select {
	case ch <- v:
		return true
	case <-f.done:
		return false
	}
}

// Events implements Watcher.
func (f *FakeWatcher) Events() <-chan Event { return f.events }

// Errors implements Watcher.
func (f *FakeWatcher) Errors() <-chan error { return f.errs }

// Close implements Watcher: it unblocks pending sends and closes both
// channels. It may be called more than once.
func (f *FakeWatcher) Close() error {
	f.once.Do(func() {
		close(f.done)
		f.mu.Lock() // wait for sends in flight to give up
		defer f.mu.Unlock()
		close(f.events)
		close(f.errs)
	})
	return nil
}

// Refresh implements Watcher: it records root for Refreshed and sends
// nothing; a test sends the Rescan that a Watcher would.
func (f *FakeWatcher) Refresh(root string) {
	f.refreshMu.Lock()
	defer f.refreshMu.Unlock()
	f.refreshed = append(f.refreshed, root)
}

// Refreshed returns the roots passed to Refresh so far, in order.
func (f *FakeWatcher) Refreshed() []string {
	f.refreshMu.Lock()
	defer f.refreshMu.Unlock()
	return append([]string(nil), f.refreshed...)
}

// Closed reports whether Close was called.
func (f *FakeWatcher) Closed() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}
