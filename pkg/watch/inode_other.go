//go:build !unix && !windows

package watch

import "io/fs"

func inode(fs.FileInfo) uint64 { return 0 }
