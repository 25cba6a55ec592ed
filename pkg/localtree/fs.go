package localtree

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// FS is how the local disk is read: the os package (OS), or in tests a
// fake (a case-insensitive file system on Linux, for one).
type FS interface {
	Lstat(name string) (fs.FileInfo, error)
	Stat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
	ReadDir(name string) ([]fs.DirEntry, error)
}

// OS is FS through the os package.
type OS struct{}

func (OS) Lstat(name string) (fs.FileInfo, error)     { return os.Lstat(name) }
func (OS) Stat(name string) (fs.FileInfo, error)      { return os.Stat(name) }
func (OS) Readlink(name string) (string, error)       { return os.Readlink(name) }
func (OS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// FoldsCase reports whether the file system holding dir (an existing
// directory, fi) finds names whatever their case: it looks a name up with
// its ASCII letters' case flipped and checks whether that is the same file.
// Names inside dir are tried first, as dir's own file system decides those;
// dir's own name is decided by its parent's, which is trusted only on the
// same device (dir may be a mount point). When nothing tells, the answer is
// yes: wrongly assuming case folding costs a directory listing per plan,
// wrongly assuming the opposite leaves a stale copy after a case-only rename.
func FoldsCase(fsys FS, dir string, fi fs.FileInfo) bool {
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
		pdev, ok1 := DeviceOf(pfi)
		dev, ok2 := DeviceOf(fi)
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
