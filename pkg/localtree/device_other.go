//go:build !unix

package localtree

import "io/fs"

// DeviceOf reports that this platform does not say which device a file lives on.
func DeviceOf(fs.FileInfo) (uint64, bool) { return 0, false }

// OwnerOf reports that this platform does not say who owns a file.
func OwnerOf(fs.FileInfo) (uid, gid uint32, ok bool) { return 0, 0, false }
