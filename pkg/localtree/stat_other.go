//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd && !dragonfly

package localtree

import "io/fs"

// IdentityOf reports that this platform does not say a file's inode and
// change time: unchanged files are then told by their content.
func IdentityOf(fs.FileInfo) (ino uint64, ctime int64, ok bool) { return 0, 0, false }
