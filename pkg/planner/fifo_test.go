//go:build unix

package planner

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
)

// withDeadline runs fn and fails the test if it has not returned by the
// test's deadline (or a minute): a blocked open must fail the test, not hang
// the suite. Opening a FIFO for writing releases a reader blocked in open,
// so the goroutine does not outlive the test.
func withDeadline(t *testing.T, fifo string, fn func()) {
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

func TestHashFileFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pipe")
	must(t, syscall.Mkfifo(fifo, 0o644))
	var err error
	withDeadline(t, fifo, func() { _, err = hashFile(fifo) })
	if !errors.Is(err, localtree.ErrNotRegular) {
		t.Errorf("hashFile(fifo) = %v, want localtree.ErrNotRegular", err)
	}
}
