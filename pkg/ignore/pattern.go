package ignore

import (
	"bytes"
	"strings"
)

// pattern is one compiled line of a gitignore-syntax file or one --exclude.
type pattern struct {
	negate  bool   // "!pattern": re-include
	dirOnly bool   // "pattern/": only directories match
	anyDir  bool   // no slash but a trailing one: match the last component at any depth
	base    string // directory of the file the pattern came from, "" for the root
	glob    string // the pattern without "!", a leading "/" or a trailing "/"

	// Precomputed so that most patterns never reach wildmatch.
	kind   matchKind
	prefix string // kindGlob: literal head of glob, compared before wildmatch
}

type matchKind uint8

const (
	kindGlob    matchKind = iota // wildmatch(glob)
	kindLiteral                  // no wildcard or escape: ==
	kindSuffix                   // "*" + literal, git's ENDSWITH: HasSuffix(glob[1:])
)

// parsePatterns compiles the lines of an ignore file read from directory
// base ("" for the root), following gitignore(5): blank lines and lines
// starting with "#" are skipped, unescaped trailing spaces are dropped,
// CRLF line ends and a UTF-8 BOM are tolerated.
func parsePatterns(data []byte, base string) []pattern {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var ps []pattern
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if p, ok := compile(trimTrailingSpaces(string(line)), base); ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// trimTrailingSpaces drops trailing spaces unless escaped with a backslash.
func trimTrailingSpaces(s string) string {
	end := -1 // start of the current run of unescaped trailing spaces
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if end < 0 {
				end = i
			}
		case '\\':
			i++
			end = -1
		default:
			end = -1
		}
	}
	if end >= 0 {
		return s[:end]
	}
	return s
}

// compile turns one pattern into its matcher; ok is false for patterns
// that can never match anything (empty, a lone "!" or "/").
func compile(s, base string) (p pattern, ok bool) {
	p.base = base
	if strings.HasPrefix(s, "!") {
		p.negate = true
		s = s[1:]
	}
	if strings.HasSuffix(s, "/") {
		p.dirOnly = true
		s = s[:len(s)-1]
	}
	if s == "" {
		return p, false
	}
	// A slash anywhere but at the end anchors the pattern to base;
	// otherwise it matches the last path component at any depth.
	if !strings.Contains(s, "/") {
		p.anyDir = true
	} else {
		s = strings.TrimPrefix(s, "/")
	}
	p.glob = s
	n := strings.IndexAny(s, "*?[\\")
	switch {
	case n < 0:
		p.kind = kindLiteral
	case p.anyDir && n == 0 && s[0] == '*' && !strings.ContainsAny(s[1:], "*?[\\"):
		p.kind = kindSuffix
	default:
		p.prefix = s[:n]
	}
	return p, true
}

// match reports whether the pattern matches rel, a slash-separated path
// relative to the matcher root inside p.base, whose last component is name.
func (p *pattern) match(rel, name string, isDir bool) bool {
	if p.dirOnly && !isDir {
		return false
	}
	if p.anyDir {
		switch p.kind {
		case kindLiteral:
			return name == p.glob
		case kindSuffix:
			return strings.HasSuffix(name, p.glob[1:])
		}
		return wildmatch(p.glob, name)
	}
	if p.base != "" {
		rel = rel[len(p.base)+1:]
	}
	if p.kind == kindLiteral {
		return rel == p.glob
	}
	if !strings.HasPrefix(rel, p.prefix) {
		return false
	}
	return wildmatch(p.glob[len(p.prefix):], rel[len(p.prefix):])
}
