package localtree

import (
	"path/filepath"
	"runtime"
	"testing"
)

func TestRelTo(t *testing.T) {
	tests := []struct {
		root, p string
		want    string
		ok      bool
	}{
		{"/src", "/src", "", true},
		{"/src", "/src/a/b", "a/b", true},
		{"/src", "/src/a/../b", "b", true},
		{"/src", "/srcx/a", "", false},
		{"/src", "/other", "", false},
		{"/src", "a/b", "", false},
		{"/src", "/src/../etc/passwd", "", false},
	}
	// An absolute path on Windows has a volume: these run there on C:.
	abs := func(p string) string {
		if runtime.GOOS == "windows" && filepath.IsAbs("C:"+p) {
			return filepath.FromSlash("C:" + p)
		}
		return filepath.FromSlash(p)
	}
	for _, tt := range tests {
		root, p := abs(tt.root), abs(tt.p)
		if got, ok := RelTo(root, p); got != tt.want || ok != tt.ok {
			t.Errorf("RelTo(%q, %q) = %q, %v; want %q, %v", root, p, got, ok, tt.want, tt.ok)
		}
	}
}
