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

// InGit reports whether rel (slash-separated) names .git or something in it
// on some file system, however it is spelled: a component that is ".git"
// compared without case (macOS and Windows disks fold it), without the code
// points HFS+ ignores, without the trailing dots and spaces Windows drops
// or an NTFS stream suffix (":..."), or its 8.3 short name "GIT~1";
// backslashes separate components too (Windows). Nothing that comes from a
// container may be written there: git runs hooks from it (CVE-2014-9390).
func InGit(rel string) bool {
	for c := range strings.FieldsFuncSeq(rel, func(r rune) bool { return r == '/' || r == '\\' }) {
		if isGitName(c) {
			return true
		}
	}
	return false
}

// isGitName reports whether one path component may open .git (see InGit),
// as git's is_hfs_dotgit and is_ntfs_dotgit do.
func isGitName(name string) bool {
	name = strings.Map(func(r rune) rune {
		if hfsIgnorable(r) {
			return -1
		}
		return r
	}, name)
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[:i]
	}
	name = strings.TrimRight(name, ". ")
	return strings.EqualFold(name, ".git") || strings.EqualFold(name, "git~1")
}

// hfsIgnorable reports the code points HFS+ leaves out of a name when it
// compares names (git's utf8.c lists them).
func hfsIgnorable(r rune) bool {
	return r >= 0x200c && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x206a && r <= 0x206f || r == 0xfeff
}
