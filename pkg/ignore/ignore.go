// Package ignore decides which local paths kubectl-livesync leaves alone.
//
// One Matcher answers for one sync root. It combines, from lowest to highest
// precedence:
//
//   - .gitignore files in the root and its subdirectories, when
//     Options.GitIgnore is set;
//   - .livesyncignore files in the root and its subdirectories (in the same
//     directory a .livesyncignore overrides a .gitignore, and a deeper file
//     overrides a shallower one, as in git);
//   - Options.Excludes, the --exclude flags, anchored at the root.
//
// All of them use gitignore(5) syntax and semantics, including "!"
// negation and the rule that nothing inside an ignored directory can be
// re-included. On top of that, some names are always ignored and can't be
// re-included: .git, and the temporary files editors write next to a file
// (vim's .*.swp, .*.swo…, *.swp, *.swx and 4913; emacs's #*# and .#*;
// JetBrains' *___jb_tmp___ and *___jb_old___; Kate's *.kate-swp; *~).
package ignore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// FileName is the name of the ignore files a Matcher always reads.
const FileName = ".livesyncignore"

const gitIgnoreName = ".gitignore"

// maxCachedDirs bounds the per-directory cache. A long session may see
// events from many short-lived directories; when the cache is full it is
// dropped and rebuilt on demand, which costs a re-read of ignore files.
const maxCachedDirs = 1 << 17

// Options says which rules a Matcher uses besides the built-in ones.
type Options struct {
	// Excludes are extra patterns in gitignore syntax, as if they were the
	// last lines of a .livesyncignore in the root; they win over every file.
	Excludes []string
	// GitIgnore makes the Matcher honour .gitignore files as well.
	GitIgnore bool
}

// Matcher reports whether paths under a root are ignored. It is safe for
// concurrent use.
//
// A Matcher reads ignore files in a directory the first time it is asked
// about a path there, and caches what it read. Call Reload after an ignore
// file changed (IsIgnoreFile tells which paths those are).
type Matcher struct {
	root      string
	excludes  []pattern
	gitIgnore bool

	mu   sync.Mutex
	dirs map[string]*dirState // by slash-separated path relative to root, "" is the root
}

// dirState is what the Matcher knows about one directory.
type dirState struct {
	ignored bool
	// rules holds the compiled ignore files of the directory and of its
	// ancestors that have any, root first; nil when ignored.
	rules [][]pattern
}

// New returns a Matcher for the tree at root. It reads root's ignore files
// right away so that an unreadable one is reported here; files in
// subdirectories are read when first needed.
func New(root string, opts Options) (*Matcher, error) {
	m := &Matcher{root: root, gitIgnore: opts.GitIgnore}
	for _, e := range opts.Excludes {
		if p, ok := compile(trimTrailingSpaces(e), ""); ok {
			m.excludes = append(m.excludes, p)
		}
	}
	if err := m.Reload(); err != nil {
		return nil, err
	}
	return m, nil
}

// Reload forgets every ignore file read so far and re-reads the root's.
// Call it when a path for which IsIgnoreFile is true changed.
func (m *Matcher) Reload() error {
	rules, err := m.load("")
	if err != nil {
		return err
	}
	rootState := &dirState{}
	if len(rules) > 0 {
		rootState.rules = [][]pattern{rules}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirs = map[string]*dirState{"": rootState}
	return nil
}

// IsIgnoreFile reports whether rel is an ignore file this Matcher reads,
// so a change to it needs a Reload.
func (m *Matcher) IsIgnoreFile(rel string) bool {
	_, name := split(rel)
	return name == FileName || (m.gitIgnore && name == gitIgnoreName)
}

// Match reports whether rel is ignored. rel is slash-separated and relative
// to the root, without "./" or a trailing slash; isDir says whether it names
// a directory (patterns ending in "/" match only those). A path inside an
// ignored directory is ignored, whether or not the directory was asked about
// first. The root itself, "", is never ignored.
func (m *Matcher) Match(rel string, isDir bool) bool {
	if rel == "" {
		return false
	}
	dir, name := split(rel)
	if builtin(name) {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.dir(dir)
	if d.ignored {
		return true
	}
	return m.matchRules(d.rules, rel, name, isDir)
}

// dir returns the state of directory rel, computing it (and its ancestors')
// on first use. m.mu must be held.
func (m *Matcher) dir(rel string) *dirState {
	if d, ok := m.dirs[rel]; ok {
		return d
	}
	parentRel, name := split(rel)
	parent := m.dir(parentRel)
	d := &dirState{ignored: parent.ignored || builtin(name) || m.matchRules(parent.rules, rel, name, true)}
	if !d.ignored {
		d.rules = parent.rules
		// A read error can't be returned from Match; the directory then
		// behaves as if it had no ignore file.
		if rules, _ := m.load(rel); len(rules) > 0 {
			d.rules = append(slices.Clip(parent.rules), rules)
		}
	}
	if len(m.dirs) >= maxCachedDirs {
		root := m.dirs[""]
		clear(m.dirs)
		m.dirs[""] = root
	}
	m.dirs[strings.Clone(rel)] = d
	return d
}

// matchRules applies the excludes and then the ignore files from the
// deepest directory up, each from its last line up: the first pattern that
// matches decides, which is git's "last match wins, deeper file wins".
func (m *Matcher) matchRules(rules [][]pattern, rel, name string, isDir bool) bool {
	for i := len(m.excludes) - 1; i >= 0; i-- {
		if p := &m.excludes[i]; p.match(rel, name, isDir) {
			return !p.negate
		}
	}
	for i := len(rules) - 1; i >= 0; i-- {
		ps := rules[i]
		for j := len(ps) - 1; j >= 0; j-- {
			if p := &ps[j]; p.match(rel, name, isDir) {
				return !p.negate
			}
		}
	}
	return false
}

// load compiles the ignore files of directory rel: .gitignore first so
// that .livesyncignore lines come later and win.
func (m *Matcher) load(rel string) ([]pattern, error) {
	var rules []pattern
	names := []string{FileName}
	if m.gitIgnore {
		names = []string{gitIgnoreName, FileName}
	}
	for _, name := range names {
		p := filepath.Join(m.root, filepath.FromSlash(rel), name)
		data, err := os.ReadFile(p)
		switch {
		case err == nil:
			rules = append(rules, parsePatterns(data, rel)...)
		case errors.Is(err, fs.ErrNotExist), isNotDir(err):
		default:
			return nil, fmt.Errorf("reading ignore file %q: %w", p, err)
		}
	}
	return rules, nil
}

// split splits a slash-separated relative path into its parent directory
// ("" at the top) and last component.
func split(rel string) (dir, name string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return "", rel
	}
	return rel[:i], rel[i+1:]
}

// isNotDir reports whether err says a path component is not a directory,
// as when the root is a single file.
func isNotDir(err error) bool {
	return errors.Is(err, syscall.ENOTDIR)
}
