package testtree

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FoldFS is the real disk seen as a case-insensitive file system would show
// it (the macOS and Windows defaults): a name that exists under another case
// is found, listings show the stored names.
type FoldFS struct{}

// real returns name spelled as stored, element by element.
func (f FoldFS) real(name string) string {
	name = filepath.Clean(name)
	dir, base := filepath.Split(name)
	if base == "" || dir == "" {
		return name
	}
	dir = f.real(filepath.Clean(dir))
	p := filepath.Join(dir, base)
	if _, err := os.Lstat(p); err == nil {
		return p
	}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.EqualFold(de.Name(), base) {
			return filepath.Join(dir, de.Name())
		}
	}
	return p
}

func (f FoldFS) Lstat(name string) (fs.FileInfo, error)     { return os.Lstat(f.real(name)) }
func (f FoldFS) Stat(name string) (fs.FileInfo, error)      { return os.Stat(f.real(name)) }
func (f FoldFS) Readlink(name string) (string, error)       { return os.Readlink(f.real(name)) }
func (f FoldFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(f.real(name)) }
