package localtree

import "io/fs"

// Perm returns the permission bits fi's entry should have in a container.
// Windows has no Unix modes: Go reports every file 0666 (0444 when
// read-only) and every directory 0777, which a root tar in the container
// would restore, leaving the tree writable by every user there. Sent
// instead: what a Unix umask of 022 gives, 0644 (0444 read-only) and 0755.
func Perm(fi fs.FileInfo) fs.FileMode {
	switch {
	case fi.IsDir():
		return 0o755
	case fi.Mode()&fs.ModeSymlink != 0:
		return 0o777
	case fi.Mode().Perm()&0o200 == 0:
		return 0o444
	}
	return 0o644
}

// KeepExec returns local with the exec bits of known, the mode the
// container holds (listed, or recorded when last synced): Windows has no
// exec bits to say otherwise, and sending none would strip a script's.
func KeepExec(local, known fs.FileMode) fs.FileMode { return local&^0o111 | known&0o111 }
