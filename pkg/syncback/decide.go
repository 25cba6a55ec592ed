package syncback

import (
	"io/fs"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// Side is what one side holds at a path: the ancestor (what the source
// container confirmed, from its index), the local tree now, or the
// container now (its scan).
type Side struct {
	Present bool
	// Unknown: the ancestor is not known (an upload whose outcome the
	// container never confirmed): nothing is decided against it.
	Unknown bool
	Type    remote.EntryType
	Mode    fs.FileMode // permission bits; files compare by the exec bits
	Size    int64
	MTime   int64     // seconds
	Sum     *[32]byte // sha256 of a file's content, nil when unknown
	// Unhashed: the container's file, listed without its hash by a scan
	// that hashes (written while the scan ran: see remote.Scan). Its size
	// and mtime say nothing of its content: a local save of the same size
	// in the same second is not the same change. Nothing is decided on it
	// until a scan hashes it.
	Unhashed bool
	Link     string
	// hashed is the local file's stat as Sum was read from it (see
	// localSide): what is recorded when it becomes the ancestor, so that a
	// save after the hash (even one that keeps size and mtime) moves its
	// inode or ctime and is seen.
	hashed fs.FileInfo
}

// Action is what a sync-back pass does at one path.
type Action int

// Actions, see Decide.
const (
	// Keep: nothing comes back (nothing changed in the container, or what
	// changed is a delete that is not brought back).
	Keep Action = iota
	// Download the container's file over the local one, which is still
	// the ancestor (or absent, as the ancestor is).
	Download
	// MakeDir: a new directory in the container, none locally.
	MakeDir
	// Record: both sides made the same change; the ancestor becomes it.
	Record
	// Conflict: both sides changed; both stay as they are.
	Conflict
	// DeleteLocal: the container deleted what the local side still holds
	// unchanged, and deletes come back.
	DeleteLocal
	// Refuse: a symlink, which never comes back.
	Refuse
)

var actionNames = [...]string{"keep", "download", "mkdir", "record", "conflict", "delete", "refuse"}

// String returns the action's name.
func (a Action) String() string { return actionNames[a] }

// Decide is the three-way rule at one path: the container's side against
// the ancestor, and the local side against the ancestor. deletes is
// --sync-back-deletes. It never returns Download or DeleteLocal when the
// local side differs from the ancestor (a local edit is never overwritten),
// and a modification wins over a deletion.
func Decide(anc, local, rem Side, deletes bool) Action {
	switch {
	case anc.Unknown:
		return Keep // the upload side sends it again
	case rem.Unhashed:
		return Keep // the next scan hashes it
	case same(rem, anc):
		return Keep // unchanged in the container: a local change goes up
	case !rem.Present:
		if !deletes || !same(local, anc) {
			return Keep
		}
		return DeleteLocal
	case rem.Type == remote.TypeSymlink:
		return Refuse
	case same(local, rem):
		return Record
	case !same(local, anc):
		return Conflict
	case anc.Present && anc.Type != rem.Type:
		return Conflict // a type change: never a local file replaced by a directory
	case rem.Type == remote.TypeDir:
		return MakeDir
	}
	return Download
}

// same reports whether a and b hold the same: the same type, and for files
// the same exec bits and content (by hash when both are known, else by size and
// mtime), for links the same target.
func same(a, b Side) bool {
	switch {
	case !a.Present || !b.Present:
		return a.Present == b.Present
	case a.Type != b.Type:
		return false
	case a.Type == remote.TypeSymlink:
		return a.Link == b.Link
	case a.Type != remote.TypeFile:
		return true
	case a.Mode&0o111 != b.Mode&0o111:
		// Only the exec bits: a non-root tar applies its umask, so the
		// container's group and other bits may differ from what was sent.
		return false
	case a.Sum != nil && b.Sum != nil:
		return *a.Sum == *b.Sum
	}
	return a.Size == b.Size && a.MTime == b.MTime
}
