package filesync

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
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

// listScript prints what the container has under a directory, in one exec.
// Arguments: $1 the remote directory, $2 a single name to list instead of the
// whole directory (file mappings) or "", $3 listChunkScript.
//
// Output is a stream of NUL-terminated tokens, unambiguous for any name:
//
//	LS1 <hash tool or ""> <"dir" | "none" when $1 (or $1/$2) is missing |
//	    "notdir" when $1 of a directory mapping is something else>
//	then per chunk of names that find hands to listChunkScript (regular
//	files first, then everything else, so that no shell loop has to pick
//	the files to hash out of a chunk: rebuilding "$@" one name at a time
//	is quadratic, 18 s for 10,000 names in busybox sh):
//	C <name>...                     names as found, "./"-prefixed
//	S <stat lines>                  "%f %s %Y %n\n" per name stat could read
//	L [<name> <readlink output>]... symlink targets
//	H <hash tool output>            for regular files only
//	and finally END.
//
// Neither stat nor sha256sum can print a name unambiguously (busybox prints
// newlines raw; GNU sha256sum escapes), so the parser reads their lines
// against the names already known from the C section, in order. Hashes are
// what make a restart cheap: a fresh container layer holds the image's copy
// of the sources, whose mtimes never match the local ones, so size+mtime would
// resend everything while equal hashes send nothing. Without sha256sum or
// md5sum it falls back to size+mtime, which still matches files this tool
// extracted earlier (tar keeps mtimes).
const listScript = `h=
if command -v sha256sum >/dev/null 2>&1; then h=sha256sum
elif command -v md5sum >/dev/null 2>&1; then h=md5sum; fi
start=. min=1
[ -z "$2" ] || { start="./$2"; min=0; }
if [ ! -d "$1" ] || { [ -n "$2" ] && [ ! -e "$1/$2" ] && [ ! -L "$1/$2" ]; }; then
  s=none; [ -n "$2" ] || { [ ! -e "$1" ] && [ ! -L "$1" ]; } || s=notdir
  printf 'LS1\0%s\0%s\0END\0' "$h" "$s"; exit 0
fi
cd "$1" || exit
for c in find stat; do command -v $c >/dev/null 2>&1 || { echo "livesync: $c not found" >&2; exit 127; }; done
printf 'LS1\0%s\0dir\0' "$h"
find "$start" -mindepth $min -type f -exec sh -c "$3" sh "$h" {} +
find "$start" -mindepth $min ! -type f -exec sh -c "$3" sh "" {} +
printf 'END\0'
`

// listChunkScript lists one chunk of names handed over by find (see
// listScript); $1 is the hash tool for a chunk of regular files, else "".
const listChunkScript = `h=$1; shift
printf 'C\0'; printf '%s\0' "$@"
printf 'S\0'; stat -c '%f %s %Y %n' "$@" 2>/dev/null; printf '\0'
printf 'L\0'
for f; do if [ -L "$f" ]; then printf '%s\0' "$f"; readlink "$f" 2>/dev/null; printf '\0'; fi; done
printf 'H\0'
[ -z "$h" ] || $h "$@" 2>/dev/null
printf '\0'
`

func listArgv(m *mapping) []string {
	name := ""
	if m.file {
		name = m.remoteName("")
	}
	return []string{"sh", "-c", listScript, "livesync-list", string(m.remoteDir()), name, listChunkScript}
}

// remoteEntry is one entry of a container listing.
type remoteEntry struct {
	Type  EntryType
	Mode  fs.FileMode
	Size  int64
	MTime int64 // seconds
	Link  string
	Sum   []byte
}

// listing is what the container has under a mapping's remote path.
type listing struct {
	alg     string // "sha256sum", "md5sum" or ""
	exists  bool
	notDir  bool                   // a directory mapping's root is something else
	entries map[string]remoteEntry // by rel
	// unknown holds rels that were found but not described: stat failed,
	// or a FIFO, socket or device. Mirror keeps the directories holding them.
	unknown []string
}

// listRemote runs listScript in t.
func listRemote(ctx context.Context, ex Executor, t Target, m *mapping) (*listing, error) {
	var out bytes.Buffer
	stderr := &tailBuffer{max: 4 << 10}
	if err := ex.Exec(ctx, t, listArgv(m), nil, &out, stderr); err != nil {
		return nil, classify(err, t, "listing files", m.remoteDir(), stderr.String())
	}
	l, err := parseListing(out.Bytes(), m)
	if err != nil {
		return nil, fmt.Errorf("listing %q in %s: %w", m.Remote, t, err)
	}
	return l, nil
}

type tokens struct{ b []byte }

func (t *tokens) next() (string, bool) {
	i := bytes.IndexByte(t.b, 0)
	if i < 0 {
		return "", false
	}
	s := string(t.b[:i])
	t.b = t.b[i+1:]
	return s, true
}

// parseListing parses listScript's output; names are turned into rels of m.
func parseListing(b []byte, m *mapping) (*listing, error) {
	t := &tokens{b: b}
	magic, _ := t.next()
	alg, _ := t.next()
	state, ok := t.next()
	if magic != "LS1" || !ok {
		return nil, errors.New("unexpected output from the listing script")
	}
	l := &listing{alg: alg, exists: state == "dir", notDir: state == "notdir", entries: map[string]remoteEntry{}}
	for {
		tok, ok := t.next()
		switch {
		case !ok:
			return nil, errors.New("listing output is truncated")
		case tok == "END":
			return l, nil
		case tok != "C":
			return nil, fmt.Errorf("unexpected token %q in listing output", tok)
		}
		if err := l.parseChunk(t, m); err != nil {
			return nil, err
		}
	}
}

func (l *listing) parseChunk(t *tokens, m *mapping) error {
	var names []string
	for {
		n, ok := t.next()
		if !ok {
			return errors.New("listing output is truncated")
		}
		if n == "S" {
			break
		}
		names = append(names, n)
	}
	statOut, _ := t.next()
	got := map[string]remoteEntry{}
	var files []string
	parseLines(statOut, names, func(name, fields string) {
		f := strings.Fields(fields)
		if len(f) != 3 {
			return
		}
		raw, err1 := strconv.ParseUint(f[0], 16, 32)
		size, err2 := strconv.ParseInt(f[1], 10, 64)
		mtime, err3 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return
		}
		e := remoteEntry{Mode: fs.FileMode(raw & 0o777), Size: size, MTime: mtime}
		switch raw & 0o170000 {
		case 0o100000:
			e.Type = TypeFile
			files = append(files, name)
		case 0o040000:
			e.Type = TypeDir
		case 0o120000:
			e.Type = TypeSymlink
		default:
			return
		}
		got[name] = e
	})
	if tok, _ := t.next(); tok != "L" {
		return errors.New("listing output: missing link section")
	}
	for {
		n, ok := t.next()
		if !ok {
			return errors.New("listing output is truncated")
		}
		if n == "H" {
			break
		}
		target, _ := t.next()
		if e, ok := got[n]; ok && e.Type == TypeSymlink {
			e.Link = strings.TrimSuffix(target, "\n")
			got[n] = e
		}
	}
	hashOut, _ := t.next()
	parseHashes(hashOut, files, func(name string, sum []byte) {
		e := got[name]
		e.Sum = sum
		got[name] = e
	})
	for name, e := range got {
		if rel, ok := remoteRel(m, name); ok {
			l.entries[rel] = e
		}
	}
	for _, name := range names {
		if _, ok := got[name]; !ok {
			if rel, ok := remoteRel(m, name); ok {
				l.unknown = append(l.unknown, rel)
			}
		}
	}
	return nil
}

// remoteRel turns a listed "./name" into a rel of m; false for anything that
// does not belong to m or is not a clean relative path.
func remoteRel(m *mapping, name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "./")
	if !ok {
		return "", false
	}
	if m.file {
		return "", rest == m.remoteName("")
	}
	return rest, rest != "" && validRel(rest)
}

// parseLines walks "<fields> <name>\n" lines, where name is known to be one
// of names, in order; names missing from out (stat failed) are skipped.
func parseLines(out string, names []string, fn func(name, fields string)) {
	for _, name := range names {
		if out == "" {
			return
		}
		// fields are "%f %s %Y": three space-terminated tokens.
		i, sp := 0, 0
		for ; i < len(out) && sp < 3; i++ {
			if out[i] == ' ' {
				sp++
			} else if out[i] == '\n' {
				break
			}
		}
		if sp < 3 {
			return
		}
		if rest, ok := strings.CutPrefix(out[i:], name+"\n"); ok {
			fn(name, out[:i-1])
			out = rest
		}
	}
}

// parseHashes reads `sha256sum`/`md5sum` output for files, in order. Busybox
// prints names raw; GNU escapes names holding "\" or a newline and marks the
// line with a leading backslash.
func parseHashes(out string, files []string, fn func(name string, sum []byte)) {
	for len(out) > 0 && len(files) > 0 {
		escaped := out[0] == '\\'
		if escaped {
			out = out[1:]
		}
		sep := strings.Index(out, "  ")
		if sep < 0 {
			return
		}
		sum, err := hex.DecodeString(out[:sep])
		if err != nil {
			return
		}
		out = out[sep+2:]
		var line string
		if escaped {
			end := strings.IndexByte(out, '\n')
			if end < 0 {
				return
			}
			line, out = unescapeGNU(out[:end]), out[end+1:]
		}
		for len(files) > 0 {
			name := files[0]
			files = files[1:]
			if escaped && line == name {
				fn(name, sum)
				break
			}
			if rest, ok := strings.CutPrefix(out, name+"\n"); !escaped && ok {
				fn(name, sum)
				out = rest
				break
			}
		}
	}
}

func unescapeGNU(s string) string {
	r := strings.NewReplacer(`\\`, `\`, `\n`, "\n", `\r`, "\r")
	return r.Replace(s)
}

// localFiles is a walked local tree.
type localFiles struct {
	entries map[string]Entry // by rel; a directory mapping's root is not included
	// unreadable holds rels that could not be read: a directory that could
	// not be listed, an entry that could not be stat'ed. They are not in
	// entries, and the container's side of them and of everything under
	// them is left alone.
	unreadable map[string]bool
}

// unreadableAt reports whether rel or a parent of it could not be read.
func (lf *localFiles) unreadableAt(rel string) bool {
	if len(lf.unreadable) == 0 {
		return false
	}
	for p := rel; ; p = parentRel(p) {
		if lf.unreadable[p] {
			return true
		}
		if p == "" {
			return false
		}
	}
}

// localTree walks m's local root, pruning ignored paths. What cannot be read
// is reported as a warning and left alone (see localFiles).
func localTree(m *mapping) (*localFiles, []error, error) {
	pl := newPlanner(m, NewIndex())
	lf := &localFiles{entries: map[string]Entry{}, unreadable: map[string]bool{}}
	var warns []error
	var walk func(rel string)
	walk = func(rel string) {
		names, err := pl.readDir(rel)
		if err != nil {
			warns = append(warns, fmt.Errorf("%w: leaving it alone in the container", err))
			lf.unreadable[rel] = true
			delete(lf.entries, rel)
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
				lf.unreadable[child] = true
			case !st.found || m.ignored(child, st.e.Type == TypeDir):
			default:
				lf.entries[child] = st.e
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
		return nil, nil, fmt.Errorf("walking %q: %w", m.root, errRootMissing)
	}
	if err := m.localRootConflict(st.e.Type); err != nil {
		return nil, nil, err
	}
	if m.file {
		lf.entries[""] = st.e
	} else {
		walk("")
	}
	return lf, warns, nil
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

// planInitial compares the local tree with a container listing (nil when the
// listing failed: everything is sent). It returns the plan and the index of
// entries that already match; apply the plan's result on top of it.
//
// Local files are hashed only when the container has a file of the same size,
// so the common cases (new file, edited file) cost no local reads. A root that
// is a directory on one side only is refused (ErrTypeConflict): replacing it
// would delete a directory, perhaps a volume, or a file nobody asked to lose.
func planInitial(m *mapping, local *localFiles, l *listing, mode InitialMode) (*Plan, *Index, error) {
	idx := NewIndex()
	pl := newPlanner(m, idx)
	var remote map[string]remoteEntry
	if l != nil {
		remote = l.entries
		if re, ok := remote[""]; m.file && ok && re.Type == TypeDir {
			return nil, nil, conflictError(m, "", remoteIsDir)
		}
		if !m.file && l.notDir {
			return nil, nil, conflictError(m, "", remoteNotDir)
		}
	}
	for rel, le := range local.entries {
		re, ok := remote[rel]
		if ok && re.Type != le.Type {
			pl.deletes[rel] = true
			ok = false
		}
		if ok && matchesRemote(m, rel, &le, re, l.alg) {
			idx.Put(rel, le)
			continue
		}
		pl.copies[rel] = Copy{Rel: rel, Name: m.remoteName(rel), Src: m.localPath(rel), Entry: le}
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
func (pl *planner) mirror(local *localFiles, l *listing) []string {
	keep := map[string]bool{} // remote directories with something to keep under them
	keepParents := func(rel string) {
		for a := parentRel(rel); a != "" && !keep[a]; a = parentRel(a) {
			keep[a] = true
		}
	}
	var gone []string
	for rel, re := range l.entries {
		if _, ok := local.entries[rel]; ok {
			continue
		}
		if pl.m.ignored(rel, re.Type == TypeDir) || local.unreadableAt(rel) {
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
		for a := parentRel(rel); a != "" && keep[a]; a = parentRel(a) {
			if _, isLocal := local.entries[a]; isLocal || pl.m.ignored(a, true) || local.unreadableAt(a) {
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

// matchesRemote reports whether the container already has le. Permission bits
// are compared loosely (group/other write may differ by the remote umask).
func matchesRemote(m *mapping, rel string, le *Entry, re remoteEntry, alg string) bool {
	switch le.Type {
	case TypeSymlink:
		return le.Link == re.Link
	case TypeDir:
		return (le.Mode^re.Mode)&^0o022 == 0
	}
	if le.Size != re.Size || (le.Mode^re.Mode)&^0o022 != 0 {
		return false
	}
	var h hash.Hash
	switch {
	case re.Sum == nil:
		return le.MTime.Unix() == re.MTime
	case alg == "sha256sum":
		h = sha256.New()
	case alg == "md5sum":
		h = md5.New()
	default:
		return false
	}
	sum, err := hashWith(m.localPath(rel), h)
	if err != nil || !bytes.Equal(sum, re.Sum) {
		return false
	}
	if alg == "sha256sum" {
		le.Sum = (*[32]byte)(sum)
	}
	return true
}
