package watch

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/windows"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testwait"
)

// releaseRoots waits, after Close, until notify has closed its handle on
// each directory root, so that t.TempDir can remove it. notify's Stop does
// not close a directory's handle while the directory exists: it marks the
// watch and closes the handle when the next event of that directory
// completes (rjeczalik/notify watcher_readdcw.go, unwatch and loopstate).
// Where a delete has POSIX semantics (NTFS on Windows 10 1607 and later) a
// directory still open goes at once; elsewhere (FAT, older Windows, wine)
// it stays until the handle closes, and its parent cannot be removed. So
// this makes that event (a file created and removed in the root) and waits
// until the directory can be opened with no sharing, i.e. no handle is left.
func releaseRoots(t *testing.T, roots []string) {
	t.Helper()
	for _, root := range roots {
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			continue
		}
		poke := filepath.Join(root, ".release-watch")
		if err := os.WriteFile(poke, nil, 0o644); err != nil {
			t.Errorf("releasing the watch of %s: %v", root, err)
			continue
		}
		if err := os.Remove(poke); err != nil {
			t.Errorf("releasing the watch of %s: %v", root, err)
			continue
		}
		p, err := syscall.UTF16PtrFromString(root)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(testwait.Timeout)
		for {
			h, err := syscall.CreateFile(p, syscall.GENERIC_READ, 0, nil, syscall.OPEN_EXISTING, syscall.FILE_FLAG_BACKUP_SEMANTICS, 0)
			if err == nil {
				syscall.CloseHandle(h)
				break
			}
			if !errors.Is(err, windows.ERROR_SHARING_VIOLATION) {
				t.Errorf("opening %s: %v", root, err)
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("notify still holds a handle on %s %v after Close", root, testwait.Timeout)
				break
			}
			runtime.Gosched()
		}
	}
}
