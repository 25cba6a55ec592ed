//go:build darwin

package localtree

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// swap exchanges the entries a and b of dir atomically (renameatx_np
// RENAME_SWAP); errNoSwap where the file system cannot.
func swap(dir *os.File, a, b string) error {
	return renameatx(dir, a, b, unix.RENAME_SWAP)
}

// renameNoReplace renames a to b in dir unless b exists (fs.ErrExist),
// atomically; errNoSwap where the file system cannot.
func renameNoReplace(dir *os.File, a, b string) error {
	return renameatx(dir, a, b, unix.RENAME_EXCL)
}

func renameatx(dir *os.File, a, b string, flags uint32) error {
	rc, err := dir.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.RenameatxNp(int(fd), a, int(fd), b, flags)
	}); err != nil {
		return err
	}
	if errors.Is(serr, unix.EINVAL) || errors.Is(serr, unix.ENOTSUP) {
		return errNoSwap
	}
	return serr
}
