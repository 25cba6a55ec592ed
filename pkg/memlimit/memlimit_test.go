package memlimit

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFor(t *testing.T) {
	for _, tt := range []struct {
		live, other uint64
		want        int64
	}{
		{live: 1 << 20, other: 4 << 20, want: Floor},
		{live: 40 << 20, other: 6 << 20, want: 60 << 20}, // under the floor it was before
		{live: 60 << 20, other: 8 << 20, want: 89 << 20},
		{live: 400 << 20, other: 16 << 20, want: 556 << 20},
	} {
		if got := For(tt.live, tt.other); got != tt.want {
			t.Errorf("For(%d MiB, %d MiB) = %d MiB, want %d MiB", tt.live>>20, tt.other>>20, got>>20, tt.want>>20)
		}
	}
}

// The limit follows the live heap up and down, a collection behind.
func TestFollow(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("GOGC", "")
	defer debug.SetMemoryLimit(math.MaxInt64)
	Follow()
	limit := func() int64 { return debug.SetMemoryLimit(-1) }
	held := make([]byte, 200<<20)
	for i := range held {
		held[i] = byte(i)
	}
	if !settles(func() bool { return limit() >= 270<<20 }) {
		t.Fatalf("with 200 MiB live the limit stayed at %d MiB", limit()>>20)
	}
	runtime.KeepAlive(held) // its last use: the 200 MiB are garbage after it
	if !settles(func() bool { return limit() < 100<<20 }) {
		t.Fatalf("with 200 MiB freed the limit stayed at %d MiB", limit()>>20)
	}
}

// settles runs collections until ok holds, at most 50: the finalizer that
// adjusts the limit runs on its own goroutine after one.
func settles(ok func() bool) bool {
	for range 50 {
		runtime.GC()
		runtime.Gosched()
		if ok() {
			return true
		}
	}
	return ok()
}
