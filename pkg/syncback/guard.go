package syncback

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// The upload side of the three-way rules (Runner is the engine's
// filesync.UploadGuard): while sync-back is on, a batch that replaces or
// deletes a listed file in the source container first has apply.sh check
// that the container still holds the ancestor there (the index's confirmed
// entry, or nothing); a container change that no scan has seen yet fails
// that check, and the batch goes without the path: a conflict, reported
// like one a pass finds. Both sides stay as they are until the next local
// save of the path, which wins: it goes without the check. Until then a
// batch that plans the path again (a walk after a failure) leaves it out.
// Other replicas are upload-only: they get the source's content whatever
// they hold, so they are never checked.

// mark is a local file as it was when a conflict was reported at it.
type mark struct {
	exists bool
	mode   os.FileMode
	size   int64
	mtime  time.Time
}

func markOf(name string) mark {
	fi, err := os.Lstat(name)
	if err != nil {
		return mark{}
	}
	return mark{exists: true, mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime()}
}

func conflictKey(t filesync.Target, i int, rel string) string {
	return t.String() + "@" + t.ContainerID + "\x00" + strconv.Itoa(i) + "\x00" + rel
}

// Expect returns apply.sh's precondition for u: none outside the source or
// the globs, nor where the ancestor is unknown (an upload the container
// never confirmed) or a directory or link; skip while u is a conflict that
// no local save has followed yet.
func (r *Runner) Expect(u filesync.Upload) (check string, skip bool) {
	if !r.IsSource(u.Target) || !r.listedAt(u.Rel, u.Ancestor.Type == remote.TypeDir && u.Has) {
		return "", false
	}
	key := conflictKey(u.Target, u.Mapping, u.Rel)
	r.mu.Lock()
	m, conflicted := r.conflicts[key]
	if conflicted && markOf(u.Local) != m {
		delete(r.conflicts, key) // saved since: the next local save wins
	}
	r.mu.Unlock()
	switch {
	case conflicted:
		return "", markOf(u.Local) == m
	case !u.Known:
		return "", false
	case !u.Has:
		return remote.ExpectAbsent("./" + u.Rel), false
	case u.Ancestor.Type == remote.TypeFile:
		a := u.Ancestor
		return remote.ExpectFile("./"+u.Rel, a.Sum, a.Size, a.MTime.Unix()), false
	case u.Ancestor.Type == remote.TypeDir && u.Entries > 0:
		// A directory deleted whole: a file the container made in it
		// since the last scan must not go with it.
		return remote.ExpectAtMost("./"+u.Rel, u.Entries), false
	}
	return "", false
}

// Changed reports the conflict at u, which the batch left alone.
func (r *Runner) Changed(u filesync.Upload, now remote.Changed) {
	st := r.stateOf(u.Target)
	if st == nil {
		return // no longer the source
	}
	r.conflict(st, u.Target, u.Mapping, u.Rel, u.Local, localSide(u.Local).Sum, sumOf(now.Sum()))
}

// stateOf returns what passes keep for t while it is the source.
func (r *Runner) stateOf(t filesync.Target) *state {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.source == nil || *r.source != t {
		return nil
	}
	return r.stateLocked(t)
}

// markConflict records the local file at rel as it is when the conflict is
// first reported: the state a local save must change for the upload to go
// without its check. A pass that finds the conflict again keeps the mark,
// so a save that a pass sees before its batch still wins.
func (r *Runner) markConflict(t filesync.Target, i int, rel, local string) {
	key := conflictKey(t, i, rel)
	r.mu.Lock()
	if _, ok := r.conflicts[key]; !ok {
		r.conflicts[key] = markOf(local)
	}
	r.mu.Unlock()
}

// settle forgets the conflict at rel: both sides hold the same again.
func (r *Runner) settle(t filesync.Target, i int, rel string) {
	r.mu.Lock()
	delete(r.conflicts, conflictKey(t, i, rel))
	r.mu.Unlock()
}

// listedAt reports whether rel comes back, or for a directory whether
// something under it may: it is under a glob's start point, or holds one.
func (r *Runner) listedAt(rel string, isDir bool) bool {
	if !isDir {
		return r.globs.Match(rel, false)
	}
	for _, s := range r.globs.Starts() {
		s = strings.TrimPrefix(strings.TrimPrefix(s, "."), "/")
		if s == "" || rel == s || strings.HasPrefix(rel, s+"/") || strings.HasPrefix(s, rel+"/") {
			return true
		}
	}
	return false
}

// Listed reports whether rel (of a directory mapping) comes back from t:
// t is the source and a glob lists rel itself (filesync.Lister). A start
// against a saved ancestor leaves such a path's container change to the
// first pass, which brings it home or reports the conflict.
func (r *Runner) Listed(t filesync.Target, _ int, rel string, isDir bool) bool {
	return r.IsSource(t) && r.globs.Match(rel, isDir)
}
