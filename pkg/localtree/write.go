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
// written and again on what the rename took away (see replace), so that a
// save landing at any moment is never silently replaced; otherwise the
// error is ErrChanged and rel holds the save. It returns the written
// file's Lstat as it was written, before the rename: a save into it once it
// is in place (in place, or keeping its size and mtime) shows in its ctime
// (which the rename moves too), so a caller that records this never takes
// such a save for what it wrote.
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
	ours, err := d.Lstat(tmp)
	if err != nil {
		return nil, err
	}
	testHook("rename")
	done = true // replace owns tmp from here
	if err := replace(d, tmp, base, want, ours); err != nil {
		return nil, fmt.Errorf("replacing %q: %w", rel, err)
	}
	fi, err := d.Lstat(base)
	if err != nil {
		return nil, err
	}
	if !os.SameFile(fi, ours) {
		return nil, fmt.Errorf("%q: %w (saved again as it was replaced)", rel, ErrChanged)
	}
	return ours, nil
}

// replaceByLink is replace without an atomic exchange: what is at base is
// moved aside (a rename takes exactly what it checks), checked, and ours
// linked in, which never replaces a save that landed at base meanwhile;
// what was moved aside is linked back the same way when it is not as want
// says.
func replaceByLink(d *os.Root, tmp, base string, want Expect) error {
	defer func() { _ = d.Remove(tmp) }()
	if want.Absent {
		return linkNew(d, tmp, base)
	}
	// Where there are no hard links (FAT), what is moved aside could not
	// be put back without a window: nothing is replaced there.
	probe := tmp + ".link"
	if err := d.Link(tmp, probe); err != nil {
		return fmt.Errorf("no atomic way to replace a file here (%w)", err)
	}
	_ = d.Remove(probe)
	aside, f, err := createTemp(d, base)
	if err != nil {
		return err
	}
	f.Close()
	if err := d.Rename(base, aside); err != nil {
		_ = d.Remove(aside)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w (removed)", ErrChanged)
		}
		return err
	}
	testHook("taken")
	if cerr := checkExpect(d, aside, want); cerr != nil {
		if err := d.Link(aside, base); err != nil {
			return fmt.Errorf("%w: what was there is kept as %q (putting it back: %w)", ErrChanged, aside, err)
		}
		_ = d.Remove(aside)
		return cerr
	}
	if err := linkNew(d, tmp, base); err != nil {
		if !errors.Is(err, ErrChanged) {
			if lerr := d.Link(aside, base); lerr != nil && !errors.Is(lerr, fs.ErrExist) {
				return fmt.Errorf("%w; what was there is kept as %q", err, aside)
			}
		}
		_ = d.Remove(aside) // the ancestor, back in place or superseded by a save
		return err
	}
	_ = d.Remove(aside)
	return nil
}

// linkNew links tmp at base unless something is there (ErrChanged).
func linkNew(d *os.Root, tmp, base string) error {
	err := d.Link(tmp, base)
	switch {
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%w (created)", ErrChanged)
	case err != nil:
		return fmt.Errorf("no atomic way to write a new file here (%w)", err)
	}
	return nil
}

// errNoSwap: the system or the file system has no atomic exchange (or
// no-replace rename) of two names.
var errNoSwap = errors.New("no atomic exchange of names")

// replace puts tmp (ours, the new file) at base in d if what it replaces
// is as want says, else leaves base as it is: ErrChanged. The check is made
// on what the rename took away, never before it, so a save landing at any
// moment is either what was checked and found changed (and put back), or
// lands after and replaces ours: no save is ever silently replaced. Where
// names can be exchanged atomically (Linux, macOS), base never goes
// missing; elsewhere it does, for the moment between moving it aside and
// linking ours in. tmp is gone when replace returns, unless an error says
// it was kept.
func replace(d *os.Root, tmp, base string, want Expect, ours fs.FileInfo) error {
	dir, err := d.Open(".")
	if err != nil {
		_ = d.Remove(tmp)
		return err
	}
	defer dir.Close()
	err = errNoSwap
	if !noExchange {
		if want.Absent {
			err = renameNoReplace(dir, tmp, base)
		} else {
			err = swap(dir, tmp, base)
		}
	}
	switch {
	case errors.Is(err, errNoSwap):
		return replaceByLink(d, tmp, base, want)
	case err == nil && want.Absent:
		return nil
	case err == nil:
		return settleSwap(d, dir, tmp, base, want, ours)
	}
	_ = d.Remove(tmp)
	switch {
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%w (created)", ErrChanged)
	case errors.Is(err, fs.ErrNotExist): // an exchange needs both names
		return fmt.Errorf("%w (removed)", ErrChanged)
	}
	return err
}

// settleSwap checks what the exchange of tmp and base took away, now at
// tmp: removed when it is as want says, else put back (another exchange)
// while base is still ours.
func settleSwap(d *os.Root, dir *os.File, tmp, base string, want Expect, ours fs.FileInfo) error {
	testHook("taken")
	cerr := checkExpect(d, tmp, want)
	if cerr == nil {
		_ = d.Remove(tmp)
		return nil
	}
	if fi, err := d.Lstat(base); err == nil && os.SameFile(fi, ours) {
		if err := swap(dir, tmp, base); err != nil {
			return fmt.Errorf("%w: what was saved meanwhile is kept as %q (putting it back: %w)", ErrChanged, tmp, err)
		}
		// tmp is ours again, unless a save replaced ours between the
		// Lstat and the exchange: then that save, the latest, is at tmp.
		if fi, err := d.Lstat(tmp); err == nil && !os.SameFile(fi, ours) {
			return fmt.Errorf("%w: a save made while it was put back is kept as %q", ErrChanged, tmp)
		}
	}
	// Else a save replaced ours after the exchange: it supersedes what
	// was taken away, as it would have without us.
	_ = d.Remove(tmp)
	return cerr
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

// Test seams: hook runs at the named points of ReplaceFile ("rename": its
// checks done, right before the rename; "taken": what the rename took away
// is about to be checked); noExchange takes the fallback of systems that
// cannot exchange names.
var (
	hook       func(at string)
	noExchange bool
)

func testHook(at string) {
	if hook != nil {
		hook(at)
	}
}
