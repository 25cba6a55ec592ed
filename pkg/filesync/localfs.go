package filesync

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// localFS is how plans read the local disk: the os package, or in tests a
// fake (a case-insensitive file system on Linux, for one).
type localFS interface {
	Lstat(name string) (fs.FileInfo, error)
	Stat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
	ReadDir(name string) ([]fs.DirEntry, error)
}

type osFS struct{}

func (osFS) Lstat(name string) (fs.FileInfo, error)     { return os.Lstat(name) }
func (osFS) Stat(name string) (fs.FileInfo, error)      { return os.Stat(name) }
func (osFS) Readlink(name string) (string, error)       { return os.Readlink(name) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// localSide is what plans consult about a directory mapping's local side
// besides its path: how to read it, what it was like when the mapping was
// created, and whether mass deletes are allowed.
type localSide struct {
	fsys localFS // nil: the os package
	// foldCase: names under the root compare case-insensitively (macOS and
	// Windows defaults), so a path that Lstat finds may exist under another
	// case only; the planner then confirms names by listing their parent.
	foldCase bool
	// dev is the root's device (st_dev) when the mapping was created, if
	// devKnown: a different one later means something was mounted or
	// unmounted there.
	dev      uint64
	devKnown bool
	// allowMassDelete lifts the guards that hold deletes of an emptied root
	// and mass deletes (Config.AllowMassDelete).
	allowMassDelete bool
}

func (l *localSide) fs() localFS {
	if l.fsys == nil {
		return osFS{}
	}
	return l.fsys
}

// probeRoot fills in what is known about m's local root now: its device,
// and whether its file system folds case.
func (m *mapping) probeRoot() {
	if m.file {
		return // a single file's own name never changes under the mapping
	}
	fi, err := m.fs().Stat(m.root)
	if err != nil || !fi.IsDir() {
		m.foldCase = true // see probeFoldCase: unsure means yes
		return
	}
	m.dev, m.devKnown = deviceOf(fi)
	m.foldCase = probeFoldCase(m.fs(), m.root, fi)
}

// probeFoldCase reports whether the file system holding dir (an existing
// directory, fi) finds names whatever their case: it looks a name up with
// its ASCII letters' case flipped and checks whether that is the same file.
// Names inside dir are tried first, as dir's own file system decides those;
// dir's own name is decided by its parent's, which is trusted only on the
// same device (dir may be a mount point). When nothing tells, the answer is
// yes: wrongly assuming case folding costs a directory listing per plan,
// wrongly assuming the opposite leaves a stale copy after a case-only rename.
func probeFoldCase(fsys localFS, dir string, fi fs.FileInfo) bool {
	try := func(p string, pfi fs.FileInfo, stat func(string) (fs.FileInfo, error)) (fold, decided bool) {
		flipped := flipASCIICase(filepath.Base(p))
		if flipped == filepath.Base(p) {
			return false, false
		}
		ffi, err := stat(filepath.Join(filepath.Dir(p), flipped))
		switch {
		case err == nil:
			return os.SameFile(pfi, ffi), true
		case errors.Is(err, fs.ErrNotExist):
			return false, true
		}
		return false, false
	}
	des, _ := fsys.ReadDir(dir)
	for _, de := range des {
		if flipASCIICase(de.Name()) == de.Name() {
			continue
		}
		p := filepath.Join(dir, de.Name())
		cfi, err := fsys.Lstat(p)
		if err != nil {
			continue
		}
		if fold, ok := try(p, cfi, fsys.Lstat); ok {
			return fold
		}
	}
	if pfi, err := fsys.Stat(filepath.Dir(dir)); err == nil {
		pdev, ok1 := deviceOf(pfi)
		dev, ok2 := deviceOf(fi)
		if ok1 && ok2 && pdev == dev {
			if fold, ok := try(dir, fi, fsys.Stat); ok {
				return fold
			}
		}
	}
	return true
}

// flipASCIICase swaps the case of s's ASCII letters: every case-insensitive
// file system folds those, whatever it does with the rest of Unicode.
func flipASCIICase(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case 'A' <= c && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}
