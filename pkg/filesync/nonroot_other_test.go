//go:build !linux

package filesync

import (
	"os"
	"testing"
)

// asNobody: dropping to uid 65534 is done on Linux only (nonroot_linux_test.go);
// elsewhere the test runs as whoever runs it, which must not be root.
func asNobody(t *testing.T) bool {
	t.Helper()
	if os.Getuid() == 0 {
		t.Skip("runs as root here, and only Linux drops to uid 65534")
	}
	return true
}
