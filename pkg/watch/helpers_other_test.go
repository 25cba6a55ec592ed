//go:build !windows

package watch

import "testing"

// releaseRoots: only Windows needs a wait after Close (helpers_windows_test.go).
func releaseRoots(*testing.T, []string) {}
