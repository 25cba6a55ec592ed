package filesync

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Progress reports an initial sync under way, at most every progressEvery per target, so a
// terminal can draw a progress bar. Bytes counts tar bytes sent; TotalBytes is the file content
// to send (tar headers make Bytes run slightly past it).
type Progress struct {
	Target     Target
	Files      int
	Bytes      int64
	TotalBytes int64
	Elapsed    time.Duration
}

func (Progress) event() {}

const progressEvery = 200 * time.Millisecond

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
