package ignore

import (
	"slices"
	"testing"
)

func TestGlobs(t *testing.T) {
	g, err := NewGlobs([]string{"package-lock.json", "gen/**", "./go.sum", "db/migrate/", "!gen/keep.go", "*.lock"})
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]bool{
		"package-lock.json":     true,
		"web/package-lock.json": true,
		"gen/a.go":              true,
		"gen/sub/b.go":          true,
		"gen/keep.go":           false,
		"go.sum":                true,
		"sub/go.sum":            false,
		"db/migrate/1.rb":       true,
		"db/seed.rb":            false,
		"yarn.lock":             true,
		"src/main.go":           false,
		"package.json":          false,
	} {
		if got := g.Match(rel, false); got != want {
			t.Errorf("Match(%q) = %v, want %v", rel, got, want)
		}
	}
	if got := g.Starts(); !slices.Equal(got, []string{"."}) {
		t.Errorf("Starts with an unanchored pattern = %q", got)
	}
	g, _ = NewGlobs([]string{"gen/**", "./go.sum", "db/migrate/*.rb"})
	if got, want := g.Starts(), []string{"./db", "./gen", "./go.sum"}; !slices.Equal(got, want) {
		t.Errorf("Starts = %q, want %q", got, want)
	}
}

func TestCheckGlobRefusesOutside(t *testing.T) {
	for _, s := range []string{"/etc/passwd", "../x", "a/../../x", "!../x", "", `\x`, `C:\x`, "a/..", `..\x`} {
		if err := CheckGlob(s); err == nil {
			t.Errorf("CheckGlob(%q) accepted", s)
		}
		if _, err := NewGlobs([]string{s}); err == nil {
			t.Errorf("NewGlobs(%q) accepted", s)
		}
	}
	for _, s := range []string{"a", "./a", "**/x", "gen/", "!a", "..a", "a..b"} {
		if err := CheckGlob(s); err != nil {
			t.Errorf("CheckGlob(%q): %v", s, err)
		}
	}
}
