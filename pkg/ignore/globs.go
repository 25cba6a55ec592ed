package ignore

import (
	"fmt"
	"slices"
	"strings"
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
