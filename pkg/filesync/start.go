package filesync

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"path"
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
// anything is sent (see planStart). A saved ancestor of another
// incarnation is discarded: the local side wins, and its local half only
// spares re-hashing local files whose stat data did not change.

// Ancestry is where the engine finds each target's saved ancestor and hands
// its confirmed index over to be kept (pkg/session implements it over
// pkg/syncstate); WithAncestry sets it.
type Ancestry interface {
	// Start returns what t's initial sync starts from; called once per
	// initial sync, before anything is listed.
	Start(t Target) Start
	// Confirmed hands over t's confirmed index, one list per mapping, each
	// time it changed and t's worker is between passes; the implementation
	// saves it when it sees fit. Not called in a dry run.
	Confirmed(t Target, mappings [][]syncstate.Entry)
}

// WithAncestry sets where the engine loads and keeps saved ancestors.
func WithAncestry(a Ancestry) Option { return func(e *Engine) { e.anc = a } }

// Start is what a target's initial sync starts from.
type Start struct {
	// Saved is the ancestor this very container confirmed (same
	// incarnation), one list per mapping; nil when there is none.
	Saved [][]syncstate.Entry
	// Cache holds local stat records of another incarnation's ancestor:
	// they only spare hashing an unchanged local file. Nil when none.
	Cache [][]syncstate.Entry
	// SavedAt is when the records were saved: one whose file changed in
	// the last second before it is hashed anyway (git's "racily clean").
	SavedAt time.Time
	// Started is when the container started (zero when unknown): a listed
	// file it wrote since is its own, not the image's.
	Started time.Time
	// From is "saved", "discarded" or "none"; Why says why, one line.
	From, Why string
}

// Start kinds (Start.From).
const (
	StartSaved     = "saved"
	StartDiscarded = "discarded"
	StartNone      = "none"
)

// Ancestor reports which ancestor a target's initial sync starts from and
// why (see Start), before it lists anything.
type Ancestor struct {
	Target    Target
	Remote    RemotePath // the mapping's remote directory
	From, Why string
	// Mode is the initial mode the sync runs under: with mirror or none,
	// a saved ancestor is not what decides.
	Mode InitialMode
	// ThreeWay: the start was a three-way pass against the saved ancestor.
	ThreeWay bool
	// Decided counts the paths per decision (threeway.Action names), threeway.Keep
	// left out; Examples holds a few, "action /remote/path".
	Decided  map[string]int
	Examples []string
}

func (Ancestor) event() {}

// Lister is what the engine's UploadGuard also implements when sync-back
// runs: whether a path of mapping i comes back from t (t is the source
// replica and the path is listed). A start leaves such a path's container
// change for sync-back to bring home or report as a conflict.
type Lister interface {
	Listed(t Target, i int, rel string, isDir bool) bool
}

// listedIn returns the engine's Lister for t and mapping i; never true
// without sync-back.
func (e *Engine) listedIn(t Target, i int) func(rel string, isDir bool) bool {
	l, ok := e.guard.(Lister)
	if !ok || e.maps[i].file {
		return func(string, bool) bool { return false }
	}
	return func(rel string, isDir bool) bool { return l.Listed(t, i, rel, isDir) }
}

// Records returns x's entries as saved records.
func (x *Index) Records() []syncstate.Entry {
	out := make([]syncstate.Entry, 0, len(x.m))
	for rel, e := range x.m {
		r := syncstate.Entry{Path: rel, Type: uint8(e.Type), Mode: uint32(e.Mode), Size: e.Size, MTime: e.MTime.UnixNano(),
			Link: e.Link, Ino: e.Ino, CTime: e.CTime, Unknown: e.stale}
		if e.Sum != nil && !e.stale {
			r.Sum = e.Sum[:]
		}
		out = append(out, r)
	}
	return out
}

// indexOf rebuilds an index from saved records, keeping only those that
// describe a clean path of a synced type; a retype is not saved (its
// type in the container is unknown: it is recorded as unknown).
func indexOf(rs []syncstate.Entry) *Index {
	x := NewIndex()
	for _, r := range rs {
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
func localSame(m *mapping, rel string, a Entry, l *Entry, trust time.Time) bool {
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
	sum, err := hashFile(m.localPath(rel))
	if err != nil || *sum != *a.Sum {
		return false
	}
	l.Sum = sum
	return true
}

// remoteSame reports whether the container's entry r is still the
// ancestor a: the same type, for files the same size, exec bits and
// content (by hash when the listing has one, see hashUnsure; else by
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

// unsure returns the files of l (rels) whose stat data cannot say whether
// they still hold the ancestor's content, where the ancestor knows it: the
// same size and exec bits, but an mtime that moved (a delta or an
// in-container copy, or a rewrite, even within tar's second). Their
// content decides (see hashUnsure), never their mtime.
func unsure(anc *Index, l *listing) []string {
	if l.alg != "sha256sum" {
		return nil
	}
	var out []string
	for rel, r := range l.entries {
		a, ok := anc.Get(rel)
		if ok && r.Type == TypeFile && a.Type == TypeFile && !a.stale && a.Sum != nil && r.Sum == nil &&
			a.Size == r.Size && (a.Mode^r.Mode)&0o111 == 0 && !remoteStatSame(a, r) {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
}

// hashUnsure lists the unsure files of l (see unsure) again, hashed, in
// ex's t, and puts what it found in l: the few a start reads in the
// container rather than take a moved mtime for a change. One that is no
// longer a regular file keeps its first listing (a change by its mtime).
func hashUnsure(ctx context.Context, ex Executor, t Target, m *mapping, l *listing, rels []string) error {
	if len(rels) == 0 {
		return nil
	}
	names := make([]string, len(rels))
	for i, rel := range rels {
		names[i] = "./" + m.remoteName(rel)
	}
	rl, err := remote.ListNames(ctx, ex, t, string(m.remoteDir()), names)
	if err != nil {
		return err
	}
	for rel, e := range listingOf(rl, m).entries {
		if e.Type == TypeFile && len(e.Sum) == sha256.Size {
			l.entries[rel] = e
		}
	}
	return nil
}

// planStart is a start against anc, the ancestor this container confirmed
// (as saved), with l the container's listing now (hashes optional): a
// three-way pass at every path either side or the ancestor holds (see
// threeway.Decide). It returns the plan, the index to apply its result on top
// of, and the decisions made (by rel, threeway.Keep left out). trust bounds
// the stat data trusted (see localSame); listed says which paths come back.
func planStart(m *mapping, local *localFiles, l *listing, anc *Index, trust time.Time, listed func(string, bool) bool) (*Plan, *Index, map[string]threeway.Action) {
	idx := NewIndex()
	pl := newPlanner(m, idx)
	decided := map[string]threeway.Action{}
	rels := map[string]bool{}
	for rel := range local.entries {
		rels[rel] = true
	}
	for rel := range l.entries {
		rels[rel] = true
	}
	for rel := range anc.m {
		rels[rel] = true
	}
	// keep holds the paths whose container side must stay: no delete of
	// a directory above them may run; true where a type change must not
	// remove them either (listed, or unreadable locally), false where the
	// container merely created them.
	keep := map[string]bool{}
	var deletes, retyped []string
	for rel := range rels {
		if rel == "" && !m.file {
			continue // the root is made by mkdir -p, never sent or deleted
		}
		a, hasA := anc.Get(rel)
		le, hasL := local.entries[rel]
		re, hasR := l.entries[rel]
		isDir := hasL && le.Type == TypeDir || hasR && re.Type == TypeDir || hasA && a.Type == TypeDir
		if !hasL && m.ignored(rel, isDir) {
			continue // never synced: the container's own
		}
		if local.unreadableAt(rel) {
			if hasA {
				a.stale, a.Sum = true, nil
				idx.Put(rel, a) // unknown: decided when it can be read
			}
			keep[rel] = true
			continue
		}
		var act threeway.Action
		if hasL && hasR && le.Type == TypeDir && re.Type == TypeDir {
			// A directory on both sides is the same one; only its mode is sent.
			act = threeway.Keep
			if !hasA || a.Type != TypeDir || le.Mode != a.Mode {
				act = threeway.Send
			}
		} else {
			lSame := hasL == hasA && (!hasL || localSame(m, rel, a, &le, trust))
			rSame := hasR == hasA && (!hasR || remoteSame(a, re, l.alg))
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
			if le.Type == TypeFile && m.unreadable.Holds(m.fs(), m.localPath(rel), rel) {
				continue
			}
			if le.Type == TypeDir && hasR && re.Type == TypeDir && (re.Mode^le.Mode)&^0o022 == 0 {
				idx.Put(rel, le) // already there as it is
				continue
			}
			pl.copies[rel] = Copy{Rel: rel, Name: m.remoteName(rel), Src: m.localPath(rel), Entry: le}
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

// applyCache is planInitial's local side helped by cache, another
// incarnation's saved records: a local file whose stat data is the
// record's takes the record's hash instead of being read again.
func applyCache(m *mapping, local *localFiles, cache *Index, trust time.Time) {
	if cache == nil {
		return
	}
	for rel, le := range local.entries {
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
			local.entries[rel] = le
		}
	}
}

// Record is one saved entry of an index (see Index.Records).
type Record = syncstate.Entry

// mapping returns mapping i's saved ancestor (this incarnation's) and
// stat cache (another's), as indexes; nil where there is none.
func (st Start) mapping(i int) (saved, cache *Index) {
	if i < len(st.Saved) && st.Saved[i] != nil {
		saved = indexOf(st.Saved[i])
	}
	if i < len(st.Cache) && st.Cache[i] != nil {
		cache = indexOf(st.Cache[i])
	}
	return saved, cache
}

// startConflict refuses a root whose type is not the mapping's, as
// planInitial does.
func startConflict(m *mapping, l *listing) error {
	if re, ok := l.entries[""]; m.file && ok && re.Type == TypeDir {
		return conflictError(m, "", remoteIsDir)
	}
	if !m.file && l.notDir {
		return conflictError(m, "", remoteNotDir)
	}
	return nil
}

// startEvent describes a mapping's start: which ancestor, why, and with
// one, how many paths each decision took (threeway.Keep left out).
func startEvent(t Target, m *mapping, st Start, mode InitialMode, threeWay bool, decided map[string]threeway.Action) Ancestor {
	ev := Ancestor{Target: t, Remote: m.remoteDir(), From: st.From, Why: st.Why, Mode: mode}
	switch {
	case st.From == StartSaved && !threeWay && mode != InitialUpload:
		ev.Why += fmt.Sprintf("; --initial=%s decides, the saved ancestor only spares hashing", mode)
	case st.From == StartSaved && !threeWay:
		ev.Why += "; the container could not be listed: the local side wins"
	}
	ev.ThreeWay = threeWay
	if len(decided) > 0 {
		ev.Decided = map[string]int{}
		for rel, a := range decided {
			ev.Decided[a.String()]++
			if len(ev.Examples) < 5 {
				ev.Examples = append(ev.Examples, a.String()+" "+path.Join(string(m.remoteDir()), m.remoteName(rel)))
			}
		}
		slices.Sort(ev.Examples)
	}
	return ev
}
