//go:build unix

package testtree

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// WithFIFODeadline runs fn and fails the test if it has not returned by the
// test's deadline (or a minute): a blocked open must fail the test, not hang
// the suite. Opening the FIFO fifo for writing releases a reader blocked in
// open, so the goroutine does not outlive the test.
func WithFIFODeadline(t *testing.T, fifo string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	limit := time.Minute
	if d, ok := t.Deadline(); ok && time.Until(d)/2 < limit {
		limit = time.Until(d) / 2
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatalf("still blocked on the FIFO %s after %v", fifo, limit)
	}
}
