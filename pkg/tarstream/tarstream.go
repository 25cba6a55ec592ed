// Package tarstream writes the files of one batch as a tar stream, the way a
// container's tar extracts them: names relative to the remote directory,
// parents first, each name once, owners zeroed (or a root helper's owner),
// permission bits kept, symlinks as links, a file read without following a
// link and never blocking on a FIFO, and its content exactly the size its
// header promised. What changed while it was read is reported, not sent as
// synced. Like Tilt's build/tar.go, it knows nothing of why a file is sent.
package tarstream

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// File is one entry of the stream: what a plan expects Src to be.
type File struct {
	Rel  string // the caller's key in Result
	Name string // tar name, relative to the remote directory
	Src  string // absolute local path
	Type remote.EntryType
	Mode fs.FileMode // permission bits
	Size int64
	// MTime is the planned mtime; Size, MTime and Mode decide whether the
	// file read is the one planned.
	MTime time.Time
	Link  string // symlink target
}

// Result is what building one tar stream found out, keyed by File.Rel.
type Result struct {
	Files int   // entries written
	Bytes int64 // tar bytes produced
	Sums  map[string]*[32]byte
	// Raced holds files that changed or vanished while being read, or were
	// not what was planned: the caller must not record them as sent.
	Raced map[string]struct{}
	// Carried holds, of the raced regular files whose entry went out, the
	// sha256 of the bytes it carried (zeros padding a file that shrank):
	// what the target holds once it confirms the archive.
	Carried map[string]*[32]byte
	// Warnings are files skipped because they were no longer regular files
	// (a FIFO, socket or device in their place).
	Warnings []error
	// Unreadable holds files that could not be opened for a reason that
	// would not change by trying again (see localtree.Unreadable): not sent
	// and not raced.
	Unreadable map[string]error
}

// Options are how a stream is written.
type Options struct {
	Gzip  bool          // gzip-compressed (where the container has gzip)
	Owner *remote.Owner // the uid:gid in every header, restored by a root helper
}

// Stream streams files as a tar through a pipe, gzip-compressed (level 1)
// with o.Gzip. Close the reader once the consumer is done (that unblocks the
// writer), then call wait. An uncompressed stream is marked in parts of
// whole entries (see Reader.PartEnd).
func Stream(files []File, o Options) (r *Reader, wait func() (Result, error)) {
	pr, pw := io.Pipe()
	ar := &Reader{PipeReader: pr}
	done := make(chan struct{})
	var (
		res Result
		err error
	)
	go func() {
		defer close(done)
		if !o.Gzip {
			res, err = write(pw, files, o.Owner, &ar.tar, &ar.part)
			pw.CloseWithError(err)
			return
		}
		// The gzip writer's own writes are as small as a deflate block's
		// output, and each Write is one WebSocket frame: buffer them.
		bw := bufio.NewWriterSize(pw, 64<<10)
		zw, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed) // a valid level: no error
		res, err = write(zw, files, o.Owner, &ar.tar, nil)
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
	return ar, func() (Result, error) { <-done; return res, err }
}

// Reader is a stream's reading end; it counts the tar bytes written so far,
// before compression, for progress reports.
type Reader struct {
	*io.PipeReader
	tar  atomic.Int64
	part atomic.Int64
}

// PartEnd is where the last part of whole entries ended, as an offset into
// what Read returned so far (0: none yet): the writer marks the stream at
// the end of an entry once remote.PartMin bytes or more went since the last
// mark, after its reader took every byte before it, so it never lies past
// what was read. A container can extract a part while the next one comes
// (see remote.Parted). A compressed stream has none.
func (a *Reader) PartEnd() int64 { return a.part.Load() }

// TarBytes is how many tar bytes were written so far: behind a compressed
// stream, more than was read.
func (a *Reader) TarBytes() int64 { return a.tar.Load() }

// Write writes files to w as a tar: names relative to the remote
// directory, same name twice → last wins, sorted so parents come first, uid and
// gid zero and no owner names (the container's user owns what it extracts),
// permission bits kept, symlinks as links. The writer picks USTAR, or PAX for
// long and non-ASCII names; GNU and busybox tar read both.
func Write(w io.Writer, files []File) (Result, error) {
	return write(w, files, nil, new(atomic.Int64), nil)
}

// tarWriters are write's buffers, 64 KiB so that each Write is one large
// WebSocket frame. Pooled: in a fan-out every replica's worker writes every
// batch's tar, and making a fresh one each time was 80 ms of 1.22 s of the
// client's CPU in a profile of a 10-replica fan-out, before collecting them.
var tarWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}

// write is Write that also counts the tar bytes written so far into n and,
// with part, marks there the end of every part (see Reader.PartEnd).
func write(w io.Writer, files []File, owner *remote.Owner, n *atomic.Int64, part *atomic.Int64) (Result, error) {
	res := Result{Sums: map[string]*[32]byte{}, Raced: map[string]struct{}{}, Unreadable: map[string]error{}}
	cw := &CountingWriter{W: w, N: n}
	bw := tarWriters.Get().(*bufio.Writer)
	bw.Reset(cw)
	defer func() {
		bw.Reset(nil)
		tarWriters.Put(bw)
	}()
	tw := tar.NewWriter(bw)
	for _, c := range dedupe(files) {
		if !localtree.ValidRel(c.Name) || c.Name == "" {
			return res, fmt.Errorf("archiving %q: invalid entry name %q", c.Src, c.Name)
		}
		ok, err := writeEntry(tw, c, owner, &res)
		if err != nil {
			return res, err
		}
		_, unreadable := res.Unreadable[c.Rel]
		switch {
		case ok:
			res.Files++
		case !unreadable:
			res.Raced[c.Rel] = struct{}{}
		}
		if part != nil && cw.N.Load()+int64(bw.Buffered())-part.Load() >= remote.PartMin {
			// The entry's padding and what the buffer holds go through
			// the pipe, whose writes return once read: then the mark.
			if err := tw.Flush(); err != nil {
				return res, fmt.Errorf("writing tar stream: %w", err)
			}
			if err := bw.Flush(); err != nil {
				return res, fmt.Errorf("writing tar stream: %w", err)
			}
			part.Store(cw.N.Load())
		}
	}
	if err := tw.Close(); err != nil {
		return res, fmt.Errorf("finishing tar stream: %w", err)
	}
	err := bw.Flush()
	res.Bytes = cw.N.Load()
	if err != nil {
		return res, fmt.Errorf("writing tar stream: %w", err)
	}
	return res, nil
}

// dedupe keeps the last file of each name and sorts by name.
func dedupe(files []File) []File {
	last := make(map[string]int, len(files))
	for i, c := range files {
		last[c.Name] = i
	}
	out := make([]File, 0, len(last))
	for i, c := range files {
		if last[c.Name] == i {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// writeEntry writes one entry, and false if it was skipped or cut short
// because the local file changed under it.
func writeEntry(tw *tar.Writer, c File, owner *remote.Owner, res *Result) (bool, error) {
	hdr := &tar.Header{Name: c.Name, Mode: int64(c.Mode.Perm()), ModTime: c.MTime.Truncate(time.Second)}
	if owner != nil {
		hdr.Uid, hdr.Gid = owner.UID, owner.GID
	}
	switch c.Type {
	case remote.TypeDir:
		// Writable for now: busybox tar creates a directory with its mode
		// before its children and, as non-root, never chmods. The apply
		// script sets a mode lacking u+rwx after the extraction.
		hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, c.Name+"/", hdr.Mode|0o700
		return true, writeHeader(tw, hdr)
	case remote.TypeSymlink:
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
		res.Warnings = append(res.Warnings, fmt.Errorf("skipping %w", err))
	case localtree.Unreadable(err):
		// Before the header: the target's copy, if any, stays whole.
		res.Unreadable[c.Rel] = err
		return false, nil
	}
	if err != nil {
		return false, nil // gone, replaced by a link or by a FIFO since planning
	}
	defer f.Close()
	// Send what the file is now; if that differs from what was planned the
	// index must not record the planned metadata.
	mode := localtree.KeepExec(localtree.Perm(fi), c.Mode)
	fresh := fi.Size() == c.Size && fi.ModTime().Equal(c.MTime) && mode == c.Mode
	hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeReg, fi.Size(), int64(mode)
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
	// The hash is of what the entry carries, padding included.
	intact, err := copyExact(io.MultiWriter(tw, h), f, f, hdr.Size)
	if err != nil {
		return false, fmt.Errorf("archiving %q: %w", c.Src, err)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	if !intact || !fresh {
		if res.Carried == nil {
			res.Carried = map[string]*[32]byte{}
		}
		res.Carried[c.Rel] = &sum
		return false, nil
	}
	res.Sums[c.Rel] = &sum
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
	n, err := copyN(dst, src, size)
	switch {
	case errors.Is(err, io.EOF):
		if _, err := copyN(dst, zeros{}, size-n); err != nil {
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

// copyBufs are copyN's buffers: io.CopyN made one per file, as large as the file up to 32 KiB
// (100 MB to the collector in an initial sync of 100,000 files of 1 KiB).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyN is io.CopyN through a pooled buffer.
func copyN(dst io.Writer, src io.Reader, n int64) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	written, err := io.CopyBuffer(dst, io.LimitReader(src, n), *bp)
	if written == n {
		return n, nil
	}
	if err == nil {
		err = io.EOF // less than n: src ended early
	}
	return written, err
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// CountingWriter counts what it writes to W into N, which progress reports
// read meanwhile.
type CountingWriter struct {
	W io.Writer
	N *atomic.Int64
}

func (c *CountingWriter) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	c.N.Add(int64(n))
	return n, err
}
