//go:build unix

package watch

import (
	"io/fs"
	"syscall"
)

// inode tells a file replaced by another of the same size and mtime, as
// after a rename over it, from one left alone.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
