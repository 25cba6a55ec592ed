package filesync

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// A start reports what it listed and hashed once it has run
// startProgressAfter, and not while its send reports its own.
func TestStartProgress(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	var got []Progress
	m := &startMeter{clk: fc, start: fc.Now(), target: Target{Pod: "web-1"}, report: func(p Progress) { got = append(got, p) }}
	m.Walked.Add(700)
	m.tick()
	fc.Step(startProgressAfter - time.Millisecond)
	m.tick()
	if len(got) != 0 {
		t.Fatalf("reported before %s: %+v", startProgressAfter, got)
	}
	fc.Step(time.Millisecond)
	m.remote.Add(300)
	m.Hashed.Add(40)
	m.tick()
	if len(got) != 1 || !got[0].Start || got[0].Listed != 1000 || got[0].Hashed != 40 || got[0].Elapsed != startProgressAfter || got[0].Target.Pod != "web-1" {
		t.Fatalf("after %s: %+v, want one report of 1000 listed, 40 hashed", startProgressAfter, got)
	}
	m.sending.Store(true)
	fc.Step(time.Second)
	m.tick()
	if len(got) != 1 {
		t.Fatalf("reported during the send: %+v", got[1:])
	}
}

// lateStdinExecutor returns from Exec at once and reads its stdin afterwards,
// when read is closed, as a pods/exec stream's stdin copy may: client-go's
// StreamWithContext does not wait for it.
type lateStdinExecutor struct {
	read, done chan struct{}
}

func (x *lateStdinExecutor) Exec(_ context.Context, _ Target, _ []string, stdin io.Reader, _, _ io.Writer) error {
	go func() {
		defer close(x.done)
		<-x.read
		_, _ = stdin.Read(make([]byte, 10))
	}()
	return nil
}

// No Progress is reported once the Exec that carries the bytes returned: the
// engine's Once (or batch) that owns the report has returned by then, and its
// caller reads what was reported.
func TestNoProgressAfterExecReturned(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	var (
		mu  sync.Mutex
		got []Progress
	)
	ex := &lateStdinExecutor{read: make(chan struct{}), done: make(chan struct{})}
	pe := &progressExecutor{Executor: ex, clk: fc, start: fc.Now(), report: func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, p)
	}}
	must(t, pe.Exec(context.Background(), testTarget, []string{"sh"}, strings.NewReader(strings.Repeat("x", 100)), nil, nil))
	fc.Step(progressEvery)
	close(ex.read)
	<-ex.done
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 0 {
		t.Errorf("reported after the Exec returned: %+v", got)
	}
}
