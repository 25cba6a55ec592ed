package localtree

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testtree"
)

func TestFoldsCase(t *testing.T) {
	// The temp dir's disk: case-sensitive on Linux, folding on Windows
	// (and under wine, which folds names on any Unix disk).
	probe := filepath.Join(t.TempDir(), "probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := os.Stat(filepath.Join(filepath.Dir(probe), "PROBE"))
	tmpFolds := err == nil
	tests := []struct {
		name string
		tree map[string]string
		root string // under the temp dir
		fsys FS
		want bool
	}{
		{name: "this disk, decided by a child", tree: map[string]string{"src/Main.go": ""}, root: "src", fsys: OS{}, want: tmpFolds},
		{name: "this disk, both spellings written", tree: map[string]string{"src/a": "", "src/A": ""}, root: "src", fsys: OS{}, want: tmpFolds},
		{name: "this disk, decided by the root's name", tree: map[string]string{"src/1": ""}, root: "src", fsys: OS{}, want: tmpFolds},
		{name: "case-insensitive, decided by a child", tree: map[string]string{"src/Main.go": ""}, root: "src", fsys: testtree.FoldFS{}, want: true},
		{name: "case-insensitive, decided by the root's name", tree: map[string]string{"src/": ""}, root: "src", fsys: testtree.FoldFS{}, want: true},
		{name: "nothing tells: assume folding", tree: map[string]string{"123/456": ""}, root: "123", fsys: OS{}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			testtree.Write(t, dir, tt.tree)
			root := filepath.Join(dir, tt.root)
			fi, err := os.Stat(root)
			if err != nil {
				t.Fatal(err)
			}
			if got := FoldsCase(tt.fsys, root, fi); got != tt.want {
				t.Errorf("FoldsCase = %v, want %v", got, tt.want)
			}
		})
	}
}
