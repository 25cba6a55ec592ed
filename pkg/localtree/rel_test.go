package localtree

import "testing"

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
	for _, tt := range tests {
		got, ok := RelTo(tt.root, tt.p)
		if got != tt.want || ok != tt.ok {
			t.Errorf("RelTo(%q, %q) = %q, %v; want %q, %v", tt.root, tt.p, got, ok, tt.want, tt.ok)
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
