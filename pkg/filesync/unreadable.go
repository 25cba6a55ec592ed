package filesync

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"
)

// unreadableSet holds a mapping's local files that could be stat'ed but not
// opened (EACCES on a root-owned 0600 file that `docker run -v $PWD:/src`
// left behind, ESTALE on a network mount), each with the stat it had then.
// Plans leave such a file out, in every target, until its stat changes: a
// file that cannot be read is not a file that vanished while it was read, and
// sending it again at once would only fail again, as fast as the apiserver
// answers. It is shared by the mapping's targets (their workers run
// concurrently).
type unreadableSet struct {
	mu sync.Mutex
	m  map[string]fileSig
}

// fileSig is what a chmod, chown or write changes in a file's stat.
type fileSig struct {
	mode     fs.FileMode
	size     int64
	mtime    time.Time
	uid, gid uint32
}

func sigOf(fi fs.FileInfo) fileSig {
	s := fileSig{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime()}
	s.uid, s.gid, _ = ownerOf(fi)
	return s
}

// add records rel, whose open failed with err, and reports whether that is
// news: not recorded before with the stat it has now.
func (u *unreadableSet) add(fsys localFS, name, rel string) bool {
	fi, err := fsys.Lstat(name)
	if err != nil {
		return false // gone or unreachable now: the next plan says which
	}
	sig := sigOf(fi)
	u.mu.Lock()
	defer u.mu.Unlock()
	if old, ok := u.m[rel]; ok && old == sig {
		return false
	}
	if u.m == nil {
		u.m = map[string]fileSig{}
	}
	u.m[rel] = sig
	return true
}

// holds reports whether rel is a file that could not be read and whose stat
// has not changed since; a changed one is forgotten, to be tried again.
func (u *unreadableSet) holds(fsys localFS, name, rel string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	old, ok := u.m[rel]
	if !ok {
		return false
	}
	if fi, err := fsys.Lstat(name); err == nil && sigOf(fi) == old {
		return true
	}
	delete(u.m, rel)
	return false
}

// errUnreadable wraps the open error of a file left out for it.
var errUnreadable = errors.New("not synced until it changes")

// cannotRead says which local file could not be read, and why.
func cannotRead(name string, err error) error {
	why := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		why = pe.Err.Error() // the path is said already
	}
	return fmt.Errorf("cannot read %q: %s; %w", name, why, errUnreadable)
}

// unreadableOpen reports whether err, from opening a file planned as a
// regular file, says the file cannot be read (permissions, a stale handle, an
// I/O error) rather than that it is gone or no longer a regular file: the
// former would fail again however often it is tried.
func unreadableOpen(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, fs.ErrNotExist),
		errors.Is(err, syscall.ENOTDIR),
		errors.Is(err, syscall.ELOOP), // a symlink now: O_NOFOLLOW
		errors.Is(err, syscall.EISDIR),
		errors.Is(err, errNotRegular),
		errors.Is(err, errIsDirNow):
		return false
	}
	return true
}

// errNotRegular: a path planned as a regular file is now a FIFO, socket or
// device, which are never synced.
var errNotRegular = errors.New("not a regular file")

// errIsDirNow: a path planned as a regular file is a directory now.
var errIsDirNow = errors.New("is a directory now")

// openRegular opens name for reading if it is a regular file. It never
// follows a symlink and never blocks: a FIFO's open waits for a writer, and
// its reads for data, forever if nobody writes.
func openRegular(name string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(name, openFlags, 0)
	if err != nil {
		// A socket cannot be opened at all (ENXIO): say what it is.
		if fi, lerr := os.Lstat(name); lerr == nil && fi.Mode().Type()&^(fs.ModeSymlink|fs.ModeDir) != 0 {
			return nil, nil, notRegular(name, fi.Mode())
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case fi.IsDir():
		// Replaced by a directory: planned again as one, no warning.
		err = fmt.Errorf("%q: %w", name, errIsDirNow)
	case !fi.Mode().IsRegular():
		err = notRegular(name, fi.Mode())
	default:
		err = setBlocking(f)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func notRegular(name string, m fs.FileMode) error {
	kind := "a device"
	switch {
	case m&fs.ModeNamedPipe != 0:
		kind = "a FIFO"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	}
	return fmt.Errorf("%q: %w (now %s), so it is not synced", name, errNotRegular, kind)
}
