//go:build !windows

package localtree

import "io/fs"

// Perm returns the permission bits fi's entry should have in a container:
// its own, where the local system has Unix modes.
func Perm(fi fs.FileInfo) fs.FileMode { return fi.Mode().Perm() }

// KeepExec returns local: where the local system has exec bits, they are
// what the local side says.
func KeepExec(local, _ fs.FileMode) fs.FileMode { return local }
