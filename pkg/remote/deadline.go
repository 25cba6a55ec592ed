package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// listHashRate is a conservative rate, in bytes per second, at which a busy
// container hashes files. A listing prints a chunk's hashes only once they are
// computed (and through a buffered pipe), so it may go silent for about as
// long as hashing the tree takes; the remote tree mirrors the local one, whose
// size is known.
const listHashRate = 32 << 20

// ListLimit is the deadline of a listing: the base stall window plus the time
// to hash localBytes at listHashRate.
func ListLimit(base time.Duration, localBytes int64) Limit {
	return Limit{D: base + time.Duration(localBytes*int64(time.Second)/listHashRate), Idle: true}
}

// Limit is how long one exec may take. With Idle, D counts from the last byte
// that moved on any of its streams: a transfer that keeps moving is never cut
// off, however large or slow, while one that stalls (a container frozen with
// SIGSTOP stops reading, the pipe fills and writes block) is. Without Idle, D
// counts from the start.
type Limit struct {
	D    time.Duration // 0: no deadline
	Idle bool
}

// timeoutError is what an exec returns when its limit ran out; it matches
// ErrTimeout.
type timeoutError struct{ Limit }

func (e *timeoutError) Error() string {
	if e.Idle {
		return fmt.Sprintf("timed out after %s (no progress)", e.D)
	}
	return fmt.Sprintf("timed out after %s", e.D)
}

func (e *timeoutError) Is(target error) bool { return target == ErrTimeout }

// ExecWithin runs ex.Exec and cancels it once l runs out on clk (if l.D > 0),
// returning a *timeoutError then. Writes to stdout and stderr are serialized, and dropped
// once it returns: an executor torn down by cancellation may leave a stream
// goroutine behind (client-go's StreamWithContext returns on ctx.Done without
// waiting for its copies), and the caller reads its buffers right away.
func ExecWithin(ctx context.Context, clk clock.Clock, l Limit, ex Executor, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	g := &streamGuard{clk: clk, idle: l.Idle}
	g.touch()
	if stdin != nil {
		stdin = &guardedReader{r: stdin, g: g}
	}
	if stdout != nil {
		stdout = &guardedWriter{w: stdout, g: g}
	}
	if stderr != nil {
		stderr = &guardedWriter{w: stderr, g: g}
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	timeout := &timeoutError{l}
	go func() {
		defer close(stopped)
		if l.D > 0 && g.wait(l, stop) {
			cancel(timeout)
		}
	}()
	err := ex.Exec(ctx, t, argv, stdin, stdout, stderr)
	g.close()
	close(stop)
	<-stopped
	if errors.Is(context.Cause(ctx), timeout) {
		return timeout
	}
	return err
}

// streamGuard tracks when a byte last moved on an exec's streams and
// serializes (then, once closed, drops) writes to its output.
type streamGuard struct {
	clk  clock.Clock
	idle bool
	last atomic.Int64 // unix nanos on clk of the last progress

	mu     sync.Mutex
	closed bool
}

func (g *streamGuard) touch() { g.last.Store(g.clk.Now().UnixNano()) }

func (g *streamGuard) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// wait returns true once l ran out, false once stop is closed.
func (g *streamGuard) wait(l Limit, stop <-chan struct{}) bool {
	start := g.clk.Now().UnixNano()
	for {
		from := start
		if l.Idle {
			from = g.last.Load()
		}
		left := time.Duration(from + int64(l.D) - g.clk.Now().UnixNano())
		if left <= 0 {
			return true
		}
		timer := g.clk.NewTimer(left)
		select {
		case <-stop:
			timer.Stop()
			return false
		case <-timer.C():
		}
	}
}

type guardedReader struct {
	r io.Reader
	g *streamGuard
}

func (r *guardedReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 && r.g.idle {
		r.g.touch()
	}
	return n, err
}

// PartEnd forwards to the wrapped reader (see Parted).
func (r *guardedReader) PartEnd() int64 { return PartEndOf(r.r) }

type guardedWriter struct {
	w io.Writer
	g *streamGuard
}

func (w *guardedWriter) Write(p []byte) (int, error) {
	w.g.mu.Lock()
	defer w.g.mu.Unlock()
	if w.g.closed {
		return 0, io.ErrClosedPipe
	}
	if w.g.idle && len(p) > 0 {
		w.g.touch()
	}
	return w.w.Write(p)
}
