//go:build unix

// Heap profiles of the running binary for the bench (test/bench), which
// measures where a long session's memory goes. Nothing happens unless the
// environment names a directory in heapProfileEnv: there, SIGUSR1
// writes heap-<n>.pprof, and heap-peak.pprof is rewritten whenever a
// collection finds more live heap than any before it, so the bench reads
// what was live at the session's peak without having to catch the moment.
// Not for users: the profiles name the process's own paths and cost a
// goroutine and a read of the runtime's counters every 50 ms.

package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"syscall"
	"time"
)

// heapProfileEnv names the directory the profiles go to; unset,
// startHeapProfiles does nothing.
const heapProfileEnv = "LIVESYNC_HEAP_PROFILE"

// livePeriod is how often the live heap is compared with its high so far.
const livePeriod = 50 * time.Millisecond

// startHeapProfiles begins writing profiles when heapProfileEnv is set; the
// returned func stops that (and writes heap-exit.pprof).
func startHeapProfiles() (stop func()) {
	dir := os.Getenv(heapProfileEnv)
	if dir == "" {
		return func() {}
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(livePeriod)
		defer t.Stop()
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		var high uint64
		for n := 0; ; {
			select {
			case <-usr1:
				runtime.GC() // the profile says what the last collection found live: make that now
				n++
				writeHeapProfile(filepath.Join(dir, fmt.Sprintf("heap-%d.pprof", n)))
			case <-t.C:
				metrics.Read(sample)
				// A new high by less than 1 MiB is not worth a profile.
				if v := sample[0].Value.Uint64(); v > high+1<<20 {
					high = v
					writeHeapProfile(filepath.Join(dir, "heap-peak.pprof"))
				}
			case <-done:
				writeHeapProfile(filepath.Join(dir, "heap-exit.pprof"))
				return
			}
		}
	}()
	return func() {
		signal.Stop(usr1)
		close(done)
		<-exited
	}
}

// writeHeapProfile writes the heap profile to name through a temp file, so a reader
// never sees half of one; a failure is said on stderr and otherwise
// ignored: the profiles are for the bench, never the session's concern.
func writeHeapProfile(name string) {
	tmp := name + ".tmp"
	f, err := os.Create(tmp)
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "heapprof: writing %s: %v\n", name, err)
	}
}
