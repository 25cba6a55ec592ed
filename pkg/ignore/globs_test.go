package ignore

import (
	"regexp"
	"slices"
	"strings"
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

func TestGlobsFileTests(t *testing.T) {
	for _, tc := range []struct {
		globs []string
		want  []string
	}{
		{[]string{"package-lock.json"}, []string{"-path", "*/package-lock.json", "-path", "*/package-lock.json/*"}},
		{[]string{"gen/**"}, []string{"-path", "./gen/*"}},
		{[]string{"db/migrate/"}, []string{"-path", "./db/migrate/*"}},
		{[]string{"vendor/modules.txt"}, []string{"-path", "./vendor/modules.txt", "-path", "./vendor/modules.txt/*"}},
		{[]string{"./go.sum"}, []string{"-path", "./go.sum", "-path", "./go.sum/*"}},
		{[]string{"node_modules/"}, []string{"-path", "*/node_modules/*"}},
		{[]string{"*.lock"}, []string{"-path", "*/*.lock", "-path", "*/*.lock/*"}},
		{[]string{"file?.txt"}, []string{"-path", "*/file*.txt", "-path", "*/file*.txt/*"}},
		{[]string{"*"}, []string{"-path", "*/*"}},
		{[]string{"**/x.go", "a/**/b"}, []string{"-path", "./*x.go", "-path", "./*x.go/*", "-path", "./a/*b", "-path", "./a/*b/*"}},
		{[]string{"gen/*.go", "!gen/keep.go"}, []string{"-path", "./gen/*.go", "-path", "./gen/*.go/*"}},
		{[]string{"a", "a", "./a"}, []string{"-path", "*/a", "-path", "*/a/*", "-path", "./a", "-path", "./a/*"}},
		{nil, nil},
	} {
		g, err := NewGlobs(tc.globs)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := g.FileTests()
		if !ok || !slices.Equal(got, tc.want) {
			t.Errorf("FileTests(%q) = %q, %v; want %q", tc.globs, got, ok, tc.want)
		}
	}
	// What find can't be trusted to match as gitignore does: every file counts.
	for _, s := range []string{`a\*b`, "[ab].lock", "gen/[!x]*", "x\xff.lock", "a//"} {
		g, err := NewGlobs([]string{"go.sum", s})
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := g.FileTests(); ok || got != nil {
			t.Errorf("FileTests(%q) = %q, %v; want none, false", s, got, ok)
		}
	}
}

// The tests select every file the globs list, by a model of find's -path
// (no class, no escape: "*" matches any bytes, "/" included); the real
// finds run them in pkg/remote.
func TestGlobsFileTestsSelectWhatIsListed(t *testing.T) {
	paths := []string{
		"package-lock.json", "web/package-lock.json", "a/b/c/package-lock.json", "package-lock.json.bak",
		"package-lock.json/inner", "gen/a.go", "gen/sub/b.go", "gen", "x/gen/a.go", "go.sum", "sub/go.sum",
		"db/migrate/1.rb", "db/migrate/sub/2.rb", "x/db/migrate/3.rb", "vendor/modules.txt", "vendor/x/modules.txt",
		"node_modules/p/i.js", "a/node_modules/q/j.js", "yarn.lock", ".hidden.lock", "d/.lock", "a.lock/f",
		"file1.txt", "fileé.txt", "x/file22.txt", "x.go", "a/x.go", "a/b/c/x.go", "a/b", "a/x/b", "a/x/y/b", "ab",
		"a/b/inner", "src/main.go", "é/ü.lock", "sp ace/f f.lock", "a*b/c", "gen/keep.go", ".env", "z/.env",
	}
	globs := []string{
		"package-lock.json", "gen/**", "db/migrate/", "vendor/modules.txt", "./go.sum", "node_modules/", "*.lock",
		"file?.txt", "**/x.go", "a/**/b", "a/**", "gen/*.go", "*", "*/", "**", "?", "a*b/*", "é/*", "sp ace/",
		".env", "./.env", "x/**/", "**/b/**", "a/*/b", "*/b",
	}
	selects := func(tests []string, rel string) bool {
		for i := 0; i < len(tests); i += 2 {
			re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(tests[i+1]), `\*`, ".*") + "$")
			if tests[i] == "-path" && re.MatchString("./"+rel) {
				return true
			}
		}
		return false
	}
	check := func(set []string) {
		g, err := NewGlobs(set)
		if err != nil {
			t.Fatal(err)
		}
		tests, ok := g.FileTests()
		if !ok {
			t.Fatalf("FileTests(%q): none", set)
		}
		for _, rel := range paths {
			if g.Match(rel, false) && !selects(tests, rel) {
				t.Errorf("%q lists %q, which %q do not select", set, rel, tests)
			}
		}
	}
	for _, s := range globs {
		check([]string{s})
		check([]string{s, "!gen/keep.go", "!*.json"})
	}
	check(globs)
}
