package ignore

import "strings"

// Results of dowild. The two abort results let a caller stop retrying
// shorter prefixes once no suffix can match, which keeps patterns with many
// stars from going exponential; they are git's WM_ABORT_ALL and
// WM_ABORT_TO_STARSTAR.
const (
	wmMatch = iota
	wmNoMatch
	wmAbortAll
	wmAbortToStarStar
)

// wildmatch reports whether text matches the glob p with git's wildmatch
// rules in WM_PATHNAME mode: '*', '?' and classes never match '/', and "**"
// between slashes (or at either end) matches any number of directories.
// Matching is byte-wise and case-sensitive, as git's is with
// core.ignoreCase=false.
func wildmatch(p, text string) bool {
	return dowild(p, text) == wmMatch
}

func dowild(p, text string) int {
	at := func(i int) byte { // the pattern as a C string: 0 past its end
		if i < len(p) {
			return p[i]
		}
		return 0
	}
	ti := 0
	for pi := 0; pi < len(p); pi, ti = pi+1, ti+1 {
		pc := p[pi]
		var tc byte
		if ti < len(text) {
			tc = text[ti]
		} else if pc != '*' {
			return wmAbortAll
		}
		switch pc {
		case '\\':
			pi++
			if pi == len(p) || tc != p[pi] { // a trailing backslash matches nothing
				return wmNoMatch
			}
		case '?':
			if tc == '/' {
				return wmNoMatch
			}
		case '*':
			matchSlash := false
			pi++
			if at(pi) == '*' {
				prev := pi - 2
				for at(pi) == '*' {
					pi++
				}
				if (prev < 0 || p[prev] == '/') &&
					(pi == len(p) || p[pi] == '/' || (p[pi] == '\\' && at(pi+1) == '/')) {
					// "**/" may match no directory at all: try the rest
					// of the pattern right here first.
					if at(pi) == '/' && dowild(p[pi+1:], text[ti:]) == wmMatch {
						return wmMatch
					}
					matchSlash = true
				}
			}
			if pi == len(p) {
				// A trailing "**" matches everything, a trailing "*"
				// only what is left of this path component.
				if !matchSlash && strings.IndexByte(text[ti:], '/') >= 0 {
					return wmNoMatch
				}
				return wmMatch
			}
			if !matchSlash && p[pi] == '/' {
				// "*/" swallows exactly the rest of this component;
				// the loop's increment steps over both slashes.
				slash := strings.IndexByte(text[ti:], '/')
				if slash < 0 {
					return wmNoMatch
				}
				ti += slash
				continue
			}
			for ti < len(text) {
				tc = text[ti]
				if !isGlobSpecial(p[pi]) {
					// The star must run up to the next occurrence of the
					// literal that follows it: skip there directly.
					for ti < len(text) && (matchSlash || text[ti] != '/') && text[ti] != p[pi] {
						ti++
					}
					if ti == len(text) || text[ti] != p[pi] {
						return wmNoMatch
					}
					tc = text[ti]
				}
				if m := dowild(p[pi:], text[ti:]); m != wmNoMatch {
					if !matchSlash || m != wmAbortToStarStar {
						return m
					}
				} else if !matchSlash && tc == '/' {
					return wmAbortToStarStar
				}
				ti++
			}
			return wmAbortAll
		case '[':
			pi++
			pc = at(pi)
			if pc == '^' {
				pc = '!'
			}
			negated := pc == '!'
			if negated {
				pi++
				pc = at(pi)
			}
			var prev byte
			matched := false
			for {
				// A ']' right after '[' or '[!' is a member, not the end:
				// the test for the end comes after the first member.
				switch {
				case pc == 0:
					return wmAbortAll
				case pc == '\\':
					pi++
					if pc = at(pi); pc == 0 {
						return wmAbortAll
					}
					if tc == pc {
						matched = true
					}
				case pc == '-' && prev != 0 && at(pi+1) != 0 && at(pi+1) != ']':
					pi++
					pc = at(pi)
					if pc == '\\' {
						pi++
						if pc = at(pi); pc == 0 {
							return wmAbortAll
						}
					}
					if tc >= prev && tc <= pc {
						matched = true
					}
					pc = 0 // a range can't start another range
				case pc == '[' && at(pi+1) == ':':
					s := pi + 2
					j := s
					for at(j) != 0 && at(j) != ']' {
						j++
					}
					if at(j) == 0 {
						return wmAbortAll
					}
					if j-s-1 < 0 || p[j-1] != ':' {
						// No ":]": the '[' is an ordinary member.
						if tc == '[' {
							matched = true
						}
						pi = s - 1 // continue at the ':'
						prev = '['
						pc = at(pi)
						if pc == ']' {
							goto endClass
						}
						continue
					}
					in, ok := inClass(p[s:j-1], tc)
					if !ok {
						return wmAbortAll
					}
					if in {
						matched = true
					}
					pi = j
					pc = 0
				default:
					if tc == pc {
						matched = true
					}
				}
				prev = pc
				pi++
				if pc = at(pi); pc == ']' {
					break
				}
			}
		endClass:
			if matched == negated || tc == '/' {
				return wmNoMatch
			}
		default:
			if tc != pc {
				return wmNoMatch
			}
		}
	}
	if ti < len(text) {
		return wmNoMatch
	}
	return wmMatch
}

func isGlobSpecial(c byte) bool {
	return c == '*' || c == '?' || c == '[' || c == '\\'
}

// inClass reports whether c is in the POSIX class name ("alpha", …); ok is
// false for an unknown class, which makes git reject the whole pattern.
// Classes are ASCII-only, like git's sane_ctype.
func inClass(name string, c byte) (in, ok bool) {
	upper := c >= 'A' && c <= 'Z'
	lower := c >= 'a' && c <= 'z'
	digit := c >= '0' && c <= '9'
	space := c == ' ' || c == '\t' || c == '\n' || c == '\r'
	print := c >= 0x20 && c <= 0x7e
	switch name {
	case "alnum":
		return upper || lower || digit, true
	case "alpha":
		return upper || lower, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < 0x20 || c == 0x7f, true
	case "digit":
		return digit, true
	case "graph":
		return print && !space, true
	case "lower":
		return lower, true
	case "print":
		return print, true
	case "punct":
		return print && !space && !upper && !lower && !digit, true
	case "space":
		return space, true
	case "upper":
		return upper, true
	case "xdigit":
		return digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'), true
	}
	return false, false
}
