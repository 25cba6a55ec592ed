// Package testwait is test support: waiting on what the code under test delivers, so a hang
// fails the test with what hung instead of running into go test's timeout.
package testwait

import (
	"runtime"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// Timeout bounds every wait: long enough for a loaded CI machine, short of go test's own.
const Timeout = 20 * time.Second

// Result returns what ch delivers, failing the test if nothing comes: the code under test
// hangs.
func Result[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Timeout):
		t.Fatalf("%s hangs", what)
		panic("unreachable")
	}
}

// Waiters yields until at least n timers wait on fc: the code under test reached the wait a
// test steps the clock past.
func Waiters(t testing.TB, fc *clocktesting.FakeClock, n int) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for fc.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters on the clock, want %d", fc.Waiters(), n)
		}
		runtime.Gosched()
	}
}

// Until yields until cond holds, failing the test if it does not within
// Timeout: for what the code under test settles in the background (a dead
// stream forgotten after its caller had its error).
func Until(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, Timeout)
		}
		time.Sleep(time.Millisecond)
	}
}
