package filesync

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// archiveResult is what building one tar stream found out.
type archiveResult struct {
	files int   // entries written
	bytes int64 // tar bytes produced
	sums  map[string]*[32]byte
	// raced holds files that changed or vanished while being read; the index
	// forgets them so the next batch sends them again.
	raced map[string]struct{}
	// warnings are files skipped because they were no longer regular files
	// (a FIFO, socket or device in their place).
	warnings []error
	// unreadable holds files that could not be opened for a reason that
	// would not change by trying again (see localtree.Unreadable): not sent, not
	// raced, and the index keeps what the target had.
	unreadable map[string]error
}

// archiveOpts are how an apply's archive is written.
type archiveOpts struct {
	gz    bool          // gzip-compressed (where the listing found gzip)
	owner *remote.Owner // the uid:gid in every header, restored by a root helper
}

// streamArchive streams copies as a tar through a pipe, gzip-compressed
// (level 1) with gz. Close the reader once the consumer is done (that
// unblocks the writer), then call wait.
func streamArchive(copies []Copy, o archiveOpts) (r io.ReadCloser, wait func() (archiveResult, error)) {
	pr, pw := io.Pipe()
	ar := &archiveReader{PipeReader: pr}
	done := make(chan struct{})
	var (
		res archiveResult
		err error
	)
	go func() {
		defer close(done)
		if !o.gz {
			res, err = writeArchiveCounted(pw, copies, o.owner, &ar.tar)
			pw.CloseWithError(err)
			return
		}
		// The gzip writer's own writes are as small as a deflate block's
		// output, and each Write is one WebSocket frame: buffer them.
		bw := bufio.NewWriterSize(pw, 64<<10)
		zw, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed) // a valid level: no error
		res, err = writeArchiveCounted(zw, copies, o.owner, &ar.tar)
		if err == nil {
			err = zw.Close()
			if err == nil {
				err = bw.Flush()
			}
			if err != nil {
				err = fmt.Errorf("compressing tar stream: %w", err)
			}
		}
		pw.CloseWithError(err)
	}()
	return ar, func() (archiveResult, error) { <-done; return res, err }
}

// archiveReader is streamArchive's reader. tar counts the tar bytes written
// so far, before compression, for progress reports.
type archiveReader struct {
	*io.PipeReader
	tar atomic.Int64
}

func (a *archiveReader) tarBytes() int64 { return a.tar.Load() }

// writeArchive writes copies to w as a tar: names relative to the remote
// directory, same name twice → last wins, sorted so parents come first, uid and
// gid zero and no owner names (the container's user owns what it extracts),
// permission bits kept, symlinks as links. The writer picks USTAR, or PAX for
// long and non-ASCII names; GNU and busybox tar read both.
func writeArchive(w io.Writer, copies []Copy) (archiveResult, error) {
	return writeArchiveCounted(w, copies, nil, new(atomic.Int64))
}

// writeArchiveCounted is writeArchive that also counts the tar bytes written
// so far into n.
func writeArchiveCounted(w io.Writer, copies []Copy, owner *remote.Owner, n *atomic.Int64) (archiveResult, error) {
	res := archiveResult{sums: map[string]*[32]byte{}, raced: map[string]struct{}{}, unreadable: map[string]error{}}
	cw := &countingWriter{w: w, n: n}
	bw := bufio.NewWriterSize(cw, 64<<10) // one WebSocket frame per Write: keep them large
	tw := tar.NewWriter(bw)
	for _, c := range dedupe(copies) {
		if !localtree.ValidRel(c.Name) || c.Name == "" {
			return res, fmt.Errorf("archiving %q: invalid entry name %q", c.Src, c.Name)
		}
		ok, err := writeEntry(tw, c, owner, &res)
		if err != nil {
			return res, err
		}
		_, unreadable := res.unreadable[c.Rel]
		switch {
		case ok:
			res.files++
		case !unreadable:
			res.raced[c.Rel] = struct{}{}
		}
	}
	if err := tw.Close(); err != nil {
		return res, fmt.Errorf("finishing tar stream: %w", err)
	}
	err := bw.Flush()
	res.bytes = cw.n.Load()
	if err != nil {
		return res, fmt.Errorf("writing tar stream: %w", err)
	}
	return res, nil
}

// dedupe keeps the last copy of each name and sorts by name.
func dedupe(copies []Copy) []Copy {
	last := make(map[string]int, len(copies))
	for i, c := range copies {
		last[c.Name] = i
	}
	out := make([]Copy, 0, len(last))
	for i, c := range copies {
		if last[c.Name] == i {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Copy) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// writeEntry writes one entry, and false if it was skipped or cut short
// because the local file changed under it.
func writeEntry(tw *tar.Writer, c Copy, owner *remote.Owner, res *archiveResult) (bool, error) {
	hdr := &tar.Header{Name: c.Name, Mode: int64(c.Mode.Perm()), ModTime: c.MTime.Truncate(time.Second)}
	if owner != nil {
		hdr.Uid, hdr.Gid = owner.UID, owner.GID
	}
	switch c.Type {
	case TypeDir:
		// Writable for now: busybox tar creates a directory with its mode
		// before its children and, as non-root, never chmods. The apply
		// script sets a mode lacking u+rwx after the extraction.
		hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, c.Name+"/", hdr.Mode|0o700
		return true, writeHeader(tw, hdr)
	case TypeSymlink:
		link, err := os.Readlink(c.Src)
		if err != nil {
			return false, nil
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, link
		return link == c.Link, writeHeader(tw, hdr)
	}
	f, fi, err := localtree.OpenRegular(c.Src)
	switch {
	case errors.Is(err, localtree.ErrNotRegular):
		res.warnings = append(res.warnings, fmt.Errorf("skipping %w", err))
	case localtree.Unreadable(err):
		// Before the header: the target's copy, if any, stays whole.
		res.unreadable[c.Rel] = err
		return false, nil
	}
	if err != nil {
		return false, nil // gone, replaced by a link or by a FIFO since planning
	}
	defer f.Close()
	// Send what the file is now; if that differs from what was planned the
	// index must not record the planned metadata.
	fresh := fi.Size() == c.Size && fi.ModTime().Equal(c.MTime) && fi.Mode().Perm() == c.Mode
	hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeReg, fi.Size(), int64(fi.Mode().Perm())
	hdr.ModTime = fi.ModTime().Truncate(time.Second)
	if hdr.Size > maxUSTARSize {
		// Busybox tar ignores the PAX size record archive/tar would use
		// and extracts an empty file, then reads the content as the end
		// of the archive and succeeds; both tars read GNU base-256 sizes.
		hdr.Format = tar.FormatGNU
	}
	if err := writeHeader(tw, hdr); err != nil {
		return false, err
	}
	h := sha256.New()
	intact, err := copyExact(tw, io.TeeReader(f, h), f, hdr.Size)
	if err != nil {
		return false, fmt.Errorf("archiving %q: %w", c.Src, err)
	}
	if !intact || !fresh {
		return false, nil
	}
	var sum [32]byte
	h.Sum(sum[:0])
	res.sums[c.Rel] = &sum
	return true, nil
}

// maxUSTARSize is the largest size the 11 octal digits of a ustar header
// hold: 8 GiB - 1.
const maxUSTARSize = 1<<33 - 1

func writeHeader(tw *tar.Writer, hdr *tar.Header) error {
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing tar header for %q: %w", hdr.Name, err)
	}
	return nil
}

// copyExact copies exactly size bytes, the size already promised in the tar
// header: a file that shrank is padded with zeros, one that grew is cut, and
// either reports intact=false.
func copyExact(dst io.Writer, src io.Reader, f io.Reader, size int64) (intact bool, err error) {
	n, err := io.CopyN(dst, src, size)
	switch {
	case errors.Is(err, io.EOF):
		if _, err := io.CopyN(dst, zeros{}, size-n); err != nil {
			return false, err
		}
		return false, nil
	case err != nil:
		return false, err
	}
	var one [1]byte
	m, _ := f.Read(one[:])
	return m == 0, nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// countingWriter counts into n, which progress reports read meanwhile.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}
