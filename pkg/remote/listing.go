package remote

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"strconv"
	"strings"
)

// ListArgv is the exec that runs list.sh in the remote directory root: over
// all of it, or over its one entry name when name is not "".
func ListArgv(root, name string) []string {
	return []string{"sh", "-c", listScript, "livesync-list", root, name, listChunkScript}
}

// Entry is one entry of a container listing.
type Entry struct {
	Type  EntryType
	Mode  fs.FileMode
	Size  int64
	MTime int64 // seconds
	// MTimeNs is the mtime in nanoseconds where the listing says it (a
	// listing without hashes, see ListStat), else 0: tar, which this tool
	// writes with, sets whole seconds, so a fraction says something else
	// wrote the file, even within the same second.
	MTimeNs int64
	Link    string
	Sum     []byte
}

// Listing is what the container has under a remote directory.
type Listing struct {
	Alg    string // "sha256sum", "md5sum" or ""
	Gzip   bool   // `gzip -dc` works: an archive may be sent compressed
	Exists bool
	NotDir bool             // the root is something else than a directory
	Names  map[string]Entry // by listed name, "./"-prefixed
	// Unknown holds names that were found but not described: stat failed,
	// or a FIFO, socket or device.
	Unknown []string
	// Whole holds the directories whose every entry an incremental scan
	// listed (see ScanResult.Since); nil elsewhere.
	Whole map[string]bool
}

// ListStatArgv is ListArgv hashing nothing: the listing names the Alg the
// container has (moves and deltas need it) but holds no Sums, and costs the
// container a stat per entry.
func ListStatArgv(root, name string) []string {
	return append(ListArgv(root, name), "nohash")
}

// ListNamesArgv is ListArgv over the regular files names ("./"-prefixed)
// alone, each hashed: what a start reads of the few files whose stat data
// cannot say whether they are still the ancestor's.
func ListNamesArgv(root string, names []string) []string {
	return append(ListArgv(root, ""), append([]string{"names"}, names...)...)
}

// ListNames runs ListNamesArgv in t over names, in as many execs as
// MaxArgBytes allows, and returns what they listed as one listing: a name
// that is not a regular file (or no longer there) is left out.
func ListNames(ctx context.Context, ex Executor, t Target, root string, names []string) (*Listing, error) {
	var all *Listing
	for len(names) > 0 {
		n, size := 0, 0
		for n < len(names) && (n == 0 || size+len(names[n]) <= MaxArgBytes) {
			size += len(names[n])
			n++
		}
		l, err := list(ctx, ex, t, root, "", ListNamesArgv(root, names[:n]))
		if err != nil {
			return nil, err
		}
		names = names[n:]
		if all == nil {
			all = l
			continue
		}
		maps.Copy(all.Names, l.Names)
		all.Unknown = append(all.Unknown, l.Unknown...)
	}
	if all == nil {
		all = &Listing{Names: map[string]Entry{}}
	}
	return all, nil
}

// List runs ListArgv(root, name) in t and parses what it prints.
func List(ctx context.Context, ex Executor, t Target, root, name string) (*Listing, error) {
	return list(ctx, ex, t, root, name, ListArgv(root, name))
}

// ListStat runs ListStatArgv(root, name) in t and parses what it prints.
func ListStat(ctx context.Context, ex Executor, t Target, root, name string) (*Listing, error) {
	return list(ctx, ex, t, root, name, ListStatArgv(root, name))
}

func list(ctx context.Context, ex Executor, t Target, root, name string, argv []string) (*Listing, error) {
	var out bytes.Buffer
	if err := Run(ctx, ex, t, "listing files", root, argv, nil, &out); err != nil {
		return nil, err
	}
	l, err := ParseListing(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("listing %q in %s: %w", path.Join(root, name), t, err)
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

// ParseListing parses list.sh's output (its header describes the format).
func ParseListing(b []byte) (*Listing, error) {
	return parseListing(&tokens{b: b})
}

// parseListing reads a listing from t, up to and including its END.
func parseListing(t *tokens) (*Listing, error) {
	magic, _ := t.next()
	alg, _ := t.next()
	gz, _ := t.next()
	state, ok := t.next()
	if magic != "LS2" || !ok {
		return nil, errors.New("unexpected output from the listing script")
	}
	l := &Listing{Alg: alg, Gzip: gz == "gzip", Exists: state == "dir", NotDir: state == "notdir", Names: map[string]Entry{}}
	for {
		tok, ok := t.next()
		switch {
		case !ok:
			return nil, errors.New("listing output is truncated")
		case tok == "END":
			return l, nil
		case tok == "V":
			if err := l.parseWhole(t); err != nil {
				return nil, err
			}
			continue
		case tok != "C":
			return nil, fmt.Errorf("unexpected token %q in listing output", tok)
		}
		if err := l.parseChunk(t); err != nil {
			return nil, err
		}
	}
}

// parseWhole reads the names of a scan's "V" record, up to its "".
func (l *Listing) parseWhole(t *tokens) error {
	for {
		n, ok := t.next()
		switch {
		case !ok:
			return errors.New("listing output is truncated")
		case n == "":
			return nil
		}
		if l.Whole == nil {
			l.Whole = map[string]bool{}
		}
		l.Whole[n] = true
	}
}

func (l *Listing) parseChunk(t *tokens) error {
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
	got := make(map[string]Entry, len(names))
	var files []string
	var fa [8]string
	parseLines(statOut, names, func(name, fields string) {
		f := splitFields(fields, fa[:0])
		if len(f) < 3 {
			return
		}
		raw, err1 := strconv.ParseUint(f[0], 16, 32)
		size, err2 := strconv.ParseInt(f[1], 10, 64)
		mtime, err3 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return
		}
		e := Entry{Mode: fs.FileMode(raw & 0o777), Size: size, MTime: mtime}
		if len(f) >= 5 {
			e.MTimeNs = nanos(mtime, f[4])
		}
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
		// Listed twice (a scan lists a changed directory's entries and
		// the new files in it, the second time without a hash): the hash
		// stays while the entry is the same.
		if was, ok := l.Names[name]; ok && e.Sum == nil && was.Sum != nil && was.Type == e.Type && was.Size == e.Size && was.MTime == e.MTime && was.Mode == e.Mode {
			e.Sum = was.Sum
		}
		l.Names[name] = e
	}
	for _, name := range names {
		if _, ok := got[name]; !ok {
			l.Unknown = append(l.Unknown, name)
		}
	}
	return nil
}

// splitFields appends to dst, whose room it reuses, the space-separated fields of s, as
// strings.Fields does for stat's lines, without a slice for each line.
func splitFields(s string, dst []string) []string {
	for {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			return dst
		}
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			return append(dst, s)
		}
		dst, s = append(dst, s[:i]), s[i+1:]
	}
}

// nanos returns the mtime sec in nanoseconds, its fraction read from
// clock, the time of day stat's %y prints ("15:04:05.123456789"); 0 when
// clock has no fraction.
func nanos(sec int64, clock string) int64 {
	_, frac, ok := strings.Cut(clock, ".")
	if !ok || frac == "" || len(frac) > 9 {
		return 0
	}
	ns, err := strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	if err != nil || ns < 0 {
		return 0
	}
	return sec*1e9 + ns
}

// parseLines walks "<fields> <name>\n" lines, where name is known to be one
// of names, in order; names missing from out (stat failed) are skipped.
// Fields hold no newline (names may): a line's name starts at a space
// before the first newline, the one space after which name and a newline
// follow (three fields, or more with %y).
func parseLines(out string, names []string, fn func(name, fields string)) {
	for _, name := range names {
		if out == "" {
			return
		}
		nl := strings.IndexByte(out, '\n')
		if nl < 0 {
			return
		}
		for i := 0; i < nl; i++ {
			if out[i] != ' ' {
				continue
			}
			// name and a newline after the space (not name+"\n": a string
			// built for each space of each line, 6 with %y, was half of what
			// parsing the listing of 100,000 files allocated)
			if rest := out[i+1:]; len(rest) > len(name) && rest[len(name)] == '\n' && rest[:len(name)] == name {
				fn(name, out[:i])
				out = rest[len(name)+1:]
				break
			}
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
