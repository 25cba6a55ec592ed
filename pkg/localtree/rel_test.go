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

func TestInGit(t *testing.T) {
	for _, rel := range []string{
		".git", ".git/config", "a/.git/hooks/x", ".GIT/config", ".Git", ".g\u200cit", "\u200e.\u200fg\u202ai\u206ft\ufeff",
		"GIT~1/config", "git~1", ".git.", ".git ", ".git . .", ".git::$INDEX_ALLOCATION", ".GIT:stream", `a\.git\config`, `.gIt\x`,
	} {
		if !InGit(rel) {
			t.Errorf("InGit(%q) = false", rel)
		}
	}
	for _, rel := range []string{".github/workflows/ci.yml", ".gitignore", ".gitmodules", "git", "a.git", ".git~1", "git~10", "GIT~2", ".gi", "x/.gitkeep", ". git", "g.it"} {
		if InGit(rel) {
			t.Errorf("InGit(%q) = true", rel)
		}
	}
}
