package syncback

import (
	"bytes"
	"cmp"
	"errors"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncstate"
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

// mark is a local file as it was when a conflict was reported at it. Its
// inode and ctime (where the platform has them) tell a save that keeps the
// size and mtime (a rename of a copy over it, cp -p, touch -r) from no save.
type mark struct {
	exists bool
	mode   os.FileMode
	size   int64
	mtime  time.Time
	ino    uint64
	ctime  int64
}

// seen is what the container held at a conflict's path when it was
// reported: the next local save goes checked against it, so a container
// change made after the conflict is a conflict again, never overwritten
// unseen. Neither known (a directory's conflict): the save goes unchecked.
type seen struct {
	sum    *[32]byte
	absent bool
	// stat: the container has no sha256sum and said the file's size and
	// mtime ("<size>:<mtime>", see remote.Changed).
	stat        bool
	size, mtime int64
}

// seenOf is what now says the container holds: its sha256, nothing, or
// where it cannot hash, the file's size and mtime.
func seenOf(now remote.Changed) seen {
	s := seen{sum: sumOf(now.Sum()), absent: now.Now == "-"}
	if s.sum == nil && !s.absent {
		if a, b, ok := strings.Cut(now.Now, ":"); ok {
			size, err1 := strconv.ParseInt(a, 10, 64)
			mtime, err2 := strconv.ParseInt(b, 10, 64)
			s.stat, s.size, s.mtime = err1 == nil && err2 == nil, size, mtime
		}
	}
	return s
}

// conflicted is a conflict's marks: the local file's, and the container's.
type conflicted struct {
	local  mark
	remote seen
}

func markOf(name string) mark {
	fi, err := os.Lstat(name)
	if err != nil {
		return mark{}
	}
	return markFrom(fi)
}

func markFrom(fi fs.FileInfo) mark {
	ino, ctime, _ := localtree.IdentityOf(fi)
	return mark{exists: true, mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime(), ino: ino, ctime: ctime}
}

// markSide is the mark of the local file at name as s, a pass's decision,
// saw it: the stat its hash was read under, or nothing where it found
// nothing. A save that lands between the pass's read and its mark is then
// a save after the conflict, never taken into the mark (where the mark was
// read afresh, the save was absorbed, and the next pass downloaded over it:
// TestModel seed 5161543048578407081 round 135).
func markSide(name string, s Side) mark {
	switch {
	case !s.Present:
		return mark{}
	case s.hashed != nil:
		return markFrom(s.hashed)
	}
	return markOf(name)
}

func conflictKey(t filesync.Target, i int, rel string) string {
	return targetKey(t) + strconv.Itoa(i) + "\x00" + rel
}

// targetKey is what every conflictKey of t begins with.
func targetKey(t filesync.Target) string { return t.String() + "@" + t.ContainerID + "\x00" }

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
	c, isConflict := r.conflicts[key]
	saved := isConflict && markOf(u.Local) != c.local
	if saved {
		delete(r.conflicts, key) // saved since: the next local save wins
	}
	r.mu.Unlock()
	switch {
	case saved && c.remote.sum != nil:
		// Over what the conflict showed the container holding, and nothing
		// else: a container change since is a conflict again.
		return remote.ExpectFile("./"+u.Rel, c.remote.sum, 0, 0), false
	case saved && c.remote.absent:
		return remote.ExpectAbsent("./" + u.Rel), false
	case saved && c.remote.stat:
		// An image without sha256sum: over the size and mtime the conflict
		// showed, and nothing else.
		return remote.ExpectFile("./"+u.Rel, nil, c.remote.size, c.remote.mtime), false
	case isConflict && !saved:
		return "", true
	// Saved over a conflict that says nothing of the container's side (a
	// directory's, or not a regular file): the usual checks against the
	// ancestor below, never none.
	case !u.Known && len(u.Maybe) > 0:
		// After a batch the container never acknowledged (a stream cut, a
		// lost ack): it holds what it held before or what the batch sent,
		// and anything else is a container change, a conflict as any.
		// Before, the retry went unchecked and overwrote a container
		// write made in between.
		return remote.ExpectOneOf("./"+u.Rel, u.Maybe), false
	case !u.Known:
		return "", false
	case !u.Has:
		return remote.ExpectAbsent("./" + u.Rel), false
	case u.Ancestor.Type == remote.TypeFile:
		a := u.Ancestor
		return remote.ExpectFile("./"+u.Rel, a.Sum, a.Size, a.MTime.Unix()), false
	case u.Ancestor.Type == remote.TypeDir && u.Entries > 0:
		// A directory deleted whole: a file the container made in it
		// since the last scan must not go with it. What a pass found there
		// that never comes back (ignored, or no glob lists it) goes, as
		// it does without sync-back (see checkDirs).
		n := u.Entries
		r.mu.Lock()
		if a, ok := r.allow[key]; ok && a.entries == u.Entries {
			n += a.extra
		}
		delete(r.allow, key) // once: a failure looks again
		r.mu.Unlock()
		return remote.ExpectAtMost("./"+u.Rel, n), false
	}
	return "", false
}

// Skips reports whether Expect skips the delete of rel: a conflict that no
// local save has followed (filesync.Skipper).
func (r *Runner) Skips(t filesync.Target, i int, rel, local string) bool {
	if !r.IsSource(t) {
		return false
	}
	standing, _ := r.inConflict(t, i, rel, local)
	return standing
}

// Changed reports the conflict at u, which the batch left alone; a
// directory that holds more than the index knows of is looked at by the
// next pass first (see checkDirs).
func (r *Runner) Changed(u filesync.Upload, now remote.Changed) {
	st := r.stateOf(u.Target)
	if st == nil {
		return // no longer the source
	}
	if u.Ancestor.Type == remote.TypeFile && now.Now == "-" {
		// The container deleted the file: both sides agree when the local side
		// deleted it too, and a local edit wins over the delete. Neither is a
		// conflict; the next pass forgets the ancestor (see checkDirs), so the
		// path is decided again from nothing on either side.
		r.mu.Lock()
		r.dirChecks[conflictKey(u.Target, u.Mapping, u.Rel)] = u
		r.mu.Unlock()
		r.kickPass()
		return
	}
	if u.Ancestor.Type == remote.TypeDir && strings.HasPrefix(now.Now, "+") {
		r.mu.Lock()
		r.dirChecks[conflictKey(u.Target, u.Mapping, u.Rel)] = u
		r.mu.Unlock()
		r.kickPass()
		return
	}
	local := localSide(u.Local).Sum
	if local != nil && now.Now == hexSum(local) {
		// The container holds the local file already: a try of this batch
		// whose ack was lost applied it, and the retry checked the ancestor.
		// No conflict; the next pass records it (both sides the same).
		return
	}
	r.conflictSeen(st, u.Target, u.Mapping, u.Rel, u.Local, markOf(u.Local), local, seenOf(now))
}

// containerGone records that the container no longer holds the file at rel
// (local, its local path) where the index had one: the ancestor is
// forgotten, so a local delete is done and a local file goes up, checked
// against nothing being there.
func containerGone(v *filesync.Visit, i int, rel, local string) {
	if _, has, _ := v.Entry(i, rel); has {
		v.Forget(i, rel)
	}
	if _, err := os.Lstat(local); err == nil {
		v.Replan(i, rel)
	}
}

// allowance is what checkDirs found under a directory deleted locally that
// never comes back: extra entries, when the index held entries there.
type allowance struct{ extra, entries int }

// checkDirs looks, for each directory delete of v's target that failed its
// count, at what the container holds under it: when every entry the index
// lacks is one that never comes back (ignored, or no glob lists it), the
// delete is planned again with those counted; else it is a conflict, and
// what is listed comes home like any new container file.
func (r *Runner) checkDirs(v *filesync.Visit, st *state) error {
	prefix := targetKey(v.Target)
	r.mu.Lock()
	var checks []filesync.Upload
	for key, u := range r.dirChecks {
		if strings.HasPrefix(key, prefix) {
			checks = append(checks, u)
			delete(r.dirChecks, key)
		}
	}
	r.mu.Unlock()
	for n, u := range checks {
		_, dir, ignored, ok := v.Mapping(u.Mapping)
		anc, has, known := v.Entry(u.Mapping, u.Rel)
		if u.Ancestor.Type == remote.TypeFile && (!has || !known && anc.Type == remote.TypeFile || anc.Type == remote.TypeFile && anc.Sum != nil && u.Ancestor.Sum != nil && *anc.Sum == *u.Ancestor.Sum) {
			// A file the container deleted (see Changed): no side holds the
			// ancestor any more. Forgotten, a local delete is done and a local
			// edit goes up, checked against nothing being there. (Not in the
			// index at all: a start's upload, checked against the saved
			// ancestor.)
			containerGone(v, u.Mapping, u.Rel, u.Local)
			continue
		}
		if !ok || !has || anc.Type != remote.TypeDir {
			continue // deleted, or planned otherwise, meanwhile
		}
		if _, err := os.Lstat(u.Local); !errors.Is(err, fs.ErrNotExist) {
			continue // made again locally: no delete to plan
		}
		l, err := remote.List(v.Ctx, v.Exec, v.Target, string(dir), u.Rel)
		if err != nil {
			r.mu.Lock()
			for _, u := range checks[n:] {
				r.dirChecks[conflictKey(u.Target, u.Mapping, u.Rel)] = u
			}
			r.mu.Unlock()
			return err
		}
		extra, unseen := 0, false
		names := slices.Collect(maps.Keys(l.Names))
		for _, name := range l.Unknown {
			if _, ok := l.Names[name]; !ok {
				names = append(names, name) // a FIFO, or stat failed: find counts it
			}
		}
		for _, name := range names {
			rel := strings.TrimPrefix(name, "./")
			if _, has, _ := v.Entry(u.Mapping, rel); has {
				continue // its own precondition guards it
			}
			isDir := l.Names[name].Type == remote.TypeDir
			if localtree.ValidRel(rel) && r.globs.Match(rel, isDir) && !ignored(rel, isDir) {
				unseen = true
				break
			}
			extra++
		}
		if unseen {
			r.conflictSeen(st, u.Target, u.Mapping, u.Rel, u.Local, markOf(u.Local), nil, seen{})
			continue
		}
		r.mu.Lock()
		r.allow[conflictKey(u.Target, u.Mapping, u.Rel)] = allowance{extra: extra, entries: u.Entries}
		r.mu.Unlock()
		v.Replan(u.Mapping, u.Rel)
	}
	return nil
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
// reported: the state a local save must change for the upload to go with
// the check of what the container held. A pass that finds the conflict
// again with what it showed in the container reports nothing (see
// savedOver), so a save that a pass sees before its batch still wins. One
// that finds the container changed since reports a new conflict: both
// marks move, to what that pass reported and to the local file as it is,
// so that a save wins over that only once it follows the report. Before,
// the local mark stayed, and a save made before the container's change
// replaced it in the next batch (TestModel seed 8259734817451128789 round
// 60: the container's write of gen/sub/c.txt, made after the local save,
// was reported as a conflict and then overwritten).
func (r *Runner) markConflict(t filesync.Target, i int, rel string, lm mark, rem seen) {
	key := conflictKey(t, i, rel)
	r.mu.Lock()
	c, ok := r.conflicts[key]
	if !ok || (rem.sum != nil || rem.absent || rem.stat) && !c.remote.same(rem) {
		r.conflicts[key] = conflicted{local: lm, remote: rem}
	}
	r.mu.Unlock()
}

// inConflict reports whether rel is a conflict (standing, until the next
// local save), or one whose local side (local) was saved since it was
// marked: what Expect sends, checked against what the conflict showed.
func (r *Runner) inConflict(t filesync.Target, i int, rel, local string) (standing, saved bool) {
	r.mu.Lock()
	c, ok := r.conflicts[conflictKey(t, i, rel)]
	r.mu.Unlock()
	if !ok {
		return false, false
	}
	saved = markOf(local) != c.local
	return !saved, saved
}

// savedOver reports whether rel is a conflict whose local side was saved
// since it was reported (see Expect), and the container still holds what
// the conflict showed: the save wins over that, and a pass that finds the
// path before the save's batch has nothing new to report. Before, it
// reported the saved side against the container's as a conflict, and the
// batch then replaced the container's side as the earlier report said it
// would (TestModel seed 14463975535576635018 round 21: a local delete after
// a conflict was reported as a conflict that holds, then went).
func (r *Runner) savedOver(t filesync.Target, i int, rel, local string, rem seen) bool {
	r.mu.Lock()
	c, ok := r.conflicts[conflictKey(t, i, rel)]
	r.mu.Unlock()
	return ok && markOf(local) != c.local && c.remote.same(rem)
}

// movedSince reports whether rel is a conflict whose container side (rem)
// is not the one it showed.
func (r *Runner) movedSince(t filesync.Target, i int, rel string, rem seen) bool {
	r.mu.Lock()
	c, ok := r.conflicts[conflictKey(t, i, rel)]
	r.mu.Unlock()
	return ok && !c.remote.same(rem)
}

// same reports whether s and o say the container holds the same.
func (s seen) same(o seen) bool {
	switch {
	case s.sum != nil || o.sum != nil:
		return s.sum != nil && o.sum != nil && *s.sum == *o.sum
	case s.absent || o.absent:
		return s.absent == o.absent
	case s.stat || o.stat:
		return s.stat == o.stat && s.size == o.size && s.mtime == o.mtime
	}
	return false // neither known (a directory's): nothing to tell them by
}

// Standing returns the conflicts that stand at t, sorted, for the saved
// state (see syncstate.Conflict): a start from it makes them stand again
// (Restore). Before, a stop forgot them, and a start decided the path by
// the saved ancestor alone: a container that put the ancestor's bytes back
// while the session was stopped lost its side to the local delete of the
// conflict (TestModel seed 3631759567890288979 round 513).
func (r *Runner) Standing(t filesync.Target) []syncstate.Conflict {
	prefix := targetKey(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []syncstate.Conflict
	for key, c := range r.conflicts {
		rest, ok := strings.CutPrefix(key, prefix)
		if !ok {
			continue
		}
		is, rel, _ := strings.Cut(rest, "\x00")
		i, err := strconv.Atoi(is)
		if err != nil {
			continue
		}
		sc := syncstate.Conflict{Mapping: i, Path: rel, Exists: c.local.exists, Mode: uint32(c.local.mode), Size: c.local.size,
			Ino: c.local.ino, CTime: c.local.ctime,
			Remote: syncstate.ConflictSide{Absent: c.remote.absent, Stat: c.remote.stat, Size: c.remote.size, MTime: c.remote.mtime}}
		if c.local.exists {
			sc.MTime = c.local.mtime.UnixNano()
		}
		if c.remote.sum != nil {
			sc.Remote.Sum = bytes.Clone(c.remote.sum[:])
		}
		out = append(out, sc)
	}
	slices.SortFunc(out, func(a, b syncstate.Conflict) int {
		return cmp.Or(cmp.Compare(a.Mapping, b.Mapping), strings.Compare(a.Path, b.Path))
	})
	return out
}

// Restore makes cs, the conflicts that stood at t's container when the
// state its start uses was saved (see Standing), stand again: until the
// next local save, and a container side other than the one it showed is a
// change made after it. One found in this session already is newer.
func (r *Runner) Restore(t filesync.Target, cs []syncstate.Conflict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sc := range cs {
		if !localtree.ValidRel(sc.Path) || sc.Path == "" {
			continue
		}
		key := conflictKey(t, sc.Mapping, sc.Path)
		if _, ok := r.conflicts[key]; ok {
			continue
		}
		c := conflicted{remote: seen{absent: sc.Remote.Absent, stat: sc.Remote.Stat, size: sc.Remote.Size, mtime: sc.Remote.MTime}}
		if sc.Exists {
			c.local = mark{exists: true, mode: fs.FileMode(sc.Mode), size: sc.Size, mtime: time.Unix(0, sc.MTime), ino: sc.Ino, ctime: sc.CTime}
		}
		if len(sc.Remote.Sum) == len(seen{}.sum) {
			c.remote.sum = (*[32]byte)(bytes.Clone(sc.Remote.Sum))
		}
		r.conflicts[key] = c
	}
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
