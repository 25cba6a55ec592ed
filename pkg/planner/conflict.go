package planner

import (
	"fmt"
	"path"
	"path/filepath"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// Conflict says which side of a mapping's root is a directory when the other is not.
type Conflict uint8

// The conflicts at a mapping's root.
const (
	RemoteIsDir  Conflict = iota // file mapping, directory in the container
	RemoteNotDir                 // directory mapping, something else in the container
	LocalIsDir                   // file mapping whose local file became a directory
	LocalNotDir                  // directory mapping whose local directory became a file
)

// ConflictError is the one line that refuses a type conflict at m's root.
// where names the container, or is "" when unknown.
func ConflictError(m *Resolved, where string, c Conflict) *remote.SyncError {
	if where == "" {
		where = "the container"
	}
	inside := fmt.Sprintf("%s:%s", m.Local, path.Join(string(m.Remote), filepath.Base(m.Root)))
	se := &remote.SyncError{Kind: remote.ErrTypeConflict, Op: "checking the mapping", Err: remote.ErrTypeConflict}
	switch c {
	case RemoteIsDir:
		se.Msg = fmt.Sprintf("mapping %q: %s is a directory in %s, and a file never replaces one", m.Mapping, m.Remote, where)
		se.Hint = "map the file to a path inside it, e.g. " + inside
	case RemoteNotDir:
		se.Msg = fmt.Sprintf("mapping %q: %s is not a directory in %s, and a directory never replaces it", m.Mapping, m.Remote, where)
		se.Hint = "map the directory to a path that is a directory or missing in the container"
	case LocalIsDir:
		se.Msg = fmt.Sprintf("mapping %q: %s is now a directory, and a directory never replaces the remote file", m.Mapping, m.Root)
		se.Hint = "restart livesync with the directory mapped to another remote path"
	case LocalNotDir:
		se.Msg = fmt.Sprintf("mapping %q: %s is now a file, and a file never replaces the remote directory", m.Mapping, m.Root)
		se.Hint = "restart livesync with the file mapped to a path inside the directory, e.g. " + inside
	}
	return se
}

// localRootConflict refuses a local root whose type no longer fits its
// mapping: the remote side was made for the other type.
func (m *Resolved) localRootConflict(t EntryType) error {
	switch {
	case m.File && t == TypeDir:
		return ConflictError(m, "", LocalIsDir)
	case !m.File && t == TypeFile:
		return ConflictError(m, "", LocalNotDir)
	}
	return nil
}
