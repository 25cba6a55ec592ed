package localexec

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testwait"
)

// Only the applets are on PATH, and a missing one fails as a container
// runtime says.
func TestNewBusybox(t *testing.T) {
	r := Busybox(t, "sha256sum")
	var out bytes.Buffer
	if err := r.Run(context.Background(), []string{"sh", "-c", `command -v md5sum; command -v sha256sum || echo none`}, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(r.Bin, "md5sum") + "\nnone\n"; out.String() != want {
		t.Errorf("output = %q, want %q", out.String(), want)
	}
	if err := r.Run(context.Background(), []string{"sha256sum"}, nil, io.Discard, io.Discard); err == nil {
		t.Error("running a missing applet succeeded")
	}
}

func TestRunExitCode(t *testing.T) {
	err := Busybox(t).Run(context.Background(), []string{"sh", "-c", "exit 3"}, nil, io.Discard, io.Discard)
	var code ExitCode
	if !errors.As(err, &code) || code.ExitStatus() != 3 {
		t.Errorf("Run = %v, want exit code 3", err)
	}
}

// Cancelling a Run returns at once even when a process keeps the streams
// open, as a container's exec stream is closed; before, os/exec waited for
// EOF on the output pipe, which a background child holds.
func TestRunCancelTearsDown(t *testing.T) {
	tests := []struct {
		name   string
		script string
		stdin  io.Reader
	}{
		{name: "background child holds stdout", script: `sleep 1000 & echo started`},
		{name: "script never exits", script: `echo started; sleep 1000`},
		{name: "stdin never read", script: `echo started; sleep 1000`, stdin: zeros{}},
		{name: "background child holds stdin", script: `sleep 1000 & echo started`, stdin: zeros{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Busybox(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := &signalWriter{first: make(chan struct{})}
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx, []string{"sh", "-c", tt.script}, tt.stdin, out, io.Discard) }()
			testwait.Result(t, out.first, "the script's first output")
			cancel()
			if err := testwait.Result(t, done, "Run after cancel"); !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
		})
	}
}

// A background child that does not hold the streams outlives the exec, as
// in a container; the exec ends with its shell.
func TestRunDetachedChild(t *testing.T) {
	r := Busybox(t)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := r.Run(context.Background(), []string{"mkfifo", fifo}, nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	// The child blocks on the fifo until the test opens it, and exits then.
	if err := r.Run(context.Background(), []string{"sh", "-c", `cat "$1" >/dev/null 2>&1 </dev/null & echo ok`, "sh", fifo}, nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// signalWriter closes first on the first write.
type signalWriter struct {
	mu    sync.Mutex
	first chan struct{}
	b     bytes.Buffer
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() == 0 && len(p) > 0 {
		close(w.first)
	}
	return w.b.Write(p)
}

// zeros is an endless stream.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
