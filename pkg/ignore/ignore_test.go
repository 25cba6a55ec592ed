package ignore

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

type check struct {
	path string
	dir  bool
	want bool
}

// writeFiles creates files (slash-separated path → content) under root.
func writeFiles(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runChecks(t *testing.T, m *Matcher, checks []check) {
	t.Helper()
	for _, c := range checks {
		if got := m.Match(c.path, c.dir); got != c.want {
			t.Errorf("Match(%q, isDir=%v) = %v, want %v", c.path, c.dir, got, c.want)
		}
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string // ignore files to create, by relative path
		opts   Options
		checks []check
	}{
		{
			name: "root is never ignored",
			opts: Options{Excludes: []string{"*", "**"}},
			checks: []check{
				{"", true, false},
				{"", false, false},
				{"a", false, true},
			},
		},
		{
			name: "git metadata is always ignored",
			checks: []check{
				{".git", true, true},
				{".git/config", false, true},
				{".git/objects/ab/cdef", false, true},
				{"sub/.git", true, true},
				{"sub/.git/HEAD", false, true},
				{"sub/.git", false, true}, // a submodule's gitfile
				{".gitignore", false, false},
				{".github/workflows/ci.yaml", false, false},
				{"x.git", true, false},
			},
		},
		{
			name: "editor temp files are always ignored",
			checks: []check{
				{".main.go.swp", false, true},
				{".main.go.swo", false, true},
				{".main.go.swn", false, true},
				{".main.go.swa", false, true},
				{".main.go.swx", false, true},
				{"main.go.swp", false, true},
				{"sub/.main.go.swp", false, true},
				{"4913", false, true},
				{"sub/4913", false, true},
				{"#main.go#", false, true},
				{".#main.go", false, true},
				{"main.go~", false, true},
				{"main.go___jb_tmp___", false, true},
				{"main.go___jb_old___", false, true},
				{".main.go.kate-swp", false, true},
				{"gen/.livesync-patch.app", false, true}, // a delta being assembled in the container
				{"gen/.livesync-lit.app", false, true},   // a compressed delta's literal bytes, unpacked
				{"gen/.livesync-cp.4242", false, true},   // an in-container copy on its way
				{".livesync-supervisor", false, true},    // --restart process's state, in a mapping of /tmp
				{"livesync-scan.Ab3xYz", true, true},     // a scan's marker (mktemp), in a mapping of /tmp
				{"livesync-scan.Ab3xYz/t", false, true},
				{"gen/.app.js.livesync-812-1733400000000000000", false, true}, // pkg/localtree's temp beside a file it replaces
				{"livesync-scan.go", false, false},
				{"app.livesync-1-2", false, false}, // not a dotfile: not pkg/localtree's
				{".app.livesync-1-x", false, false},
				{"livesync.yaml", false, false},
				{"backup~/inside.go", false, true}, // inside an ignored directory
				{"main.go", false, false},
				{"movie.swf", false, false}, // not a dotfile: not a swap file
				{"a.swo", false, false},
				{".swq", false, false},
				{"#notes", false, false},
				{"49130", false, false},
				{"issue#4#x", false, false},
			},
		},
		{
			name:  "built-in ignores can't be re-included",
			files: map[string]string{".livesyncignore": "!*~\n!.git/\n!4913\n"},
			opts:  Options{Excludes: []string{"!.#*"}},
			checks: []check{
				{"main.go~", false, true},
				{".git", true, true},
				{"4913", false, true},
				{".#main.go", false, true},
			},
		},
		{
			name:  "name without slash matches at any depth",
			files: map[string]string{".livesyncignore": "node_modules\n"},
			checks: []check{
				{"node_modules", true, true},
				{"node_modules", false, true},
				{"web/node_modules", true, true},
				{"web/node_modules/react/index.js", false, true},
				{"node_modules_x", true, false},
				{"x/node_modules.go", false, false},
			},
		},
		{
			name:  "star",
			files: map[string]string{".livesyncignore": "*.log\nsrc/*.go\n"},
			checks: []check{
				{"x.log", false, true},
				{".log", false, true},
				{"a/b/x.log", false, true},
				{"logs.log/inner.txt", false, true}, // directory x.log
				{"x.log.txt", false, false},
				{"src/a.go", false, true},
				{"src/x/a.go", false, false}, // '*' doesn't cross '/'
				{"lib/src/a.go", false, false},
			},
		},
		{
			name:  "question mark and classes",
			files: map[string]string{".livesyncignore": "?.txt\n[ab].c\n[!ab].d\n[a-c]x\n[[:digit:]]*\n[]]y\n"},
			checks: []check{
				{"a.txt", false, true},
				{"ab.txt", false, false},
				{".txt", false, false},
				{"a.c", false, true},
				{"b.c", false, true},
				{"c.c", false, false},
				{"a.d", false, false},
				{"c.d", false, true},
				{"bx", false, true},
				{"dx", false, false},
				{"9lives", false, true},
				{"lives9", false, false},
				{"]y", false, true},
			},
		},
		{
			name:  "negation: last match wins",
			files: map[string]string{".livesyncignore": "*.log\n!keep.log\n!first.log\nfirst.log\n"},
			checks: []check{
				{"x.log", false, true},
				{"keep.log", false, false},
				{"a/keep.log", false, false},
				{"first.log", false, true},
			},
		},
		{
			name:  "nothing inside an ignored directory can be re-included",
			files: map[string]string{".livesyncignore": "build/\n!build/keep.txt\nout/*\n!out/keep.txt\n"},
			checks: []check{
				{"build", true, true},
				{"build/keep.txt", false, true},
				{"build/deep/er/x", false, true},
				{"out", true, false},
				{"out/keep.txt", false, false},
				{"out/other.txt", false, true},
			},
		},
		{
			name:  "leading slash anchors to the ignore file's directory",
			files: map[string]string{".livesyncignore": "/dist\n/a/b\n"},
			checks: []check{
				{"dist", true, true},
				{"dist/x.js", false, true},
				{"web/dist", true, false},
				{"a/b", false, true},
				{"x/a/b", false, false},
			},
		},
		{
			name:  "slash in the middle anchors too",
			files: map[string]string{".livesyncignore": "docs/build\n"},
			checks: []check{
				{"docs/build", true, true},
				{"docs/build/index.html", false, true},
				{"x/docs/build", true, false},
			},
		},
		{
			name:  "trailing slash matches directories only",
			files: map[string]string{".livesyncignore": "tmp/\ncache/data/\n"},
			checks: []check{
				{"tmp", true, true},
				{"tmp", false, false},
				{"a/tmp", true, true},
				{"a/tmp/x", false, true},
				{"cache/data", true, true},
				{"cache/data", false, false},
				{"x/cache/data", true, false},
			},
		},
		{
			name:  "double star",
			files: map[string]string{".livesyncignore": "**/foo\na/**/b\nc/**\nd**e\n**/x/**/y\n"},
			checks: []check{
				{"foo", false, true},
				{"p/foo", false, true},
				{"p/q/foo", true, true},
				{"a/b", false, true},
				{"a/x/b", false, true},
				{"a/x/y/b", false, true},
				{"za/b", false, false},
				{"c", true, false},
				{"c/x", false, true},
				{"c/x/y", false, true},
				{"de", false, true},
				{"dxxe", false, true},
				{"d/e", false, false}, // no slash in "d**e": only last components match
				{"x/y", false, true},
				{"p/x/q/y", false, true},
			},
		},
		{
			name: "escapes, comments and spaces",
			files: map[string]string{".livesyncignore": "# a comment\n\\#hash\n\\!bang\n\\*star\n" +
				"trailing\\ \nspaces   \n\n   \n"},
			checks: []check{
				{"# a comment", false, false},
				{"#hash", false, true},
				{"!bang", false, true},
				{"*star", false, true},
				{"xstar", false, false},
				{"trailing ", false, true},
				{"trailing", false, false},
				{"spaces", false, true},
				{"spaces   ", false, false},
			},
		},
		{
			name:  "CRLF and BOM",
			files: map[string]string{".livesyncignore": "\xef\xbb\xbfa\r\nb/\r\n"},
			checks: []check{
				{"a", false, true},
				{"b", true, true},
				{"b", false, false},
			},
		},
		{
			name: "nested ignore files are relative to their directory and win",
			files: map[string]string{
				".livesyncignore":     "*.txt\n",
				"sub/.livesyncignore": "*.tmp\n/gen\n!keep.txt\n",
			},
			checks: []check{
				{"x.tmp", false, false},
				{"sub/x.tmp", false, true},
				{"sub/a/x.tmp", false, true},
				{"gen", true, false},
				{"sub/gen", true, true},
				{"sub/a/gen", true, false},
				{"keep.txt", false, true},
				{"sub/keep.txt", false, false},
				{"sub/a/keep.txt", false, false},
				{"sub/other.txt", false, true},
			},
		},
		{
			name: "ignore files inside ignored directories are not read",
			files: map[string]string{
				".livesyncignore":          "vendor/\n",
				"vendor/.livesyncignore":   "!*\n",
				"vendor/x/.livesyncignore": "!*\n",
			},
			checks: []check{
				{"vendor/x/y.go", false, true},
			},
		},
		{
			name:  ".gitignore is ignored by default",
			files: map[string]string{".gitignore": "*.o\n", "sub/.gitignore": "*.a\n"},
			checks: []check{
				{"x.o", false, false},
				{"sub/x.a", false, false},
			},
		},
		{
			name: ".gitignore with GitIgnore, overridden by .livesyncignore",
			files: map[string]string{
				".gitignore":      "*.o\ndist/\n",
				".livesyncignore": "!dist/\n",
				"sub/.gitignore":  "*.a\n!y.o\n",
			},
			opts: Options{GitIgnore: true},
			checks: []check{
				{"x.o", false, true},
				{"sub/x.a", false, true},
				{"sub/y.o", false, false},
				{"dist", true, false},
				{"dist/app.js", false, false},
			},
		},
		{
			name:  "excludes are anchored at the root and win over files",
			files: map[string]string{".livesyncignore": "!*.bak\n*.log\n", "sub/.livesyncignore": "!*.bak\n"},
			opts:  Options{Excludes: []string{"*.bak", "/tmp", "!important.log", "secrets/"}},
			checks: []check{
				{"x.bak", false, true},
				{"sub/x.bak", false, true},
				{"tmp", true, true},
				{"sub/tmp", true, false},
				{"x.log", false, true},
				{"important.log", false, false},
				{"secrets/key", false, true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tt.files)
			m, err := New(root, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			runChecks(t, m, tt.checks)
		})
	}
}

// TestMatchDeepPathFirst asks about a deep path before its parents, and
// then about the parents, in both orders, so the directory cache can't make
// the answer depend on the order of questions.
func TestMatchDeepPathFirst(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{".livesyncignore": "gen/\n!gen/keep\n", "a/.livesyncignore": "b/\n"})
	for _, order := range [][]check{
		{{"gen/x/y/z.go", false, true}, {"gen/x", true, true}, {"gen", true, true}, {"a/b/c/d", false, true}, {"a/b", true, true}},
		{{"gen", true, true}, {"gen/x", true, true}, {"gen/x/y/z.go", false, true}, {"a/b", true, true}, {"a/b/c/d", false, true}},
	} {
		m, err := New(root, Options{})
		if err != nil {
			t.Fatal(err)
		}
		runChecks(t, m, order)
	}
}

func TestReload(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{".livesyncignore": "a\n", "sub/.livesyncignore": "c\n"})
	m, err := New(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	runChecks(t, m, []check{{"a", false, true}, {"b", false, false}, {"sub/c", false, true}, {"sub/d", false, false}})

	writeFiles(t, root, map[string]string{".livesyncignore": "b\n", "sub/.livesyncignore": "d\n"})
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	runChecks(t, m, []check{{"a", false, false}, {"b", false, true}, {"sub/c", false, false}, {"sub/d", false, true}})

	if err := os.Remove(filepath.Join(root, ".livesyncignore")); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	runChecks(t, m, []check{{"b", false, false}})
}

func TestIsIgnoreFile(t *testing.T) {
	plain, err := New(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	withGit, err := New(t.TempDir(), Options{GitIgnore: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		rel           string
		plain, wthGit bool
	}{
		{".livesyncignore", true, true},
		{"a/b/.livesyncignore", true, true},
		{".gitignore", false, true},
		{"a/.gitignore", false, true},
		{"a/.livesyncignore.bak", false, false},
		{"x.livesyncignore", false, false},
	} {
		if got := plain.IsIgnoreFile(tt.rel); got != tt.plain {
			t.Errorf("IsIgnoreFile(%q) = %v, want %v", tt.rel, got, tt.plain)
		}
		if got := withGit.IsIgnoreFile(tt.rel); got != tt.wthGit {
			t.Errorf("with GitIgnore: IsIgnoreFile(%q) = %v, want %v", tt.rel, got, tt.wthGit)
		}
	}
}

func TestNewReportsUnreadableRootFile(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, FileName), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := New(root, Options{}); err == nil {
		t.Fatal("New: want an error for a .livesyncignore that is a directory")
	}
}

func TestNewSingleFileRoot(t *testing.T) {
	file := filepath.Join(t.TempDir(), "main.go")
	writeFiles(t, filepath.Dir(file), map[string]string{"main.go": "package main\n"})
	m, err := New(file, Options{Excludes: []string{"*.log"}})
	if err != nil {
		t.Fatal(err)
	}
	runChecks(t, m, []check{{"x.log", false, true}, {"x.go", false, false}})
}

// TestConcurrentMatchAndReload is for the race detector.
func TestConcurrentMatchAndReload(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{".livesyncignore": "*.log\n", "a/.livesyncignore": "b/\n"})
	m, err := New(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 500 {
				if !m.Match("a/b/c.go", false) || m.Match("a/c.go", false) {
					t.Error("wrong answer under concurrency")
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			if err := m.Reload(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
}
