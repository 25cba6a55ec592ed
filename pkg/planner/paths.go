package planner

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
)

// LocalPath is a path on the machine running the plugin, in the OS's own
// syntax (package filepath).
type LocalPath string

// RemotePath is an absolute, cleaned POSIX path inside a container (package path).
type RemotePath string

// Mapping is one LOCAL:REMOTE pair: the local file or directory Local is kept
// in sync with Remote in every target container.
type Mapping struct {
	Local  LocalPath
	Remote RemotePath
}

// String returns the mapping as LOCAL:REMOTE.
func (m Mapping) String() string { return string(m.Local) + ":" + string(m.Remote) }

// ParseMapping parses LOCAL:REMOTE. The split is at the last colon followed by
// a slash, so Windows paths (C:\src:/app, C:/src:/app, .\src:/app) parse.
// REMOTE must be absolute; it is cleaned, and "/" is refused because mirroring
// into the container's root would delete the image.
func ParseMapping(s string) (Mapping, error) {
	i := strings.LastIndex(s, ":/")
	if i < 0 {
		return Mapping{}, fmt.Errorf("parsing mapping %q: want LOCAL:REMOTE with an absolute REMOTE path, e.g. ./src:/app", s)
	}
	local, remote := s[:i], s[i+1:]
	switch {
	case local == "":
		return Mapping{}, fmt.Errorf("parsing mapping %q: LOCAL is empty", s)
	case strings.ContainsRune(s, 0):
		return Mapping{}, fmt.Errorf("parsing mapping %q: contains a NUL byte", s)
	case isBareDrive(local):
		// C: alone is that drive's current directory, whatever it is.
		return Mapping{}, fmt.Errorf("parsing mapping %q: LOCAL %q is only a drive; write %s\\ for its root or %s. for its current directory", s, local, local, local)
	}
	remote = path.Clean(remote)
	if remote == "/" {
		return Mapping{}, fmt.Errorf("parsing mapping %q: refusing to sync into the container's root directory; name a directory such as /app", s)
	}
	return Mapping{Local: LocalPath(filepath.Clean(local)), Remote: RemotePath(remote)}, nil
}

// isBareDrive reports whether p is a Windows drive letter and colon and
// nothing else ("C:"); only Windows has drive letters.
func isBareDrive(p string) bool {
	v := filepath.VolumeName(p)
	return len(v) == 2 && v == p
}

// ValidateMappings checks that every LOCAL exists and that no two REMOTE paths
// overlap (one inside the other). It returns one line per problem.
func ValidateMappings(ms []Mapping) error {
	var errs []error
	for _, m := range ms {
		if _, err := os.Stat(string(m.Local)); err != nil {
			errs = append(errs, fmt.Errorf("mapping %q: local path %q: %w", m, m.Local, err))
		}
	}
	for i, a := range ms {
		for _, b := range ms[i+1:] {
			if remoteOverlaps(a.Remote, b.Remote) {
				errs = append(errs, fmt.Errorf("mappings %q and %q: remote paths overlap; give each its own directory", a, b))
			}
		}
	}
	return errors.Join(errs...)
}

func remoteOverlaps(a, b RemotePath) bool {
	return a == b || isUnder(string(a), string(b)) || isUnder(string(b), string(a))
}

// isUnder reports whether slash path p is strictly inside dir.
func isUnder(p, dir string) bool {
	return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// Matcher says which paths not to sync. rel is slash-separated and relative to
// the mapping's local root; pkg/ignore implements it.
type Matcher interface {
	Match(rel string, isDir bool) bool
}

// Resolved is a Mapping resolved for use: absolute local path, and the
// directories scripts run in.
type Resolved struct {
	Mapping
	Root  string // absolute local root (file or directory)
	File  bool   // LOCAL is a single file: rel "" names it
	match Matcher
	localSide
	// unreadable is what could not be read, left out until it changes.
	Unreadable localtree.UnreadableSet
}

// Resolve resolves m for use. A LOCAL that is or goes through a symlink
// is resolved once, here: the planner Lstats the root and the archive opens
// files with O_NOFOLLOW, so a linked root would be planned as a link (an
// entry with no name for a directory, a dangling link in the container for
// a file). Changes must then name paths under the resolved root, as the
// watcher does when given the same resolved path. A LOCAL that does not
// exist keeps its absolute path: the initial sync reports it missing.
func Resolve(m Mapping, match Matcher) (*Resolved, error) {
	abs, err := filepath.Abs(string(m.Local))
	if err != nil {
		return nil, fmt.Errorf("resolving local path %q: %w", m.Local, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	fi, err := os.Stat(abs)
	mm := &Resolved{Mapping: m, Root: abs, File: err == nil && !fi.IsDir(), match: match}
	mm.probeRoot()
	return mm, nil
}

// RemoteDir is the directory the remote scripts cd into.
func (m *Resolved) RemoteDir() RemotePath {
	if m.File {
		return RemotePath(path.Dir(string(m.Remote)))
	}
	return m.Remote
}

// RemoteName turns rel into a name relative to RemoteDir.
func (m *Resolved) RemoteName(rel string) string {
	if m.File {
		return path.Base(string(m.Remote))
	}
	return rel
}

// LocalPath turns rel into an absolute local path.
func (m *Resolved) LocalPath(rel string) string {
	if rel == "" {
		return m.Root
	}
	return filepath.Join(m.Root, filepath.FromSlash(rel))
}

// Ignored reports whether rel or any of its parents is ignored. The root is
// never ignored.
func (m *Resolved) Ignored(rel string, isDir bool) bool {
	if m.match == nil || rel == "" {
		return false
	}
	for p := rel; p != ""; p = localtree.ParentRel(p) {
		if m.match.Match(p, p != rel || isDir) {
			return true
		}
	}
	return false
}
