package filesync

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// Progress reports a long initial sync (one that has run startProgressAfter)
// or a long batch's send (batchProgressAfter) under way, at most every
// progressEvery per target, so a terminal can draw a progress line. Bytes
// counts tar bytes sent; TotalBytes is the file content to send (tar headers
// make Bytes run slightly past it).
type Progress struct {
	Target Target
	// Start: an initial sync's, which also counts Listed (paths walked
	// locally, and listed in the container once its listing is in) and
	// Hashed (local files read to compare), as they go.
	Start          bool
	Listed, Hashed int
	// Files is how many files the send holds (0 before it starts).
	Files      int
	Bytes      int64
	TotalBytes int64
	Elapsed    time.Duration
}

func (Progress) event() {}

const progressEvery = 200 * time.Millisecond

// startProgressAfter is how long an initial sync runs before it reports its
// progress: a start that converges sooner is said in one line.
const startProgressAfter = 2 * time.Second

// startMeter reports an initial sync's progress before its send: what it
// listed and hashed so far (see planner.Meter).
type startMeter struct {
	planner.Meter
	remote  atomic.Int64 // paths the container listed
	sending atomic.Bool  // the send reports its own (progressExecutor)
	clk     clock.PassiveClock
	start   time.Time
	target  Target
	report  func(Progress)
}

// progress is what m counted so far.
func (m *startMeter) progress() Progress {
	return Progress{Target: m.target, Start: true, Listed: int(m.Walked.Load() + m.remote.Load()), Hashed: int(m.Hashed.Load()),
		Elapsed: m.clk.Since(m.start)}
}

// tick reports m's progress once the start has run startProgressAfter and
// until its send begins.
func (m *startMeter) tick() {
	if p := m.progress(); p.Elapsed >= startProgressAfter && !m.sending.Load() {
		m.report(p)
	}
}

// run ticks every progressEvery until done is closed. Real time, not the
// engine's clock: a display's refresh, not part of what a test steps (tick
// reads the engine's clock for what it reports).
func (m *startMeter) run(done <-chan struct{}) {
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			m.tick()
		}
	}
}

// progressExecutor counts the stdin bytes of the execs of one initial sync and reports them.
type progressExecutor struct {
	Executor
	clk    clock.Clock
	start  time.Time
	report func(Progress)
	base   Progress
	// after: nothing is reported before the send has run this long (a
	// batch's; an initial sync reports from the start).
	after time.Duration

	sent atomic.Int64
	last atomic.Int64 // unix nanos of the last report
}

func (p *progressExecutor) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if stdin == nil {
		return p.Executor.Exec(ctx, t, argv, nil, stdout, stderr)
	}
	c := &countingReader{r: stdin, p: p}
	defer c.close()
	return p.Executor.Exec(ctx, t, argv, c, stdout, stderr)
}

type countingReader struct {
	r    io.Reader
	p    *progressExecutor
	seen int64 // tar bytes counted so far, from a compressed archive

	// An exec's stdin copy may outlive it (client-go's StreamWithContext
	// does not wait for it), and its last Read return once the archive's
	// pipe is closed: what it counts then was not sent, and a report then
	// would come after the engine call that owns it returned. mu holds
	// close back until a report under way is done.
	mu     sync.Mutex
	closed bool
}

// close ends c's counting and reporting; it returns once no report is
// under way.
func (c *countingReader) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// tarCounter is a compressed archive's reader: it counts the tar bytes
// behind what was read (tarstream.Reader), which is what TotalBytes measures.
type tarCounter interface{ TarBytes() int64 }

// PartEnd forwards to the archive (see remote.Parted).
func (c *countingReader) PartEnd() int64 { return remote.PartEndOf(c.r) }

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return n, err
	}
	p := c.p
	d := int64(n)
	if tc, ok := c.r.(tarCounter); ok {
		now := tc.TarBytes()
		d, c.seen = now-c.seen, now
	}
	sent := p.sent.Add(d)
	now := p.clk.Now()
	if now.Sub(p.start) < p.after {
		return n, err
	}
	if last := p.last.Load(); now.UnixNano()-last >= int64(progressEvery) && p.last.CompareAndSwap(last, now.UnixNano()) {
		ev := p.base
		ev.Bytes = sent
		ev.Elapsed = now.Sub(p.start)
		p.report(ev)
	}
	return n, err
}
