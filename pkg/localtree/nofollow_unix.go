//go:build unix

package localtree

import (
	"os"
	"syscall"
)

// openFlags open a path for reading without following a symlink and without
// waiting: opening a FIFO for reading blocks until a writer shows up, and a
// device's open may block too. O_NONBLOCK is cleared again for regular files.
const openFlags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// setBlocking puts a regular file's descriptor back into blocking mode.
func setBlocking(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return serr
}
