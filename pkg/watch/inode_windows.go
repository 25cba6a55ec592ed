package watch

import (
	"io/fs"
	"syscall"
)

// inode stands in for a file ID on Windows, where a FileInfo carries none
// (reading the ID costs an open per file per poll): the creation time, which
// a file replaced by an atomic save (a new file renamed over it) changes.
// NTFS "tunneling" may give a name re-created within 15 s its old creation
// time; such a same-size, same-mtime replace then goes unseen, as it would
// with no identity at all.
func inode(fi fs.FileInfo) uint64 {
	if d, ok := fi.Sys().(*syscall.Win32FileAttributeData); ok {
		return uint64(d.CreationTime.Nanoseconds())
	}
	return 0
}
