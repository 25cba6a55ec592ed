package planner

import (
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// InitialMode says what to do when a container is new (or restarted, which
// gives it a fresh writable layer).
type InitialMode string

// Initial modes.
const (
	// InitialUpload copies what is missing or different in the container.
	InitialUpload InitialMode = "upload"
	// InitialMirror also deletes remote entries that are neither local nor ignored.
	InitialMirror InitialMode = "mirror"
	// InitialNone sends nothing and assumes the container matches.
	InitialNone InitialMode = "none"
)

// ParseInitialMode parses upload, mirror or none.
func ParseInitialMode(s string) (InitialMode, error) {
	switch m := InitialMode(s); m {
	case InitialUpload, InitialMirror, InitialNone:
		return m, nil
	}
	return "", fmt.Errorf("parsing initial sync mode %q: want upload, mirror or none", s)
}

// LocalFiles is a walked local tree.
type LocalFiles struct {
	Entries map[string]Entry // by rel; a directory mapping's root is not included
	// unreadable holds rels that could not be read: a directory that could
	// not be listed, an entry that could not be stat'ed. They are not in
	// entries, and the container's side of them and of everything under
	// them is left alone.
	Unreadable map[string]bool
	// meter counts the start's work for its progress line (nil: nothing).
	meter *Meter
}

// Meter counts a start's work on the local side as it goes, for its
// progress line: the paths walked and the files read to compare with the
// container or the saved ancestor. Read it from any goroutine.
type Meter struct{ Walked, Hashed atomic.Int64 }

func (mt *Meter) walked() {
	if mt != nil {
		mt.Walked.Add(1)
	}
}

func (mt *Meter) hashed() {
	if mt != nil {
		mt.Hashed.Add(1)
	}
}

// unreadableAt reports whether rel or a parent of it could not be read.
func (lf *LocalFiles) unreadableAt(rel string) bool {
	if len(lf.Unreadable) == 0 {
		return false
	}
	for p := rel; ; p = localtree.ParentRel(p) {
		if lf.Unreadable[p] {
			return true
		}
		if p == "" {
			return false
		}
	}
}

// LocalTree walks m's local root, pruning ignored paths. What cannot be read
// is reported as a warning and left alone (see LocalFiles).
func LocalTree(m *Resolved) (*LocalFiles, []error, error) { return LocalTreeMeter(m, nil, 0) }

// LocalTreeMeter is LocalTree counting on mt (nil: nothing) as it walks,
// and as Initial and ThreeWay later hash what it found; expect is how many
// entries the tree likely holds (what was saved of it: 0 for unknown), so
// that the map of them does not grow, twice as large each time, as the walk
// finds them.
func LocalTreeMeter(m *Resolved, mt *Meter, expect int) (*LocalFiles, []error, error) {
	pl := newPlanState(m, NewIndex())
	lf := &LocalFiles{Entries: make(map[string]Entry, expect), Unreadable: map[string]bool{}, meter: mt}
	var warns []error
	var walk func(rel string)
	walk = func(rel string) {
		names, err := pl.readDir(rel)
		if err != nil {
			warns = append(warns, fmt.Errorf("%w: leaving it alone in the container", err))
			lf.Unreadable[rel] = true
			delete(lf.Entries, rel)
			return
		}
		for _, n := range names {
			child := rel + "/" + n
			if rel == "" {
				child = n
			}
			st := pl.lstat(child)
			switch {
			case st.err != nil:
				warns = append(warns, fmt.Errorf("%w: leaving it alone in the container", st.err))
				lf.Unreadable[child] = true
			case !st.found || m.Ignored(child, st.e.Type == TypeDir):
			default:
				lf.Entries[child] = st.e
				mt.walked()
				if st.e.Type == TypeDir {
					walk(child)
				}
			}
		}
	}
	st := pl.lstat("")
	switch {
	case st.err != nil:
		return nil, nil, st.err
	case !st.found:
		return nil, nil, fmt.Errorf("walking %q: %w", m.Root, errRootMissing)
	}
	if err := m.localRootConflict(st.e.Type); err != nil {
		return nil, nil, err
	}
	if m.File {
		lf.Entries[""] = st.e
	} else {
		walk("")
	}
	return lf, warns, nil
}

// Initial compares the local tree with a container listing (nil when the
// listing failed: everything is sent). It returns the plan and the index of
// entries that already match; apply the plan's result on top of it.
//
// Local files are hashed only when the container has a file of the same size,
// so the common cases (new file, edited file) cost no local reads. A root that
// is a directory on one side only is refused (remote.ErrTypeConflict): replacing it
// would delete a directory, perhaps a volume, or a file nobody asked to lose.
func Initial(m *Resolved, local *LocalFiles, l *Listing, mode InitialMode) (*Plan, *Index, error) {
	return InitialWith(m, local, l, mode, nil)
}

// InitialWith is Initial that leaves alone, neither sent nor
// indexed, each file that differs from the container's where theirs says
// the container's is its own (see Start): sync-back reports it as a conflict.
func InitialWith(m *Resolved, local *LocalFiles, l *Listing, mode InitialMode, theirs func(rel string, re remoteEntry) bool) (*Plan, *Index, error) {
	idx := newIndexSized(len(local.Entries)) // what the container holds once the plan ran
	pl := newPlanState(m, idx)
	var remote map[string]remoteEntry
	if l != nil {
		remote = l.Entries
		if re, ok := remote[""]; m.File && ok && re.Type == TypeDir {
			return nil, nil, ConflictError(m, "", RemoteIsDir)
		}
		if !m.File && l.notDir {
			return nil, nil, ConflictError(m, "", RemoteNotDir)
		}
	}
	for rel, le := range local.Entries {
		re, ok := remote[rel]
		if ok && re.Type != le.Type {
			pl.deletes[rel] = true
			ok = false
		}
		if ok && le.Type == TypeFile {
			le.Mode = localtree.KeepExec(le.Mode, re.Mode)
		}
		if ok && matchesRemote(m, rel, &le, re, l.Alg, local.meter) {
			idx.Put(rel, le)
			continue
		}
		if le.Type == TypeFile && m.Unreadable.Holds(m.FS(), m.LocalPath(rel), rel) {
			continue // see localtree.UnreadableSet; the container keeps what it has
		}
		if ok && theirs != nil && le.Type == TypeFile && re.Type == TypeFile && theirs(rel, re) {
			continue
		}
		pl.copies[rel] = Copy{Rel: rel, Name: m.RemoteName(rel), Src: m.LocalPath(rel), Entry: le}
	}
	var rmdirs []string
	if mode == InitialMirror && l != nil {
		rmdirs = pl.mirror(local, l)
	}
	p := pl.finish()
	for _, d := range rmdirs {
		// Under a type change (a local file where the container has a
		// directory), the whole directory goes anyway.
		if !pl.deletedAncestor(d) {
			p.Rmdirs = append(p.Rmdirs, d)
		}
	}
	return p, idx, nil
}

// mirror plans the deletes of --initial=mirror: remote entries that are
// neither local nor ignored, nor under a local path that could not be read.
// A remote-only directory with nothing to keep under it goes as a whole (one
// argument, however big); one that holds something to keep loses its other
// entries one by one and is returned, deepest first, to be removed once empty.
func (pl *planState) mirror(local *LocalFiles, l *Listing) []string {
	keep := map[string]bool{} // remote directories with something to keep under them
	keepParents := func(rel string) {
		for a := localtree.ParentRel(rel); a != "" && !keep[a]; a = localtree.ParentRel(a) {
			keep[a] = true
		}
	}
	var gone []string
	for rel, re := range l.Entries {
		if _, ok := local.Entries[rel]; ok {
			continue
		}
		if pl.m.Ignored(rel, re.Type == TypeDir) || local.unreadableAt(rel) {
			keep[rel] = true
			keepParents(rel)
			continue
		}
		gone = append(gone, rel)
	}
	for _, rel := range l.unknown {
		keepParents(rel)
	}
	rmdirs := map[string]bool{}
	for _, rel := range gone {
		if keep[rel] {
			continue // a directory that stays unless emptied: see below
		}
		pl.deletes[rel] = true
		// Its remote-only parents that hold something to keep go with
		// rmdir once their deletable entries are gone.
		for a := localtree.ParentRel(rel); a != "" && keep[a]; a = localtree.ParentRel(a) {
			if _, isLocal := local.Entries[a]; isLocal || pl.m.Ignored(a, true) || local.unreadableAt(a) {
				break
			}
			rmdirs[a] = true
		}
	}
	out := slices.Collect(maps.Keys(rmdirs))
	slices.Sort(out)
	slices.Reverse(out) // a child sorts after its parent
	return out
}

// initialCompressMin is the smallest initial archive sent gzip-compressed.
// Source trees shrink 4-5× at level 1, which Go writes at about 100 MB/s a
// core, faster than pods/exec carries a plain tar even over loopback; so
// compressing pays wherever the link is slower than loopback, and costs
// little on loopback (see docs/performance.md). Below 1 MiB
// the whole transfer is a few round trips either way.
const initialCompressMin = 1 << 20

// CompressInitial says whether p's archive goes compressed: the container
// has a working gzip (l, nil when the listing failed, says so), p is big
// enough for it to matter, and a sample of its files shrinks.
func CompressInitial(l *Listing, p *Plan) bool {
	return l != nil && l.Gzip && PlanBytes(p) >= initialCompressMin && Compressible(p.Copies)
}

// Sampling for compressible: up to sampleFiles files spread over the plan,
// up to sampleBytes of each.
const (
	sampleFiles = 16
	sampleBytes = 64 << 10
)

// Compressible compresses a sample of the regular files in copies at level
// 1 and reports whether it shrank by a fifth or more: images, archives and
// other compressed files would cost the CPU on both ends for nothing.
func Compressible(copies []Copy) bool {
	// The regular files, by their index in copies: a copy of every Copy,
	// grown one append at a time, was 0.16 s of the client's CPU in an
	// initial sync of 100,000 files, for 16 samples.
	var files []int32
	for i, c := range copies {
		if c.Type == TypeFile && c.Size > 0 {
			files = append(files, int32(i))
		}
	}
	var in int64
	out := &tarstream.CountingWriter{W: io.Discard, N: new(atomic.Int64)}
	zw, _ := gzip.NewWriterLevel(out, gzip.BestSpeed) // a valid level: no error
	step := max(len(files)/sampleFiles, 1)
	for i := 0; i < len(files); i += step {
		f, _, err := localtree.OpenRegular(copies[files[i]].Src)
		if err != nil {
			continue
		}
		n, _ := io.Copy(zw, io.LimitReader(f, sampleBytes))
		_ = f.Close()
		in += n
	}
	_ = zw.Close() // into io.Discard: no error
	return in > 0 && out.N.Load()*5 <= in*4
}
