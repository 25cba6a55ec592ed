package ignore

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Globs is a list of patterns in gitignore syntax that lists paths rather
// than ignores them (sync-back's --sync-back): a path is listed when the last
// pattern that matches it, or a directory above it, is not a "!" one. A
// pattern is relative to the root it is used under; "./name" anchors it
// there as "/name" does in a .gitignore.
type Globs struct {
	ps []pattern
}

// NewGlobs compiles patterns, refusing any that could name something
// outside the root: an absolute one, or one with a ".." component.
func NewGlobs(patterns []string) (*Globs, error) {
	g := &Globs{}
	for _, s := range patterns {
		if err := CheckGlob(s); err != nil {
			return nil, err
		}
		s = strings.TrimSpace(s)
		if rest, ok := strings.CutPrefix(s, "./"); ok {
			s = "/" + rest
		} else if rest, ok := strings.CutPrefix(s, "!./"); ok {
			s = "!/" + rest
		}
		if p, ok := compile(s, ""); ok {
			g.ps = append(g.ps, p)
		}
	}
	return g, nil
}

// CheckGlob says, in one line, why pattern may not list paths under a root:
// it is empty, absolute, or has a ".." component.
func CheckGlob(pattern string) error {
	s := strings.TrimPrefix(strings.TrimSpace(pattern), "!")
	switch {
	case s == "" || s == "." || s == "./":
		return fmt.Errorf("sync-back pattern %q is empty: name the paths to bring back, e.g. package-lock.json or gen/**", pattern)
	case strings.HasPrefix(s, "/"), strings.HasPrefix(s, `\`), len(s) > 1 && s[1] == ':':
		return fmt.Errorf("sync-back pattern %q is absolute: write it relative to the mapping's LOCAL, e.g. ./%s", pattern, strings.TrimLeft(s, `/\`))
	case strings.ContainsRune(s, 0):
		return fmt.Errorf("sync-back pattern %q holds a NUL byte", pattern)
	}
	for c := range strings.SplitSeq(strings.ReplaceAll(s, `\`, "/"), "/") {
		if c == ".." {
			return fmt.Errorf("sync-back pattern %q reaches outside the mapping with \"..\": write it relative to the mapping's LOCAL", pattern)
		}
	}
	return nil
}

// Empty reports whether g lists nothing.
func (g *Globs) Empty() bool { return g == nil || len(g.ps) == 0 }

// Match reports whether rel (slash-separated, relative to the root) is
// listed: it or a directory above it.
func (g *Globs) Match(rel string, isDir bool) bool {
	if g.Empty() || rel == "" {
		return false
	}
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' && g.last(rel[:i], true) {
			return true
		}
	}
	return g.last(rel, isDir)
}

func (g *Globs) last(rel string, isDir bool) bool {
	name := rel[strings.LastIndexByte(rel, '/')+1:]
	listed := false
	for i := range g.ps {
		if p := &g.ps[i]; p.match(rel, name, isDir) {
			listed = !p.negate
		}
	}
	return listed
}

// Starts returns where a scan for listed paths starts, "./"-prefixed and
// one component each (so that no symlink is resolved on the way): the first
// component of every anchored pattern, or just "." when a pattern matches
// at any depth or starts with a wildcard.
func (g *Globs) Starts() []string {
	var out []string
	for _, p := range g.ps {
		if p.negate {
			continue
		}
		first, _, _ := strings.Cut(p.glob, "/")
		if p.anyDir || strings.ContainsAny(first, "*?[\\") {
			return []string{"."}
		}
		out = append(out, "./"+first)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// FileTests returns find(1) tests, in pairs ("-path", then a pattern),
// that every file g lists passes at least one of, with find naming paths
// from the root as the scan does ("./"-prefixed; see Starts). They may
// select more: find's "*" crosses "/" where gitignore's does not, a "?"
// becomes "*" (a locale's multibyte character is one "?" to find but
// several bytes to gitignore), and "!" patterns, which only ever take
// paths away, are left out. A pattern that matches at any depth is a
// -path "*/name" too, not a -name: busybox's find once gave -name's
// fnmatch FNM_PERIOD, under which "*" does not match a leading dot. ok is
// false when a pattern holds what they cannot express safely (a "\"
// escape, a "[...]" class, bytes that are not UTF-8): then any file may be
// listed.
func (g *Globs) FileTests() (tests []string, ok bool) {
	if g.Empty() {
		return nil, true
	}
	var out []string
	for _, p := range g.ps {
		if p.negate {
			continue
		}
		pat, ok := findPattern(p.glob)
		if !ok {
			return nil, false
		}
		// The path itself, or a directory above it, at any depth or at the
		// root.
		if p.anyDir {
			pat = "*/" + pat
		} else {
			pat = "./" + pat
		}
		if !p.dirOnly {
			out = append(out, "-path", pat)
			if strings.HasSuffix(pat, "*") {
				continue // pat already selects what is below it
			}
		}
		out = append(out, "-path", pat+"/*")
	}
	return dedupPairs(out), true
}

// findPattern turns a gitignore glob into a find pattern that matches at
// least what it does: "**/" (any number of directories, none included)
// becomes "*", every run of stars one "*", and "?" a "*". ok is false for
// an escape or a class, for bytes that are not UTF-8, and for a pattern
// that ends with "/" (GNU find warns about such a -path).
func findPattern(glob string) (string, bool) {
	if strings.ContainsAny(glob, "\\[") || !utf8.ValidString(glob) || strings.HasSuffix(glob, "/") {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*', '?':
			n := i
			for i+1 < len(glob) && (glob[i+1] == '*' || glob[i+1] == '?') {
				i++
			}
			if i > n && i+1 < len(glob) && glob[i+1] == '/' {
				i++ // "**/" may stand for no directory at all
			}
			b.WriteByte('*')
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// dedupPairs drops a (test, pattern) pair seen before, keeping the order.
func dedupPairs(ts []string) []string {
	seen := map[[2]string]bool{}
	out := ts[:0]
	for i := 0; i+1 < len(ts); i += 2 {
		k := [2]string{ts[i], ts[i+1]}
		if !seen[k] {
			seen[k] = true
			out = append(out, ts[i], ts[i+1])
		}
	}
	return out
}
