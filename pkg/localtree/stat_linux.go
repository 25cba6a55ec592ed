//go:build linux

package localtree

import (
	"io/fs"
	"syscall"
)

// IdentityOf returns fi's inode and change time (nanoseconds): with size
// and mtime, what tells an unchanged file without reading it (git's index
// keeps the same). ok is false where the platform does not say.
func IdentityOf(fi fs.FileInfo) (ino uint64, ctime int64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Ino, st.Ctim.Nano(), true
}
