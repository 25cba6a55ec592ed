package remote

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Link is what a target's stream was measured to carry: what decides
// whether an archive is worth compressing (the CPU of gzip buys time only
// on a link slower than gzip itself).
type Link struct {
	// Rate is the bytes per second the last large plain frames carried
	// (an exponential average; see Streams.Exec), 0 until one was measured.
	Rate float64
	// RTT is the quickest ack of a small frame (a heartbeat, an edit), 0
	// until one came.
	RTT time.Duration
}

// Known reports whether anything was measured.
func (l Link) Known() bool { return l.Rate > 0 || l.RTT > 0 }

// Go writes gzip -1 at about 100 MB/s a core, and a container's gzip -1
// runs about as fast: on a link slower than that, compressing costs no time
// and saves most of it on source and binaries (a Go binary shrinks to about
// half); on loopback and fast links it spends CPU on both ends for nothing.
const (
	// FastLinkRate is the measured rate from which a link is fast (100
	// Mbit/s): archives go as they are.
	FastLinkRate = 100e6 / 8
	// NearRTT is the small frames' round trip below which a link without a
	// measured rate is taken for a fast one (loopback acks an edit in a few
	// ms, a cluster 20 ms away in 25 or more).
	NearRTT = 15 * time.Millisecond
)

// Slow reports whether compressing an archive pays on l: its measured rate
// is below FastLinkRate, or without one its round trip is NearRTT or more;
// with nothing measured, it does (an archive large enough to matter then
// costs the CPU once, and measures the link for the next).
func (l Link) Slow() bool {
	switch {
	case l.Rate > 0:
		return l.Rate < FastLinkRate
	case l.RTT > 0:
		return l.RTT >= NearRTT
	}
	return true
}

// Linked is implemented by executors that measure each target's link
// (Streams, and Bounded over one).
type Linked interface {
	Link(t Target) Link
}

// LinkOf returns what ex measured of t's link, the zero Link where it
// measures nothing.
func LinkOf(ex Executor, t Target) Link {
	if l, ok := ex.(Linked); ok {
		return l.Link(t)
	}
	return Link{}
}

// Measuring thresholds: a frame of at least rateMin bytes measures the
// rate (its time less the round trip: a smaller one measures mostly the
// round trip and the container's tar), one of at most rttMax bytes the round
// trip.
const (
	rateMin = 1 << 20
	rttMax  = 64 << 10
)

// links holds the Link of each target key.
type links struct {
	mu sync.Mutex
	m  map[string]Link
}

// observe records that a frame of n bytes (each way, the larger) took d from
// its first byte to its ack.
func (ls *links) observe(key string, n int64, d time.Duration) {
	if d <= 0 {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m = map[string]Link{}
	}
	l := ls.m[key]
	switch {
	case n >= rateMin:
		if l.RTT > 0 && d > 2*l.RTT {
			d -= l.RTT
		}
		r := float64(n) / d.Seconds()
		if l.Rate == 0 {
			l.Rate = r
		} else {
			l.Rate = (l.Rate + r) / 2
		}
	case n <= rttMax:
		if l.RTT == 0 || d < l.RTT {
			l.RTT = d
		}
	}
	ls.m[key] = l
}

func (ls *links) get(key string) Link {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.m[key]
}

// Link returns what t's streams measured of its link (see Link).
func (s *Streams) Link(t Target) Link {
	if s == nil {
		return Link{}
	}
	return s.links.get(streamKey(t))
}

// Link forwards to the wrapped executor (see LinkOf).
func (b *Bounded) Link(t Target) Link { return LinkOf(b.Executor, t) }

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// PartEnd forwards to the wrapped reader (see Parted).
func (c *countingReader) PartEnd() int64 { return PartEndOf(c.r) }

// countingWriter counts what is written through it.
type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	if c.w == nil {
		return len(p), nil
	}
	return c.w.Write(p)
}
