//go:build unix

package localtree

import (
	"io/fs"
	"syscall"
)

// DeviceOf returns the device fi's file lives on (st_dev).
func DeviceOf(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Dev), true // int32 on darwin, uint64 on linux
}

// OwnerOf returns the uid and gid of fi's file.
func OwnerOf(fi fs.FileInfo) (uid, gid uint32, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Uid, st.Gid, true
}
