package filesync

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// foldFS is the real disk seen as a case-insensitive file system would show
// it (the macOS and Windows defaults): a name that exists under another case
// is found, listings show the stored names.
type foldFS struct{}

// real returns name spelled as stored, element by element.
func (f foldFS) real(name string) string {
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

func (f foldFS) Lstat(name string) (fs.FileInfo, error)     { return os.Lstat(f.real(name)) }
func (f foldFS) Stat(name string) (fs.FileInfo, error)      { return os.Stat(f.real(name)) }
func (f foldFS) Readlink(name string) (string, error)       { return os.Readlink(f.real(name)) }
func (f foldFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(f.real(name)) }

func TestProbeFoldCase(t *testing.T) {
	tests := []struct {
		name string
		tree map[string]string
		root string // under the temp dir
		fsys localFS
		want bool
	}{
		{name: "case-sensitive, decided by a child", tree: map[string]string{"src/Main.go": ""}, root: "src", fsys: osFS{}, want: false},
		{name: "case-sensitive, both spellings exist", tree: map[string]string{"src/a": "", "src/A": ""}, root: "src", fsys: osFS{}, want: false},
		{name: "case-sensitive, decided by the root's name", tree: map[string]string{"src/1": ""}, root: "src", fsys: osFS{}, want: false},
		{name: "case-insensitive, decided by a child", tree: map[string]string{"src/Main.go": ""}, root: "src", fsys: foldFS{}, want: true},
		{name: "case-insensitive, decided by the root's name", tree: map[string]string{"src/": ""}, root: "src", fsys: foldFS{}, want: true},
		{name: "nothing tells: assume folding", tree: map[string]string{"123/456": ""}, root: "123", fsys: osFS{}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tt.tree)
			root := filepath.Join(dir, tt.root)
			fi, err := os.Stat(root)
			must(t, err)
			if got := probeFoldCase(tt.fsys, root, fi); got != tt.want {
				t.Errorf("probeFoldCase = %v, want %v", got, tt.want)
			}
		})
	}
}
