// Package memlimit keeps a long-running session's resident memory near what
// it holds live. With the collector's defaults alone, a session watching
// 100,000 files reached 3–4 times its live heap at its peak (a rescan's walk
// and a burst's batches make garbage by the tens of MiB, and the pages the
// collector frees go back to the system slowly). A soft memory limit that
// follows the live heap has the collector run earlier and return pages at
// once, for some CPU during bursts; see docs/performance.md.
package memlimit

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Floor is the least limit set: below it the collector's defaults already
// keep a small session small, and a limit would only cost CPU. A session
// watching 100,000 files holds about 25 MiB live when idle: with 64 MiB
// the floor, not the live heap, set its limit.
const Floor = 32 << 20

// headroom is how far above the live heap (and the runtime's other memory)
// the limit sits: the garbage allowed between collections, as GOGC=35 would
// allow, but with pages returned at once. At 0.5 a burst of 10,000 files
// over a tree of 100,000 peaked at 104.5 MiB resident, over the 100 MiB
// the session is held to (docs/performance.md).
const headroom = 0.35

// For is the limit for a session whose live heap is live bytes and whose
// runtime holds other bytes besides the heap (stacks, metadata).
func For(live, other uint64) int64 {
	l := float64(live)*(1+headroom) + float64(other)
	return int64(max(l, Floor))
}

var once sync.Once

// Follow sets a soft memory limit after every collection from the live heap
// it found (see For), for the life of the process. It does nothing when the
// user set GOMEMLIMIT (the runtime's own setting stands) or GOGC=off.
func Follow() {
	if os.Getenv("GOMEMLIMIT") != "" || os.Getenv("GOGC") == "off" {
		return
	}
	once.Do(func() {
		debug.SetMemoryLimit(Floor)
		arm()
	})
}

// arm runs adjust after the next collection: a finalizer runs once the
// object it is set on was found unreachable, which a collection does.
func arm() {
	runtime.SetFinalizer(new([16]byte), func(*[16]byte) {
		adjust()
		arm()
	})
}

var samples = []metrics.Sample{
	{Name: "/gc/heap/live:bytes"},
	{Name: "/memory/classes/total:bytes"},
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/memory/classes/heap/unused:bytes"},
	{Name: "/memory/classes/heap/free:bytes"},
	{Name: "/memory/classes/heap/released:bytes"},
}

func adjust() {
	metrics.Read(samples)
	v := func(i int) uint64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return samples[i].Value.Uint64()
	}
	live := v(0)
	// What the runtime holds besides the heap's spans: stacks, the
	// collector's metadata, the profiling buckets.
	heap := v(2) + v(3) + v(4) + v(5)
	other := uint64(0)
	if total := v(1); total > heap {
		other = total - heap
	}
	if live == 0 {
		return
	}
	debug.SetMemoryLimit(For(live, other))
}
