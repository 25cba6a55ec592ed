package localtree

import (
	"io/fs"
	"sync"
	"time"
)

// UnreadableSet holds a mapping's local files that could be stat'ed but not
// opened (EACCES on a root-owned 0600 file that `docker run -v $PWD:/src`
// left behind, ESTALE on a network mount), each with the stat it had then.
// Plans leave such a file out, in every target, until its stat changes: a
// file that cannot be read is not a file that vanished while it was read, and
// sending it again at once would only fail again, as fast as the apiserver
// answers. It is shared by the mapping's targets (their workers run
// concurrently).
type UnreadableSet struct {
	mu sync.Mutex
	m  map[string]Sig
}

// Sig is what a chmod, chown or write changes in a file's stat.
type Sig struct {
	mode     fs.FileMode
	size     int64
	mtime    time.Time
	uid, gid uint32
}

func SigOf(fi fs.FileInfo) Sig {
	s := Sig{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime()}
	s.uid, s.gid, _ = OwnerOf(fi)
	return s
}

// Add records rel, whose open failed with err, and reports whether that is
// news: not recorded before with the stat it has now.
func (u *UnreadableSet) Add(fsys FS, name, rel string) bool {
	fi, err := fsys.Lstat(name)
	if err != nil {
		return false // gone or unreachable now: the next plan says which
	}
	sig := SigOf(fi)
	u.mu.Lock()
	defer u.mu.Unlock()
	if old, ok := u.m[rel]; ok && old == sig {
		return false
	}
	if u.m == nil {
		u.m = map[string]Sig{}
	}
	u.m[rel] = sig
	return true
}

// Holds reports whether rel is a file that could not be read and whose stat
// has not changed since; a changed one is forgotten, to be tried again.
func (u *UnreadableSet) Holds(fsys FS, name, rel string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	old, ok := u.m[rel]
	if !ok {
		return false
	}
	if fi, err := fsys.Lstat(name); err == nil && SigOf(fi) == old {
		return true
	}
	delete(u.m, rel)
	return false
}
