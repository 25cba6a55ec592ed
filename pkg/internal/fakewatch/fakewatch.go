// Package fakewatch is a watch.Watcher whose events and errors are pushed by
// hand, for the tests of packages that consume a Watcher. It is test support:
// nothing outside tests imports it.
package fakewatch

import (
	"sync"

	"github.com/livesync-dev/kubectl-livesync/pkg/watch"
)

// Watcher is a watch.Watcher whose events and errors are pushed by hand.
type Watcher struct {
	events chan watch.Event
	errs   chan error
	done   chan struct{}
	once   sync.Once
	mu     sync.RWMutex // held for reading while sending, for writing to close the channels

	refreshMu sync.Mutex
	refreshed []string
}

var _ watch.Watcher = (*Watcher)(nil)

// New returns a Watcher with unbuffered channels, so that Send returns only
// once the consumer has the event.
func New() *Watcher {
	return &Watcher{events: make(chan watch.Event), errs: make(chan error), done: make(chan struct{})}
}

// Send delivers ev on Events. It blocks until ev is received or the
// Watcher is closed, and reports whether ev was received.
func (f *Watcher) Send(ev watch.Event) bool { return send(f, f.events, ev) }

// SendError delivers err on Errors, like Send.
func (f *Watcher) SendError(err error) bool { return send(f, f.errs, err) }

func send[T any](f *Watcher, ch chan<- T, v T) bool {
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

// Events implements watch.Watcher.
func (f *Watcher) Events() <-chan watch.Event { return f.events }

// Errors implements watch.Watcher.
func (f *Watcher) Errors() <-chan error { return f.errs }

// Close implements watch.Watcher: it unblocks pending sends and closes both
// channels. It may be called more than once.
func (f *Watcher) Close() error {
	f.once.Do(func() {
		close(f.done)
		f.mu.Lock() // wait for sends in flight to give up
		defer f.mu.Unlock()
		close(f.events)
		close(f.errs)
	})
	return nil
}

// Refresh implements watch.Watcher: it records root for Refreshed and sends
// nothing; a test sends the Rescan that a Watcher would.
func (f *Watcher) Refresh(root string) {
	f.refreshMu.Lock()
	defer f.refreshMu.Unlock()
	f.refreshed = append(f.refreshed, root)
}

// Refreshed returns the roots passed to Refresh so far, in order.
func (f *Watcher) Refreshed() []string {
	f.refreshMu.Lock()
	defer f.refreshMu.Unlock()
	return append([]string(nil), f.refreshed...)
}

// Closed reports whether Close was called.
func (f *Watcher) Closed() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}
