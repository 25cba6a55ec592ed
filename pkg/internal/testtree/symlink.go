package testtree

import (
	"io/fs"
	"os"
	"runtime"
	"testing"
)

// Symlink makes the link newname -> oldname for a test that needs one, and
// skips the test where the system makes none: Windows without the symlink
// privilege (Developer Mode) refuses, and wine 8 reports success from
// CreateSymbolicLinkW (a stub) yet creates nothing, which the Lstat catches.
func Symlink(t testing.TB, oldname, newname string) {
	t.Helper()
	if err := os.Symlink(oldname, newname); err != nil {
		if runtime.GOOS == "windows" {
			t.Skip("no symlinks on this Windows (needs Developer Mode or the symlink privilege):", err)
		}
		t.Fatal(err)
	}
	if fi, err := os.Lstat(newname); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Skipf("os.Symlink(%q) reported success but made no link (wine 8's CreateSymbolicLinkW is a stub): %v", newname, err)
	}
}
