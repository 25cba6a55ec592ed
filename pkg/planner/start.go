package planner

import (
	"context"
	"crypto/sha256"
	"io/fs"
	"slices"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/syncstate"
	"github.com/livesync-dev/kubectl-livesync/pkg/threeway"
)

// A target's start: which ancestor its initial sync compares against.
//
// Without a saved ancestor the initial sync is what it always was: the
// local side wins (--initial=upload sends what differs, mirror also
// deletes, none sends nothing), except that a listed file (sync-back) the
// container wrote during its current life, newer than the container's
// start, and that differs from the local one is left as it is, for
// sync-back to report as a conflict, rather than replaced.
//
// With one saved by the same container incarnation (its ID and mount
// namespace), --initial=upload is a three-way pass against it before
// anything is sent (see ThreeWay). A saved ancestor of another
// incarnation is discarded: the local side wins, and its local half only
// spares re-hashing local files whose stat data did not change.

// Records returns x's entries as saved records, encoded (see
// syncstate.Mapping), in path order so that a directory's entries share
// its path once.
func (x *Index) Records() syncstate.Mapping {
	paths := x.Paths()
	slices.Sort(paths)
	var b syncstate.MappingBuilder
	for _, rel := range paths {
		e, _ := x.Get(rel)
		r := syncstate.Entry{Path: rel, Type: uint8(e.Type), Mode: uint32(e.Mode), Size: e.Size, MTime: e.MTime.UnixNano(),
			Link: e.Link, Ino: e.Ino, CTime: e.CTime, Unknown: e.stale}
		if e.Sum != nil && !e.stale {
			r.Sum = e.Sum[:]
		}
		b.Add(&r)
	}
	return b.Mapping()
}

// IndexOf rebuilds an index from saved records, keeping only those that
// describe a clean path of a synced type; a retype is not saved (its
// type in the container is unknown: it is recorded as unknown).
func IndexOf(rs syncstate.Mapping) *Index {
	x := newIndexSized(rs.Len())
	for r := range rs.All() {
		t := EntryType(r.Type)
		if t != TypeFile && t != TypeDir && t != TypeSymlink || r.Path != "" && !localtree.ValidRel(r.Path) {
			continue
		}
		e := Entry{Type: t, Mode: fs.FileMode(r.Mode).Perm(), Size: r.Size, MTime: time.Unix(0, r.MTime), Link: r.Link, Ino: r.Ino, CTime: r.CTime, stale: r.Unknown}
		if len(r.Sum) == sha256.Size && !r.Unknown {
			e.Sum = (*[32]byte)(r.Sum)
		}
		x.Put(r.Path, e)
	}
	return x
}

// localSame reports whether the local entry l is still the ancestor a, and
// fills l's Sum when it is a file: by stat data alone when a's inode,
// ctime, size and mtime are all the same and its ctime is older than
// trust (a file changed within a tick of being recorded could change again
// unseen), else by hashing it when a's hash is known and the size is the same.
func localSame(m *Resolved, rel string, a Entry, l *Entry, trust time.Time, mt *Meter) bool {
	if a.stale || a.Type != l.Type || a.Mode != l.Mode {
		return false
	}
	switch l.Type {
	case TypeDir:
		return true
	case TypeSymlink:
		return a.Link == l.Link
	}
	if a.Size != l.Size {
		return false
	}
	if a.Sum != nil && a.Ino != 0 && a.Ino == l.Ino && a.CTime == l.CTime && a.MTime.Equal(l.MTime) && a.CTime < trust.UnixNano() {
		l.Sum = a.Sum
		return true
	}
	if a.Sum == nil {
		return false
	}
	sum, err := hashFile(m.LocalPath(rel))
	mt.hashed()
	if err != nil || *sum != *a.Sum {
		return false
	}
	l.Sum = sum
	return true
}

// remoteSame reports whether the container's entry r is still the
// ancestor a: the same type, for files the same size, exec bits and
// content (by hash when the listing has one, see HashUnsure; else by
// remoteStatSame), for links the same target.
func remoteSame(a Entry, r remoteEntry, alg string) bool {
	if a.stale || a.Type != r.Type {
		return false
	}
	switch a.Type {
	case TypeDir:
		return true
	case TypeSymlink:
		return a.Link == r.Link
	}
	if a.Size != r.Size || (a.Mode^r.Mode)&0o111 != 0 {
		return false
	}
	if alg == "sha256sum" && a.Sum != nil && len(r.Sum) == sha256.Size {
		return [32]byte(r.Sum) == *a.Sum
	}
	return remoteStatSame(a, r)
}

// remoteStatSame reports whether the container's file r still has the
// mtime tar gave it when it was sent as a: the ancestor's second, with no
// fraction where the listing says one (tar sets whole seconds: a write in
// that same second leaves a fraction).
func remoteStatSame(a Entry, r remoteEntry) bool {
	return a.MTime.Unix() == r.MTime && (r.MTimeNs == 0 || r.MTimeNs == r.MTime*1e9)
}

// Unsure returns the files of l (rels) whose stat data cannot say whether
// they still hold the ancestor's content, where the ancestor knows it: the
// same size and exec bits, but an mtime that moved (a delta or an
// in-container copy, or a rewrite, even within tar's second). Their
// content decides (see HashUnsure), never their mtime.
func Unsure(anc *Index, l *Listing) []string {
	if l.Alg != "sha256sum" {
		return nil
	}
	var out []string
	for rel, r := range l.Entries {
		a, ok := anc.Get(rel)
		if ok && r.Type == TypeFile && a.Type == TypeFile && !a.stale && a.Sum != nil && r.Sum == nil &&
			a.Size == r.Size && (a.Mode^r.Mode)&0o111 == 0 && !remoteStatSame(a, r) {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
}

// HashUnsure lists the unsure files of l (see Unsure) again, hashed, in
// ex's t, and puts what it found in l: the few a start reads in the
// container rather than take a moved mtime for a change. One that is no
// longer a regular file keeps its first listing (a change by its mtime).
func HashUnsure(ctx context.Context, ex remote.Executor, t remote.Target, m *Resolved, l *Listing, rels []string) error {
	if len(rels) == 0 {
		return nil
	}
	names := make([]string, len(rels))
	for i, rel := range rels {
		names[i] = "./" + m.RemoteName(rel)
	}
	rl, err := remote.ListNames(ctx, ex, t, string(m.RemoteDir()), names)
	if err != nil {
		return err
	}
	for rel, e := range listingOf(rl, m).Entries {
		if e.Type == TypeFile && len(e.Sum) == sha256.Size {
			l.Entries[rel] = e
		}
	}
	return nil
}

// ThreeWay is a start against anc, the ancestor this container confirmed
// (as saved), with l the container's listing now (hashes optional): a
// three-way pass at every path either side or the ancestor holds (see
// threeway.Decide). It returns the plan, the index to apply its result on top
// of, and the decisions made (by rel, threeway.Keep left out). trust bounds
// the stat data trusted (see localSame); listed says which paths come back.
func ThreeWay(m *Resolved, local *LocalFiles, l *Listing, anc *Index, trust time.Time, listed func(string, bool) bool) (*Plan, *Index, map[string]threeway.Action) {
	idx := newIndexSized(len(local.Entries)) // what both sides hold, where nothing changed
	pl := newPlanState(m, idx)
	decided := map[string]threeway.Action{}
	// keep holds the paths whose container side must stay: no delete of
	// a directory above them may run; true where a type change must not
	// remove them either (listed, or unreadable locally), false where the
	// container merely created them.
	keep := map[string]bool{}
	var deletes, retyped []string
	// Every path either side or the ancestor holds, once: a set of their
	// union would cost a start of 100,000 paths another map as large.
	visit := func(rel string) {
		if rel == "" && !m.File {
			return // the root is made by mkdir -p, never sent or deleted
		}
		a, hasA := anc.Get(rel)
		le, hasL := local.Entries[rel]
		re, hasR := l.Entries[rel]
		isDir := hasL && le.Type == TypeDir || hasR && re.Type == TypeDir || hasA && a.Type == TypeDir
		if !hasL && m.Ignored(rel, isDir) {
			return // never synced: the container's own
		}
		if local.unreadableAt(rel) {
			if hasA {
				a.stale, a.Sum = true, nil
				idx.Put(rel, a) // unknown: decided when it can be read
			}
			keep[rel] = true
			return
		}
		var act threeway.Action
		if hasL && hasR && le.Type == TypeDir && re.Type == TypeDir {
			// A directory on both sides is the same one; only its mode is sent.
			act = threeway.Keep
			if !hasA || a.Type != TypeDir || le.Mode != a.Mode {
				act = threeway.Send
			}
		} else {
			lSame := hasL == hasA && (!hasL || localSame(m, rel, a, &le, trust, local.meter))
			rSame := hasR == hasA && (!hasR || remoteSame(a, re, l.Alg))
			act = threeway.Decide(hasA, hasL, hasR, lSame, rSame, listed(rel, isDir))
		}
		if act != threeway.Keep {
			decided[rel] = act
		}
		switch act {
		case threeway.Keep:
			idx.Put(rel, le)
		case threeway.Send:
			if hasR && re.Type != le.Type {
				retyped = append(retyped, rel) // deleted first, unless something under it stays
			}
			if le.Type == TypeFile && m.Unreadable.Holds(m.FS(), m.LocalPath(rel), rel) {
				return
			}
			if le.Type == TypeDir && hasR && re.Type == TypeDir && (re.Mode^le.Mode)&^0o022 == 0 {
				idx.Put(rel, le) // already there as it is
				return
			}
			pl.copies[rel] = Copy{Rel: rel, Name: m.RemoteName(rel), Src: m.LocalPath(rel), Entry: le}
		case threeway.Delete:
			deletes = append(deletes, rel)
		case threeway.Back, threeway.Both:
			if hasA {
				idx.Put(rel, a)
			}
			keep[rel] = true
		case threeway.Theirs:
			keep[rel] = true
		case threeway.Leave:
			if _, ok := keep[rel]; !ok {
				keep[rel] = false
			}
		}
	}
	for rel := range local.Entries {
		visit(rel)
	}
	for rel := range l.Entries {
		if _, ok := local.Entries[rel]; !ok {
			visit(rel)
		}
	}
	for rel := range anc.all() {
		_, inL := local.Entries[rel]
		if _, inR := l.Entries[rel]; !inL && !inR {
			visit(rel)
		}
	}
	// A delete runs only where nothing under it stays in the container; a
	// directory with something to keep under it is left, and the index
	// forgets it (sync-back makes it again locally for what comes home).
	// above: directories something kept is under; aboveListed: the same
	// without what the container merely created (left, not listed), which
	// does not stop a type change (the local side wins there, as in a
	// running session).
	above, aboveListed := map[string]bool{}, map[string]bool{}
	for k, listedKeep := range keep {
		for a := localtree.ParentRel(k); a != "" && !(above[a] && (aboveListed[a] || !listedKeep)); a = localtree.ParentRel(a) {
			above[a] = true
			aboveListed[a] = aboveListed[a] || listedKeep
		}
	}
	for _, d := range deletes {
		if above[d] {
			decided[d] = threeway.Leave
			continue
		}
		pl.deletes[d] = true
	}
	for _, d := range retyped {
		if aboveListed[d] {
			// A directory the container holds something to keep in, where the
			// local side has a file: neither replaces the other.
			decided[d] = threeway.Leave
			delete(pl.copies, d)
			continue
		}
		pl.deletes[d] = true
	}
	return pl.finish(), idx, decided
}

// ApplyCache is Initial's local side helped by cache, another
// incarnation's saved records: a local file whose stat data is the
// record's takes the record's hash instead of being read again.
func ApplyCache(m *Resolved, local *LocalFiles, cache *Index, trust time.Time) {
	if cache == nil {
		return
	}
	for rel, le := range local.Entries {
		if le.Type != TypeFile {
			continue
		}
		a, ok := cache.Get(rel)
		if !ok || a.stale || a.Sum == nil || a.Ino == 0 {
			continue
		}
		if a.Type == le.Type && a.Mode == le.Mode && a.Size == le.Size && a.Ino == le.Ino && a.CTime == le.CTime &&
			a.MTime.Equal(le.MTime) && a.CTime < trust.UnixNano() {
			le.Sum = a.Sum
			local.Entries[rel] = le
		}
	}
}

// Record is one saved entry of an index (see Index.Records).
type Record = syncstate.Entry

// StartConflict refuses a root whose type is not the mapping's, as
// Initial does.
func StartConflict(m *Resolved, l *Listing) error {
	if re, ok := l.Entries[""]; m.File && ok && re.Type == TypeDir {
		return ConflictError(m, "", RemoteIsDir)
	}
	if !m.File && l.notDir {
		return ConflictError(m, "", RemoteNotDir)
	}
	return nil
}
