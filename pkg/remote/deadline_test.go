package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testwait"
)

// scriptedExec is an Executor whose Exec is a test function.
type scriptedExec func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error

func (f scriptedExec) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return f(ctx, stdin, stdout, stderr)
}

func TestExecWithin(t *testing.T) {
	const d = 30 * time.Second
	// Each step: the exec moves a byte on the stream, then the clock moves. The exec returns nil once the steps are done, unless
	// it was cancelled first.
	tests := []struct {
		name    string
		l       Limit
		steps   []time.Duration // clock moves, each after one byte moved
		stall   bool            // after the steps, wait for the deadline instead of returning
		stream  string          // "stdin", "stdout" or "stderr"
		wantErr string
	}{
		{name: "moving output is never cut off", l: Limit{D: d, Idle: true}, stream: "stdout",
			steps: []time.Duration{d - time.Second, d - time.Second, d - time.Second, d - time.Second}},
		{name: "stdin being read is progress", l: Limit{D: d, Idle: true}, stream: "stdin",
			steps: []time.Duration{d - time.Second, d - time.Second, d - time.Second}},
		{name: "stderr is progress", l: Limit{D: d, Idle: true}, stream: "stderr",
			steps: []time.Duration{d - time.Second, d - time.Second}},
		{name: "a stall after progress times out", l: Limit{D: d, Idle: true}, stream: "stdout",
			steps: []time.Duration{d - time.Second, d - time.Second}, stall: true, wantErr: "timed out after 30s (no progress)"},
		{name: "an exec that never moves times out", l: Limit{D: d, Idle: true}, stall: true, wantErr: "timed out after 30s (no progress)"},
		{name: "a fixed deadline ignores progress", l: Limit{D: d}, stream: "stdout",
			steps: []time.Duration{d / 2}, stall: true, wantErr: "timed out after 30s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
			next, moved := make(chan struct{}), make(chan struct{})
			ex := scriptedExec(func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
				for range tt.steps {
					select {
					case <-next:
					case <-ctx.Done():
						return ctx.Err()
					}
					var err error
					switch tt.stream {
					case "stdin":
						_, err = stdin.Read(make([]byte, 1))
					case "stdout":
						_, err = stdout.Write([]byte("x"))
					case "stderr":
						_, err = stderr.Write([]byte("x"))
					}
					if err != nil {
						return err
					}
					select {
					case moved <- struct{}{}:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				select {
				case <-next:
				case <-ctx.Done():
					return ctx.Err()
				}
				if tt.stall {
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			})
			done := make(chan error, 1)
			go func() {
				done <- ExecWithin(context.Background(), fc, tt.l, ex, testTarget, nil, strings.NewReader(strings.Repeat("x", 100)), io.Discard, io.Discard)
			}()
			for _, step := range tt.steps {
				next <- struct{}{}
				testwait.Result(t, moved, "the exec")
				testwait.Waiters(t, fc, 1)
				fc.Step(step)
			}
			next <- struct{}{}
			if tt.stall {
				testwait.Waiters(t, fc, 1)
				fc.Step(d)
			}
			err := testwait.Result(t, done, "execWithin")
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("execWithin = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr || !errors.Is(err, ErrTimeout)):
				t.Fatalf("execWithin = %v, want %q matching ErrTimeout", err, tt.wantErr)
			}
		})
	}
}

func TestExecWithinTimeoutIsTransientAndOneLine(t *testing.T) {
	err := Classify(&timeoutError{Limit{D: 30 * time.Second, Idle: true}}, testTarget, "copying files", "/app", "")
	want := `copying files in container "app" of pod "web-1" timed out after 30s (no progress): the container may be frozen or overloaded; livesync will retry and re-sync`
	if err.Error() != want || !IsTransient(err) || !errors.Is(err, ErrTimeout) {
		t.Errorf("classify = %q (transient %v), want %q, transient", err, IsTransient(err), want)
	}
}

func TestExecWithinParentCancel(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	ex := scriptedExec(func(ctx context.Context, _ io.Reader, _, _ io.Writer) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	done := make(chan error, 1)
	go func() {
		done <- ExecWithin(ctx, fc, Limit{D: time.Second, Idle: true}, ex, testTarget, nil, nil, nil, nil)
	}()
	testwait.Result(t, started, "the exec")
	cancel()
	if err := testwait.Result(t, done, "execWithin"); !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Errorf("execWithin = %v, want context.Canceled", err)
	}
}

// An executor torn down by cancellation may still hold the output streams
// (client-go returns on ctx.Done before its copy goroutines end): what they
// write later must not reach the caller's buffer, which it reads at once.
func TestExecWithinDropsLateWrites(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	var late io.Writer
	ex := scriptedExec(func(ctx context.Context, _ io.Reader, stdout, _ io.Writer) error {
		late = stdout
		_, _ = stdout.Write([]byte("early"))
		return nil
	})
	var out bytes.Buffer
	if err := ExecWithin(context.Background(), fc, Limit{D: time.Second, Idle: true}, ex, testTarget, nil, nil, &out, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := late.Write([]byte("late")); err == nil || out.String() != "early" {
		t.Errorf("late write: err %v, buffer %q", err, out.String())
	}
}
