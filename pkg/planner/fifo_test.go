//go:build unix

package planner

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
)

// withDeadline is testtree's WithFIFODeadline.
func withDeadline(t *testing.T, fifo string, fn func()) {
	t.Helper()
	testtree.WithFIFODeadline(t, fifo, fn)
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
