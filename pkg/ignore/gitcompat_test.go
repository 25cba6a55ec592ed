package ignore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMatchAgreesWithGit generates random trees with random .gitignore
// files and checks that Match answers exactly what `git check-ignore` does
// for every file and directory in them. The generator leans on the parts of
// gitignore(5) that are easy to get wrong: negation, anchoring, "**",
// classes, escapes and nested files.
func TestMatchAgreesWithGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not found")
	}
	seeds := 150
	if testing.Short() {
		seeds = 15
	}
	home := t.TempDir() // no user or system config may add excludes
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	var total, ignored int
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 0x6c697665))
			root := t.TempDir()
			entries := genTree(t, r, root)

			gitCmd := func(stdin []byte, args ...string) []byte {
				cmd := exec.Command(git, append([]string{"-C", root}, args...)...)
				cmd.Env = env
				cmd.Stdin = bytes.NewReader(stdin)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if exitErr := (*exec.ExitError)(nil); errors.As(err, &exitErr) && exitErr.ExitCode() == 1 {
					err = nil // check-ignore: no path is ignored
				}
				if err != nil {
					t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
				}
				return out
			}
			gitCmd(nil, "init", "-q")
			var stdin bytes.Buffer
			for _, e := range entries {
				stdin.WriteString(e.rel)
				stdin.WriteByte(0)
			}
			ignoredByGit := map[string]bool{}
			for p := range strings.SplitSeq(string(gitCmd(stdin.Bytes(), "check-ignore", "--no-index", "--stdin", "-z")), "\x00") {
				ignoredByGit[p] = p != ""
			}

			m, err := New(root, Options{GitIgnore: true})
			if err != nil {
				t.Fatal(err)
			}
			var wrong []string
			total += len(entries)
			for _, e := range entries {
				if ignoredByGit[e.rel] {
					ignored++
				}
				if got, want := m.Match(e.rel, e.dir), ignoredByGit[e.rel]; got != want {
					wrong = append(wrong, fmt.Sprintf("Match(%q, isDir=%v) = %v, git says %v", e.rel, e.dir, got, want))
				}
			}
			if len(wrong) > 0 {
				t.Errorf("%d of %d paths disagree:\n%s\nignore files:\n%s",
					len(wrong), len(entries), strings.Join(wrong, "\n"), dumpIgnoreFiles(root, entries))
			}
		})
	}
	// Guard the generator: a tree where nothing (or everything) is ignored
	// proves nothing.
	t.Logf("%d paths, %d ignored", total, ignored)
	if ignored < total/10 || ignored > total*9/10 {
		t.Errorf("generator is lopsided: %d of %d paths ignored", ignored, total)
	}
}

type entry struct {
	rel string
	dir bool
}

// Names avoid the built-in ignores, which git doesn't know about.
var genNames = []string{
	"a", "b", "c", "ab", "ba", "abc", "Ab", "x.log", "y.txt", "z.go", ".hidden", "x.y.z",
	"build", "dist", "node_modules", "foo", "deep", "doc", "!n", "#h", "[x]", "sp ace", "a*b",
}

var genSegments = []string{
	"a", "b", "ab", "abc", "Ab", "*", "?", "a*", "*b", "*.log", "*.txt", "x.*", "[ab]", "[!a]*",
	"[a-c]?", "[^b]", "**", "**", "\\!n", "\\#h", "\\[x]", "[[:alpha:]]*", "[[:upper:]]*",
	"sp\\ ace", "sp ace", "build", "node_modules", "foo", "deep", "*o*", "?a", ".*", "b*a",
	"a\\*b", "[]x]*", "dist", "doc",
}

func genTree(t *testing.T, r *rand.Rand, root string) []entry {
	var entries []entry
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		if r.IntN(3) == 0 || dir == "" {
			writeIgnoreFile(t, r, root, dir)
			entries = append(entries, entry{rel: path.Join(dir, ".gitignore")})
		}
		names := slices.Clone(genNames)
		r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		for _, name := range names[:2+r.IntN(4)] {
			rel := path.Join(dir, name)
			p := filepath.Join(root, filepath.FromSlash(rel))
			if depth < 3 && r.IntN(5) < 2 {
				if err := os.Mkdir(p, 0o755); err != nil {
					t.Fatal(err)
				}
				entries = append(entries, entry{rel: rel, dir: true})
				walk(rel, depth+1)
				continue
			}
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			entries = append(entries, entry{rel: rel})
		}
	}
	walk("", 0)
	return entries
}

func writeIgnoreFile(t *testing.T, r *rand.Rand, root, dir string) {
	var b strings.Builder
	for range 1 + r.IntN(6) {
		b.WriteString(genPattern(r))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(dir), ".gitignore"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func genPattern(r *rand.Rand) string {
	seg := func() string { return genSegments[r.IntN(len(genSegments))] }
	var b strings.Builder
	switch r.IntN(15) {
	case 0:
		return "#" + seg()
	case 1:
		return ""
	}
	if r.IntN(4) == 0 {
		b.WriteByte('!')
	}
	if r.IntN(5) == 0 {
		b.WriteByte('/')
	}
	n := 1
	if r.IntN(2) == 0 {
		n += 1 + r.IntN(2)
	}
	for i := range n {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(seg())
	}
	if r.IntN(4) == 0 {
		b.WriteByte('/')
	}
	if r.IntN(10) == 0 {
		b.WriteString("  ")
	}
	return b.String()
}

func dumpIgnoreFiles(root string, entries []entry) string {
	var b strings.Builder
	for _, e := range entries {
		if path.Base(e.rel) != ".gitignore" {
			continue
		}
		data, _ := os.ReadFile(filepath.Join(root, filepath.FromSlash(e.rel)))
		fmt.Fprintf(&b, "--- %s\n%s", e.rel, data)
	}
	return b.String()
}
