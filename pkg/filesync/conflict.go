package filesync

import (
	"fmt"
	"path"
	"path/filepath"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// conflict says which side of a mapping's root is a directory when the other is not.
type conflict uint8

const (
	remoteIsDir  conflict = iota // file mapping, directory in the container
	remoteNotDir                 // directory mapping, something else in the container
	localIsDir                   // file mapping whose local file became a directory
	localNotDir                  // directory mapping whose local directory became a file
)

// conflictError is the one line that refuses a type conflict at m's root.
// where names the container, or is "" when unknown.
func conflictError(m *mapping, where string, c conflict) *remote.SyncError {
	if where == "" {
		where = "the container"
	}
	inside := fmt.Sprintf("%s:%s", m.Local, path.Join(string(m.Remote), filepath.Base(m.root)))
	se := &remote.SyncError{Kind: remote.ErrTypeConflict, Op: "checking the mapping", Err: remote.ErrTypeConflict}
	switch c {
	case remoteIsDir:
		se.Msg = fmt.Sprintf("mapping %q: %s is a directory in %s, and a file never replaces one", m.Mapping, m.Remote, where)
		se.Hint = "map the file to a path inside it, e.g. " + inside
	case remoteNotDir:
		se.Msg = fmt.Sprintf("mapping %q: %s is not a directory in %s, and a directory never replaces it", m.Mapping, m.Remote, where)
		se.Hint = "map the directory to a path that is a directory or missing in the container"
	case localIsDir:
		se.Msg = fmt.Sprintf("mapping %q: %s is now a directory, and a directory never replaces the remote file", m.Mapping, m.root)
		se.Hint = "restart livesync with the directory mapped to another remote path"
	case localNotDir:
		se.Msg = fmt.Sprintf("mapping %q: %s is now a file, and a file never replaces the remote directory", m.Mapping, m.root)
		se.Hint = "restart livesync with the file mapped to a path inside the directory, e.g. " + inside
	}
	return se
}

// localRootConflict refuses a local root whose type no longer fits its
// mapping: the remote side was made for the other type.
func (m *mapping) localRootConflict(t EntryType) error {
	switch {
	case m.file && t == TypeDir:
		return conflictError(m, "", localIsDir)
	case !m.file && t == TypeFile:
		return conflictError(m, "", localNotDir)
	}
	return nil
}
