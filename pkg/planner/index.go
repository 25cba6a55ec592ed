package planner

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// EntryType is the kind of a synced entry (see remote.EntryType).
type EntryType = remote.EntryType

// Entry types. Anything else (sockets, devices, fifos) is never synced.
const (
	TypeFile    = remote.TypeFile
	TypeDir     = remote.TypeDir
	TypeSymlink = remote.TypeSymlink
)

// Entry is what is known about one synced path: its local metadata at the time
// the container confirmed it (see Index).
type Entry struct {
	Type  EntryType
	Mode  fs.FileMode // permission bits only
	Size  int64
	MTime time.Time
	Link  string    // symlink target
	Sum   *[32]byte // sha256 of a file's content, if known
	// Ino and CTime are the local file's inode and change time
	// (nanoseconds) when it was stat'ed, 0 where the platform does not
	// say: with Size and MTime, what tells a saved ancestor's file
	// unchanged at the next start without reading it (see startSame).
	Ino   uint64
	CTime int64
	// stale marks an entry whose state in the target is unknown: it
	// changed while it was sent (the target may hold a cut-short copy), or
	// an apply touching it did not end in the container's own ack (the
	// target may hold the old or the new state, or neither). It stays in the
	// index (a later local delete must still reach the target) but never
	// compares equal, so the next plan sends it again, or deletes it again.
	stale bool
	// retype marks a stale entry whose type in the target is unknown too:
	// an unconfirmed plan changed it (a file replaced by a directory). It is
	// deleted before it is sent again, as a type change is.
	retype bool
}

// EntryOf describes fi, and false for types that are not synced.
func EntryOf(fi fs.FileInfo) (Entry, bool) {
	e := Entry{Mode: localtree.Perm(fi), MTime: fi.ModTime()}
	e.Ino, e.CTime, _ = localtree.IdentityOf(fi)
	switch {
	case fi.Mode().IsRegular():
		e.Type, e.Size = TypeFile, fi.Size()
	case fi.IsDir():
		e.Type = TypeDir
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = TypeSymlink
	default:
		return Entry{}, false
	}
	return e, true
}

// sameMeta reports whether a local entry looks unchanged from what was sent:
// same type and mode, and for files same size and mtime, for links same target.
// Directory mtimes change with their children and are not compared.
func (e Entry) sameMeta(o Entry) bool {
	if e.stale || o.stale || e.Type != o.Type || e.Mode != o.Mode {
		return false
	}
	switch e.Type {
	case TypeFile:
		return e.Size == o.Size && e.MTime.Equal(o.MTime)
	case TypeSymlink:
		return e.Link == o.Link
	}
	return true
}

// sameIdentity reports whether e and o are the same inode, unchanged
// since (its ctime), where both say: an entry recorded without them (a
// platform that does not say, a sync-back write) is taken at its word.
func (e Entry) sameIdentity(o Entry) bool {
	return e.Ino == 0 || o.Ino == 0 || e.Ino == o.Ino && e.CTime == o.CTime
}

// Index is what one target holds for one mapping, as far as the target
// confirmed it, keyed by the slash-separated path relative to the mapping
// root ("" is the root). Parents of every entry are in the index too. It is
// not safe for concurrent use.
//
// The rule: an entry records only what the container acknowledged. A plan is
// recorded by apply once the container's apply script said it applied it
// (its exit status, or the stream loop's ack); a plan whose apply ended any
// other way (a lost ack, a retry budget spent while the connection was down,
// a tar error after the deletes ran) is recorded by unconfirm, which marks
// every path it touched stale, so the next compare sends and deletes them
// again whatever the local tree did meanwhile. This is what makes "local
// equals index" mean "the container holds the local state", the ancestor
// every later decision compares against.
type Index struct {
	m table
	// kids holds, per path, the paths one level below it that are entries
	// or lead to one, so DeleteTree costs what the subtree holds rather than
	// a scan of the whole index (5,000 deletes against 100,000 entries took
	// seconds). A list rather than a set (a map per directory cost 64 bytes
	// a path): each path knows its place in its parent's list (slot.kid, or
	// anc for a path that leads to entries without being one), so a delete
	// moves the last one into its place.
	kids map[string][]string
	// anc holds the place in its parent's list of each path that is in
	// kids without being an entry (an ancestor whose own entry was never
	// put). A path is linked when it is an entry or in anc.
	anc map[string]int32
	// gen counts changes, so a saved copy is taken only when there is
	// something new to save (see Gen).
	gen uint64
	// maybe holds, for a stale file entry whose unconfirmed plans are known,
	// the contents the container may hold there (nil: nothing); see
	// Unconfirm and Maybe.
	maybe map[string][]*[32]byte
	// gone holds the entries the container no longer holds, as a complete
	// scan of what sync-back lists found (see Gone): the container deleted
	// them and the local side keeps them (without --sync-back-deletes, or
	// held), so they stay as the ancestor. The mass-delete guard does not
	// count them as what the container holds: 80 such entries let a local
	// rm -rf of 80 of the 153 entries the container held go with no hold
	// (TestModel seed 15620430712571607237 round 33).
	gone map[string]bool
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{kids: map[string][]string{}, anc: map[string]int32{}}
}

// newIndexSized returns an empty index with room for n entries (see table.reserve).
func newIndexSized(n int) *Index {
	x := NewIndex()
	x.m.reserve(n)
	return x
}

// slot is how the index keeps an Entry: 72 bytes rather than 96 (the mtime
// as seconds and nanoseconds rather than a time.Time, the flags beside the
// type, kid in what was padding), which for 100,000 paths, in the index and each copy of it, is
// 2.4 MiB less to hold and for the collector to scan.
type slot struct {
	size  int64
	sec   int64 // mtime
	ino   uint64
	ctime int64
	link  string
	sum   *[32]byte
	mode  fs.FileMode
	nsec  uint32 // mtime
	kid   int32  // the path's place in its parent's list (Index.kids)
	typ   EntryType
	stale bool
	// retype: see Entry.retype
	retype bool
}

func slotOf(e Entry) slot {
	return slot{size: e.Size, sec: e.MTime.Unix(), nsec: uint32(e.MTime.Nanosecond()), ino: e.Ino, ctime: e.CTime,
		link: e.Link, sum: e.Sum, mode: e.Mode, typ: e.Type, stale: e.stale, retype: e.retype}
}

func (s slot) entry() Entry {
	return Entry{Type: s.typ, Mode: s.mode, Size: s.size, MTime: time.Unix(s.sec, int64(s.nsec)), Link: s.link, Sum: s.sum,
		Ino: s.ino, CTime: s.ctime, stale: s.stale, retype: s.retype}
}

// Get returns the entry at rel.
func (x *Index) Get(rel string) (Entry, bool) {
	s, ok := x.m.get(rel)
	if !ok {
		return Entry{}, false
	}
	return s.entry(), true
}

// has reports whether rel has an entry.
func (x *Index) has(rel string) bool {
	return x.m.has(rel)
}

// all yields every path and its entry, in no particular order. The index
// must not change while it is ranged over (a delete moves another entry).
func (x *Index) all() iter.Seq2[string, Entry] {
	return func(yield func(string, Entry) bool) {
		for i, rel := range x.m.keys {
			if !yield(rel, x.m.vals[i].entry()) {
				return
			}
		}
	}
}

// Bytes is what x's files hold, in bytes.
func (x *Index) Bytes() int64 {
	var n int64
	for _, s := range x.m.vals {
		if s.typ == TypeFile {
			n += s.size
		}
	}
	return n
}

// Len returns the number of entries.
func (x *Index) Len() int { return x.m.len() }

// Put records e at rel.
func (x *Index) Put(rel string, e Entry) {
	s := slotOf(e)
	if old, ok := x.m.get(rel); ok {
		s.kid = old.kid
	} else {
		s.kid = x.link(rel)
	}
	x.m.put(rel, s)
	delete(x.maybe, rel)
	delete(x.gone, rel)
	x.gen++
}

// Gone records that the container no longer holds rel and what the index
// has under it (gone), or that it holds rel again (!gone: rel alone), as a
// complete scan of it found (see Index.gone); the entries stay. Writing an
// entry again (Put) or deleting it ends it too.
func (x *Index) Gone(rel string, gone bool) {
	if !gone {
		delete(x.gone, rel)
		return
	}
	x.Walk(rel, func(p string) {
		if x.m.has(p) {
			if x.gone == nil {
				x.gone = map[string]bool{}
			}
			x.gone[p] = true
		}
	})
}

// Present returns the number of entries the container holds: all but those
// it is known to have deleted (see Gone).
func (x *Index) Present() int { return x.m.len() - len(x.gone) }

// presentTree returns how many entries rel and everything under it hold that
// the container holds (see Gone).
func (x *Index) presentTree(rel string) int {
	if len(x.gone) == 0 {
		return x.CountTree(rel)
	}
	n := 0
	x.Walk(rel, func(p string) {
		if x.m.has(p) && !x.gone[p] {
			n++
		}
	})
	return n
}

// Maybe returns what the container may hold at rel, a stale file entry
// that only plans the container never confirmed made unknown: the content
// confirmed before them, and what each of them sent (nil: nothing there).
// ok is false where that is not known (see Unconfirm).
func (x *Index) Maybe(rel string) (sums []*[32]byte, ok bool) {
	sums, ok = x.maybe[rel]
	return sums, ok
}

// maxMaybe bounds Maybe's contents per path: past it (a path whose plans
// failed again and again) the path is just unknown.
const maxMaybe = 4

// link makes rel, about to become an entry, reachable from the root
// through kids, registering the ancestors that are not linked yet; it
// returns rel's place in its parent's list.
func (x *Index) link(rel string) int32 {
	if rel == "" {
		return -1 // the root: where every walk starts, in no list
	}
	if i, ok := x.anc[rel]; ok {
		delete(x.anc, rel) // linked already, as an ancestor
		return i
	}
	i := x.addKid(rel)
	for a := localtree.ParentRel(rel); a != "" && !x.linked(a); a = localtree.ParentRel(a) {
		x.anc[a] = x.addKid(a)
	}
	return i
}

// linked reports whether rel is in its parent's list.
func (x *Index) linked(rel string) bool {
	if x.m.has(rel) {
		return true
	}
	_, ok := x.anc[rel]
	return ok
}

// addKid appends rel to its parent's list and returns its place there.
func (x *Index) addKid(rel string) int32 {
	p := localtree.ParentRel(rel)
	l := x.kids[p]
	x.kids[p] = append(l, rel)
	return int32(len(l))
}

// setKid records that rel is at i in its parent's list.
func (x *Index) setKid(rel string, i int32) {
	if s := x.m.ptr(rel); s != nil {
		s.kid = i
		return
	}
	x.anc[rel] = i
}

// unlink removes rel from its parent's list, the last one there taking
// its place.
func (x *Index) unlink(rel string) {
	var i int32
	if s := x.m.ptr(rel); s != nil {
		i = s.kid
	} else if a, ok := x.anc[rel]; ok {
		i = a
	} else {
		return
	}
	p := localtree.ParentRel(rel)
	l := x.kids[p]
	last := int32(len(l) - 1)
	if i < 0 || i > last || l[i] != rel {
		// Never, as long as every place is kept; a search costs time,
		// a wrong place would leave rel to be walked as if it were there.
		if i = int32(slices.Index(l, rel)); i < 0 {
			return
		}
	}
	if i != last {
		l[i] = l[last]
		x.setKid(l[i], i)
	}
	l[last] = ""
	x.kids[p] = l[:last]
}

// DeleteTree removes rel and everything under it.
func (x *Index) DeleteTree(rel string) {
	x.gen++
	if rel == "" {
		x.m.clear()
		clear(x.kids)
		clear(x.anc)
		clear(x.maybe)
		clear(x.gone)
		return
	}
	x.unlink(rel)
	x.Walk(rel, func(p string) {
		x.m.delete(p)
		delete(x.kids, p)
		delete(x.anc, p)
		delete(x.maybe, p)
		delete(x.gone, p)
	})
}

// CountTree returns how many entries rel and everything under it hold.
func (x *Index) CountTree(rel string) int {
	n := 0
	x.Walk(rel, func(p string) {
		if x.m.has(p) {
			n++
		}
	})
	return n
}

// children returns the paths one level below rel that are entries or lead
// to one.
func (x *Index) children(rel string) []string {
	return slices.Clone(x.kids[rel])
}

// Walk calls fn for rel and every path under it, children before parents.
func (x *Index) Walk(rel string, fn func(string)) {
	for _, k := range x.kids[rel] {
		x.Walk(k, fn)
	}
	fn(rel)
}

// Paths returns every path in the index, in no particular order.
func (x *Index) Paths() []string {
	return slices.Clone(x.m.keys)
}

// hashFile returns the sha256 of the file at name.
func hashFile(name string) (*[32]byte, error) {
	sum, err := hashWith(name, sha256.New())
	if err != nil {
		return nil, err
	}
	return (*[32]byte)(sum), nil
}

// hashWith returns the digest of the regular file at name (localtree.ErrNotRegular if
// it is something else, rather than waiting on a FIFO).
func hashWith(name string, h hash.Hash) ([]byte, error) {
	f, _, err := localtree.OpenRegular(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := hashBufs.Get().(*[]byte)
	defer hashBufs.Put(buf)
	// Through a plain Reader: io.Copy from an *os.File takes its WriteTo,
	// which allocates a 32 KiB buffer per file; a cold start hashing
	// 100,000 small files spent a fifth of its CPU allocating and
	// collecting them.
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, *buf); err != nil {
		return nil, fmt.Errorf("hashing %q: %w", name, err)
	}
	return h.Sum(nil), nil
}

// hashBufs holds hashWith's read buffers.
var hashBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// TreeBytes is the file content of a local tree.
func TreeBytes(tree map[string]Entry) int64 {
	var n int64
	for _, e := range tree {
		if e.Type == TypeFile {
			n += e.Size
		}
	}
	return n
}

// Gen counts x's changes: a saved copy is taken only when it moved (see
// Records).
func (x *Index) Gen() uint64 { return x.gen }

// Stale reports whether e's state in the target is unknown (see Entry).
func (e Entry) Stale() bool { return e.stale }
