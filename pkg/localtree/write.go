package localtree

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"
)

// ErrChanged is what ReplaceFile and RemoveFile return when the local entry
// is no longer what the caller expected (the ancestor): the user changed it
// meanwhile, and it is left as it is.
var ErrChanged = errors.New("changed locally")

// ErrSymlinkInPath is what ReplaceFile, RemoveFile and MakeDir return when
// a directory on the way to the entry is a symlink: nothing is written
// through one.
var ErrSymlinkInPath = errors.New("a symlink on the way")

// ErrGitPath is what ReplaceFile, RemoveFile, RemoveEmptyDir and MakeDir
// return for a path in .git however spelled (see InGit): nothing is
// written there.
var ErrGitPath = errors.New("a path in .git (on some file system): never written")

// Expect is what a local entry must still be before it is replaced or
// removed: absent, or a regular file of that size and content.
type Expect struct {
	Absent bool
	Size   int64
	Sum    [32]byte // sha256
}

// ReplaceFile writes the content of r at rel under root, atomically: into a
// temporary file in the same directory, then renamed over rel, so a reader
// sees the old file or the new one, never a part. The file gets mode and
// mtime. Missing directories on the way are made (0755); none of them may be
// a symlink (ErrSymlinkInPath), and nothing is written outside root, which
// os.Root enforces against a link swapped in meanwhile. sum, if not nil, is
// what r's content must hash to (sha256), else nothing is written.
//
// rel must still be as want says, checked before the temporary file is
// written and again right before the rename; otherwise nothing is replaced
// and the error is ErrChanged. It returns the written file's Lstat.
func ReplaceFile(root, rel string, r io.Reader, mode fs.FileMode, mtime time.Time, sum *[32]byte, want Expect) (fs.FileInfo, error) {
	d, base, err := openParent(root, rel, true)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if err := checkExpect(d, base, want); err != nil {
		return nil, fmt.Errorf("%q: %w", rel, err)
	}
	tmp, f, err := createTemp(d, base)
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			_ = d.Remove(tmp)
		}
	}()
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), r)
	if err == nil {
		err = f.Chmod(mode.Perm())
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("writing %q: %w", rel, err)
	}
	if sum != nil && !bytes.Equal(h.Sum(nil), sum[:]) {
		return nil, fmt.Errorf("%q: the downloaded content does not hash to what the scan saw (it changed meanwhile)", rel)
	}
	if err := d.Chtimes(tmp, mtime, mtime); err != nil {
		return nil, fmt.Errorf("setting the mtime of %q: %w", rel, err)
	}
	if err := checkExpect(d, base, want); err != nil {
		return nil, fmt.Errorf("%q: %w", rel, err)
	}
	if err := d.Rename(tmp, base); err != nil {
		return nil, fmt.Errorf("replacing %q: %w", rel, err)
	}
	done = true
	return d.Lstat(base)
}

// RemoveFile removes the regular file rel under root if it is still as want
// says (ErrChanged otherwise), never through a symlink on the way.
func RemoveFile(root, rel string, want Expect) error {
	d, base, err := openParent(root, rel, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if err := checkExpect(d, base, want); err != nil {
		return fmt.Errorf("%q: %w", rel, err)
	}
	if err := d.Remove(base); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %q: %w", rel, err)
	}
	return nil
}

// RemoveEmptyDir removes the directory rel under root if it is empty; one
// that holds something, or is not a directory, stays.
func RemoveEmptyDir(root, rel string) error {
	d, base, err := openParent(root, rel, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if fi, err := d.Lstat(base); err != nil || !fi.IsDir() {
		return nil
	}
	_ = d.Remove(base) // fails on a non-empty directory: it stays
	return nil
}

// MakeDir makes the directory rel under root with mode, and the missing
// ones on the way (0755), none through a symlink. A directory already
// there is kept as it is; anything else there is ErrChanged.
func MakeDir(root, rel string, mode fs.FileMode) (fs.FileInfo, error) {
	d, base, err := openParent(root, rel, true)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if err := d.Mkdir(base, mode.Perm()); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("making %q: %w", rel, err)
	}
	fi, err := d.Lstat(base)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%q: %w (not a directory)", rel, ErrChanged)
	}
	return fi, nil
}

// openParent opens the directory rel is in, under root, one component at a
// time, refusing a symlink at each (os.Root alone would follow one that
// stays inside root), and making missing ones when mkdir is set.
func openParent(root, rel string, mkdir bool) (*os.Root, string, error) {
	if rel == "" || !ValidRel(rel) {
		return nil, "", fmt.Errorf("refusing to write %q: not a path under the root", rel)
	}
	if InGit(rel) {
		return nil, "", fmt.Errorf("refusing to write %q: %w", rel, ErrGitPath)
	}
	d, err := os.OpenRoot(root)
	if err != nil {
		return nil, "", err
	}
	dir, base := path.Split(rel)
	walked := ""
	for c := range strings.SplitSeq(strings.TrimSuffix(dir, "/"), "/") {
		if c == "" {
			continue
		}
		walked = path.Join(walked, c)
		fi, err := d.Lstat(c)
		if errors.Is(err, fs.ErrNotExist) && mkdir {
			if err = d.Mkdir(c, 0o755); err == nil || errors.Is(err, fs.ErrExist) {
				fi, err = d.Lstat(c)
			}
		}
		if err != nil {
			d.Close()
			return nil, "", err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			d.Close()
			return nil, "", fmt.Errorf("%q: %w: %q", rel, ErrSymlinkInPath, walked)
		}
		if !fi.IsDir() {
			d.Close()
			return nil, "", fmt.Errorf("%q: %w (%q is not a directory)", rel, ErrChanged, walked)
		}
		sub, err := d.OpenRoot(c)
		d.Close()
		if err != nil {
			return nil, "", err
		}
		// Swapped for a link between the Lstat and the open: os.Root
		// kept it inside, but it is not the directory that was checked.
		if st, err := sub.Lstat("."); err != nil || !os.SameFile(st, fi) {
			sub.Close()
			return nil, "", fmt.Errorf("%q: %w: %q", rel, ErrSymlinkInPath, walked)
		}
		d = sub
	}
	return d, base, nil
}

// checkExpect reports ErrChanged unless name in d is as want says.
func checkExpect(d *os.Root, name string, want Expect) error {
	fi, err := d.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if want.Absent {
			return nil
		}
		return fmt.Errorf("%w (removed)", ErrChanged)
	case err != nil:
		return err
	case want.Absent:
		return fmt.Errorf("%w (created)", ErrChanged)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w (not a regular file now)", ErrChanged)
	case fi.Size() != want.Size:
		return fmt.Errorf("%w (size)", ErrChanged)
	}
	f, err := d.OpenFile(name, openFlags, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !os.SameFile(st, fi) {
		return fmt.Errorf("%w (replaced)", ErrChanged)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if !bytes.Equal(h.Sum(nil), want.Sum[:]) {
		return fmt.Errorf("%w (content)", ErrChanged)
	}
	return nil
}

// createTemp makes a new file next to base in d, for ReplaceFile.
func createTemp(d *os.Root, base string) (string, *os.File, error) {
	for i := 0; ; i++ {
		name := fmt.Sprintf(".%s.livesync-%d-%d", base, os.Getpid(), time.Now().UnixNano()+int64(i))
		f, err := d.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return name, f, nil
		}
		if !errors.Is(err, fs.ErrExist) || i > 100 {
			return "", nil, fmt.Errorf("creating a temporary file next to %q: %w", base, err)
		}
	}
}
