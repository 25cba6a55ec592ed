package ignore

import (
	"fmt"
	"testing"
)

// A .livesyncignore and .gitignore like a mid-sized web or Go project's.
var benchIgnoreFiles = map[string]string{
	".gitignore": "node_modules/\n/dist\n/build\n*.log\n*.tmp\ncoverage/\n.env\n.env.*\n!.env.example\n" +
		"*.pyc\n__pycache__/\n.DS_Store\n/vendor\n*.o\n*.so\n**/testdata/golden/*.out\n",
	".livesyncignore": "docs/\n*.md\n!README.md\n/hack\n**/*.test\nsrc/**/generated/\n",
	"web/.gitignore":  ".cache/\n*.map\n",
}

// benchPaths returns n paths spread over a tree of depth 2–6, the shape of
// a 100,000-file walk.
func benchPaths(n int) []string {
	exts := []string{".go", ".ts", ".js", ".json", ".css", ".log", ".md", ".map", ".py"}
	paths := make([]string, n)
	for i := range paths {
		dir := fmt.Sprintf("src/pkg%d/sub%d", i%50, i%7)
		switch i % 5 {
		case 1:
			dir = fmt.Sprintf("web/components/c%d/parts%d/deep", i%40, i%3)
		case 2:
			dir = fmt.Sprintf("node_modules/lib%d/dist", i%300)
		case 3:
			dir = fmt.Sprintf("src/gen%d", i%20)
		}
		paths[i] = fmt.Sprintf("%s/file%d%s", dir, i, exts[i%len(exts)])
	}
	return paths
}

// BenchmarkMatch measures one Match call with warm caches, as the watcher
// sees it for each event, and a cold 100,000-path walk with a new Matcher,
// as the initial sync sees it.
func BenchmarkMatch(b *testing.B) {
	root := b.TempDir()
	writeFiles(b, root, benchIgnoreFiles)
	paths := benchPaths(100_000)

	b.Run("warm", func(b *testing.B) {
		m, err := New(root, Options{GitIgnore: true, Excludes: []string{"*.bak", "secrets/"}})
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range paths {
			m.Match(p, false)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			m.Match(paths[i%len(paths)], false)
			i++
		}
	})
	b.Run("walk100k", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m, err := New(root, Options{GitIgnore: true, Excludes: []string{"*.bak", "secrets/"}})
			if err != nil {
				b.Fatal(err)
			}
			for _, p := range paths {
				m.Match(p, false)
			}
		}
	})
}
