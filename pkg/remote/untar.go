package remote

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"
)

// ErrHostileEntry is what ReadArchive returns for an entry that would land
// outside its root: an absolute name, a ".." in a name, a link whose target
// leaves the root, a hard link, or a device, FIFO or socket. kubectl cp had
// three CVEs of this class (CVE-2019-1002101, CVE-2019-11246,
// CVE-2019-11249): a container controls what its tar prints.
var ErrHostileEntry = errors.New("refused archive entry")

// ArchiveEntry is one entry of a downloaded archive, named by its
// slash-separated path relative to the root.
type ArchiveEntry struct {
	Rel   string
	Type  EntryType
	Mode  fs.FileMode // permission bits
	Size  int64
	MTime time.Time
	Link  string    // a symlink's target, relative and inside the root
	Body  io.Reader // a file's content; read it before the next entry
}

// ReadArchive calls fn for each entry of the tar stream r, in order, and
// stops at the first error: fn's, a broken archive's, or ErrHostileEntry for
// an entry that could reach outside the root, whatever came before it.
func ReadArchive(r io.Reader, fn func(ArchiveEntry) error) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		e, err := checkEntry(h)
		if err != nil {
			return err
		}
		if e.Rel == "" {
			continue // the root itself: "./"
		}
		if e.Type == TypeFile {
			e.Body = tr
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}

// checkEntry turns h into an entry, refusing names and link targets that
// leave the root and kinds that are never synced.
func checkEntry(h *tar.Header) (ArchiveEntry, error) {
	refuse := func(why string) (ArchiveEntry, error) {
		return ArchiveEntry{}, fmt.Errorf("%w %q: %s", ErrHostileEntry, h.Name, why)
	}
	name := strings.TrimSuffix(h.Name, "/")
	for strings.HasPrefix(name, "./") {
		name = name[2:]
	}
	switch {
	case name == "." || name == "":
		name = ""
	case strings.HasPrefix(name, "/"):
		return refuse("an absolute name")
	case strings.ContainsRune(name, 0) || strings.Contains(name, "\\"):
		return refuse("a NUL or backslash in the name")
	case path.Clean(name) != name:
		return refuse("a name that is not clean")
	case hasDotDot(name):
		return refuse(`a ".." in the name`)
	}
	e := ArchiveEntry{Rel: name, Mode: fs.FileMode(h.Mode) & fs.ModePerm, Size: h.Size, MTime: h.ModTime}
	switch h.Typeflag {
	case tar.TypeReg: // the reader reports the old TypeRegA as TypeReg
		e.Type = TypeFile
	case tar.TypeDir:
		e.Type = TypeDir
	case tar.TypeSymlink:
		e.Type, e.Link = TypeSymlink, h.Linkname
		if path.IsAbs(h.Linkname) {
			return refuse("a link to an absolute path")
		}
		if t := path.Join(path.Dir(name), h.Linkname); t == ".." || strings.HasPrefix(t, "../") {
			return refuse("a link that leaves the root")
		}
	case tar.TypeLink:
		return refuse("a hard link")
	default:
		return refuse("not a file, directory or symlink")
	}
	if e.Rel == "" && e.Type != TypeDir {
		return refuse("the root as something other than a directory")
	}
	return e, nil
}

// readMaybeGzip is ReadArchive of r, gunzipped first where r starts with
// gzip's magic bytes (no tar header does: its name comes first, and
// download.sh names entries "./…").
func readMaybeGzip(r io.Reader, fn func(ArchiveEntry) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		zr.Multistream(false)
		return ReadArchive(zr, fn)
	}
	return ReadArchive(br, fn)
}

func hasDotDot(name string) bool {
	for c := range strings.SplitSeq(name, "/") {
		if c == ".." {
			return true
		}
	}
	return false
}

// Download runs DownloadArgv(root, names) in t and hands each entry of the
// archive it prints to fn, as it arrives (see ReadArchive). An error after
// some entries (a name that vanished, a connection cut) is returned, and
// the entries fn got before it stand. The archive comes gzip-compressed
// where ex measured t's link slow (see Link.Slow; nothing measured is not
// slow here: no sample of the container's files says they compress) and the
// container has gzip.
func Download(ctx context.Context, ex Executor, t Target, root string, names []string, fn func(ArchiveEntry) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	l := LinkOf(ex, t)
	argv := DownloadArgv(root, l.Known() && l.Slow(), names)
	go func() {
		err := Run(ctx, ex, t, "downloading files", root, argv, nil, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	rerr := readMaybeGzip(pr, fn)
	if rerr != nil {
		cancel() // the archive is refused: stop reading it
	}
	pr.CloseWithError(errors.New("archive reader done"))
	xerr := <-done
	if rerr != nil && !errors.Is(rerr, xerr) {
		return rerr
	}
	return xerr
}
