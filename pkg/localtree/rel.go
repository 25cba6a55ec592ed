package localtree

import (
	"path"
	"path/filepath"
	"strings"
)

// ValidRel reports whether rel may name an entry under a root: "" (the root
// itself) or a cleaned, relative, slash-separated path without "..".
func ValidRel(rel string) bool {
	if rel == "" {
		return true
	}
	if rel == "." || path.IsAbs(rel) || path.Clean(rel) != rel || strings.ContainsRune(rel, 0) {
		return false
	}
	return rel != ".." && !strings.HasPrefix(rel, "../")
}

// RelTo returns the slash-separated path of p relative to root, and false if p
// is not root itself or under it.
func RelTo(root, p string) (string, bool) {
	if !filepath.IsAbs(p) {
		return "", false
	}
	r, err := filepath.Rel(root, filepath.Clean(p))
	if err != nil {
		return "", false
	}
	r = filepath.ToSlash(r)
	if r == "." {
		r = ""
	}
	if !ValidRel(r) {
		return "", false
	}
	return r, true
}

// ParentRel returns the parent of rel, "" for top-level entries.
func ParentRel(rel string) string {
	if d := path.Dir(rel); d != "." {
		return d
	}
	return ""
}

// UnderAny reports whether rel or one of its parents is in set.
func UnderAny(rel string, set map[string]bool) bool {
	for a := rel; ; a = ParentRel(a) {
		if set[a] {
			return true
		}
		if a == "" {
			return false
		}
	}
}
