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

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// withDeadline is testtree's WithFIFODeadline.
func withDeadline(t *testing.T, fifo string, fn func()) {
	t.Helper()
	testtree.WithFIFODeadline(t, fifo, fn)
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
