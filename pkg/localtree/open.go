package localtree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ErrUnreadable wraps the open error of a file left out for it.
var ErrUnreadable = errors.New("not synced until it changes")

// CannotRead says which local file could not be read, and why.
func CannotRead(name string, err error) error {
	why := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		why = pe.Err.Error() // the path is said already
	}
	return fmt.Errorf("cannot read %q: %s; %w", name, why, ErrUnreadable)
}

// Unreadable reports whether err, from opening a file planned as a
// regular file, says the file cannot be read (permissions, a stale handle, an
// I/O error) rather than that it is gone or no longer a regular file: the
// former would fail again however often it is tried.
func Unreadable(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, fs.ErrNotExist),
		errors.Is(err, syscall.ENOTDIR),
		errors.Is(err, syscall.ELOOP), // a symlink now: O_NOFOLLOW
		errors.Is(err, syscall.EISDIR),
		errors.Is(err, ErrNotRegular),
		errors.Is(err, ErrIsDirNow):
		return false
	}
	return true
}

// ErrNotRegular: a path planned as a regular file is now a FIFO, socket or
// device, which are never synced.
var ErrNotRegular = errors.New("not a regular file")

// ErrIsDirNow: a path planned as a regular file is a directory now.
var ErrIsDirNow = errors.New("is a directory now")

// OpenRegular opens name for reading if it is a regular file. It never
// follows a symlink and never blocks: a FIFO's open waits for a writer, and
// its reads for data, forever if nobody writes.
func OpenRegular(name string) (*os.File, fs.FileInfo, error) {
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
		err = fmt.Errorf("%q: %w", name, ErrIsDirNow)
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
	return fmt.Errorf("%q: %w (now %s), so it is not synced", name, ErrNotRegular, kind)
}
