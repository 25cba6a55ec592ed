//go:build unix

package filesync

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
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

// A file replaced by a FIFO (or a socket) between planning and archiving is
// skipped with a warning; opening it must not wait for a writer.
func TestWriteArchiveSkipsFIFO(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"pipe": "was a file", "sock": "was a file", "ok": "ok"})
	copies := copiesOf(t, dir)
	fifo := filepath.Join(dir, "pipe")
	must(t, os.Remove(fifo))
	must(t, syscall.Mkfifo(fifo, 0o644))
	must(t, os.Remove(filepath.Join(dir, "sock")))
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	must(t, err)
	defer l.Close()

	var (
		buf bytes.Buffer
		res tarstream.Result
	)
	withDeadline(t, fifo, func() { res, err = tarstream.Write(&buf, planner.TarFiles(copies)) })
	must(t, err)
	got, _ := readTar(t, buf.Bytes())
	if _, ok := got["pipe"]; ok {
		t.Error("the FIFO was archived")
	}
	if _, ok := got["sock"]; ok {
		t.Error("the socket was archived")
	}
	if got["ok"].content != "ok" {
		t.Errorf("ok = %+v", got["ok"])
	}
	if len(res.Warnings) != 2 {
		t.Errorf("warnings = %v, want one for the FIFO and one for the socket", res.Warnings)
	}
	for _, w := range res.Warnings {
		if !strings.Contains(w.Error(), "not a regular file") || strings.Count(w.Error(), "\n") > 0 {
			t.Errorf("warning %q", w)
		} else {
			t.Log(w)
		}
	}
}
