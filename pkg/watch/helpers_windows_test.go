package watch

import (
	"os"
	"testing"
)

// tempDir is t.TempDir for a directory a test watches, except for its
// removal. notify's Stop does not close a directory's handle while the
// directory exists: it marks the watch and closes the handle when the
// directory's next event completes (rjeczalik/notify watcher_readdcw.go,
// unwatch and loopstate), so after Close the handle may stay open until the
// process exits. Where deletes have POSIX semantics (NTFS on Windows 10 1607
// and later) that does not matter; where they do not (FAT, older Windows,
// wine) the directory stays, delete-pending, and t.TempDir's cleanup fails.
// So a directory that cannot be removed yet is logged and left to whoever
// runs the test binary (hack/wine.sh empties the prefix's temp directory
// after each run).
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "livesync-watch-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("left for the test runner to remove (a directory handle notify keeps after Stop): %v", err)
		}
	})
	return dir
}
