//go:build !windows

package watch

import "testing"

// tempDir is t.TempDir (see helpers_windows_test.go for why Windows differs).
func tempDir(t *testing.T) string {
	t.Helper()
	return t.TempDir()
}
