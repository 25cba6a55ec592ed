//go:build linux

package localtree

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// swap exchanges the entries a and b of dir atomically (renameat2
// RENAME_EXCHANGE); errNoSwap where the file system cannot.
func swap(dir *os.File, a, b string) error {
	return renameat2(dir, a, b, unix.RENAME_EXCHANGE)
}

// renameNoReplace renames a to b in dir unless b exists (fs.ErrExist),
// atomically; errNoSwap where the file system cannot.
func renameNoReplace(dir *os.File, a, b string) error {
	return renameat2(dir, a, b, unix.RENAME_NOREPLACE)
}

func renameat2(dir *os.File, a, b string, flags uint) error {
	rc, err := dir.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.Renameat2(int(fd), a, int(fd), b, flags)
	}); err != nil {
		return err
	}
	if errors.Is(serr, unix.EINVAL) || errors.Is(serr, unix.ENOSYS) || errors.Is(serr, unix.EOPNOTSUPP) {
		return errNoSwap
	}
	return serr
}
