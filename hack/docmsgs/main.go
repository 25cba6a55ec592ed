// Command docmsgs fails when a message quoted in the docs is one the code no longer prints.
//
//	go run ./hack/docmsgs -src pkg FILE.md…
//
// Every line in a fenced code block of the given Markdown files that starts with "error: " or
// "warning: " (what the binary prints on stderr) must be made of the string literals in the Go
// files under -src: each literal becomes a regexp with its fmt verbs (%s, %q, %d, %v, %w, …) as
// wildcards, the fixed text of every match covers its part of the line, and what no literal
// covers may only be the values the verbs print: runs of at most two words, where a quoted string
// ("…", as %q prints it) or a command in backticks counts as one word however long it is. A line
// must also have fixed text of its own outside its quoted values, so a line of quotes alone proves
// nothing. A sample left behind when a message changes (a word changed, a clause added) then
// fails make verify-docs.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// minFixed is the fixed text a literal needs to vouch for part of a line: short ones like
// "%s: %w" would match anything.
const minFixed = 8

// maxValueWords is the most words a run of the line no literal covers may have: a value a verb
// prints (a quoted name, a number, a duration with its unit), not a sentence.
const maxValueWords = 2

var verb = regexp.MustCompile(`%[-+# 0]*(\[\d+\])?(\d+|\*)?(\.(\d+|\*))?[a-zA-Z%]`)

func main() {
	src := flag.String("src", "pkg", "directory of the Go code whose string literals are the messages")
	flag.Parse()
	pats, err := literals(*src)
	if err != nil {
		fmt.Fprintf(os.Stderr, "docmsgs: %v\n", err)
		os.Exit(1)
	}
	bad, n := 0, 0
	for _, md := range flag.Args() {
		lines, err := quoted(md)
		if err != nil {
			fmt.Fprintf(os.Stderr, "docmsgs: %v\n", err)
			os.Exit(1)
		}
		for _, l := range lines {
			n++
			if gap := uncovered(pats, l.text); gap != "" {
				bad++
				fmt.Fprintf(os.Stderr, "%s:%d: no message in %s prints %q of this line: %s\n", md, l.n, *src, gap, l.text)
			}
		}
	}
	if bad > 0 {
		fmt.Fprintf(os.Stderr, "docmsgs: %d of %d quoted error/warning lines match no message in the code: fix the sample (run the command again) or the message\n", bad, n)
		os.Exit(1)
	}
	fmt.Printf("docmsgs: every one of %d quoted error/warning lines matches a message in %s\n", n, *src)
}

type line struct {
	n    int
	text string
}

// quoted returns the "error: " and "warning: " lines inside fenced code blocks of a Markdown
// file, with their prefix (and an "[entry] " prefix) removed.
func quoted(md string) ([]line, error) {
	f, err := os.Open(md)
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", md, err)
	}
	defer f.Close()
	var out []line
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		t := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(t), "```") {
			in = !in
			continue
		}
		if !in {
			continue
		}
		t = strings.TrimSpace(t)
		if strings.HasPrefix(t, "[") {
			if i := strings.Index(t, "] "); i > 0 {
				t = t[i+2:]
			}
		}
		for _, p := range []string{"error: ", "warning: "} {
			if strings.HasPrefix(t, p) {
				out = append(out, line{n, strings.TrimPrefix(t, p)})
			}
		}
	}
	return out, sc.Err()
}

// literals turns every string literal with enough fixed text in the non-test Go files under
// dir into a regexp.
func literals(dir string) ([]*regexp.Regexp, error) {
	seen := map[string]bool{}
	var out []*regexp.Regexp
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parsing %q: %w", path, err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil || seen[s] {
				return true
			}
			seen[s] = true
			if p := pattern(s); p != nil {
				out = append(out, p)
			}
			return true
		})
		return nil
	})
	return out, err
}

// pattern is s as a regexp with its fmt verbs as wildcards, or nil when s has too little fixed
// text to vouch for a line.
func pattern(s string) *regexp.Regexp {
	s = strings.TrimSuffix(s, "\n")
	parts := verb.Split(s, -1)
	fixed := 0
	for i, p := range parts {
		fixed += len(strings.TrimSpace(p))
		parts[i] = "(" + regexp.QuoteMeta(p) + ")"
	}
	if fixed < minFixed {
		return nil
	}
	return regexp.MustCompile(strings.Join(parts, ".*?"))
}

// uncovered returns the first run of text that no literal's fixed text covers and that is longer
// than a value, or "" when there is none. A quoted value counts as one word: a %q of a command
// ("flux suspend kustomization apps -n flux-system") is one value however many words it has.
// A line whose only covered text lies inside its quoted values is returned whole.
func uncovered(pats []*regexp.Regexp, text string) string {
	covered := make([]bool, len(text))
	for _, p := range pats {
		for _, m := range p.FindAllStringSubmatchIndex(text, -1) {
			for g := 2; g+1 < len(m); g += 2 {
				for i := m[g]; i < m[g+1]; i++ {
					covered[i] = true
				}
			}
		}
	}
	value := quotedValues(text)
	fixed := 0
	for i := range text {
		if covered[i] && !value[i] && text[i] != ' ' {
			fixed++
		}
	}
	if fixed < minFixed {
		return text
	}
	start := -1
	for i := 0; i <= len(text); i++ {
		if i < len(text) && !covered[i] {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			if words(text[start:i], value[start:i]) > maxValueWords {
				return text[start:i]
			}
			start = -1
		}
	}
	return ""
}

// words counts the words of run, each stretch of it inside a quoted value (value[i]) being one
// word, or part of the word it touches.
func words(run string, value []bool) int {
	var b strings.Builder
	for i := 0; i < len(run); i++ {
		switch {
		case !value[i]:
			b.WriteByte(run[i])
		case i == 0 || !value[i-1]:
			b.WriteByte('"')
		}
	}
	return len(strings.Fields(b.String()))
}

// quotedValues marks the characters of text, quotes included, that lie in a double-quoted string
// (Go's %q, with its backslash escapes) or a backtick-quoted one. An unclosed quote marks nothing:
// a stray quote must not make the rest of the line a value.
func quotedValues(text string) []bool {
	value := make([]bool, len(text))
	for i := 0; i < len(text); i++ {
		q := text[i]
		if q != '"' && q != '`' {
			continue
		}
		end := -1
		for j := i + 1; j < len(text); j++ {
			if q == '"' && text[j] == '\\' {
				j++
				continue
			}
			if text[j] == q {
				end = j
				break
			}
		}
		if end < 0 {
			continue
		}
		for j := i; j <= end; j++ {
			value[j] = true
		}
		i = end
	}
	return value
}
