// Package testwait is test support: waiting on what the code under test delivers, so a hang
// fails the test with what hung instead of running into go test's timeout.
package testwait

import (
	"testing"
	"time"
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
