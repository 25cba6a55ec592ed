//go:build !unix

package filesync

import "io/fs"

// deviceOf reports that this platform does not say which device a file lives on.
func deviceOf(fs.FileInfo) (uint64, bool) { return 0, false }

// ownerOf reports that this platform does not say who owns a file.
func ownerOf(fs.FileInfo) (uid, gid uint32, ok bool) { return 0, 0, false }
