package syncback

import (
	"crypto/sha256"
	"io/fs"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// file is a 0644 file holding content, with the bits of extra added.
func file(content string, extra fs.FileMode) Side {
	s := sha256.Sum256([]byte(content))
	return Side{Present: true, Type: remote.TypeFile, Mode: 0o644 | extra, Size: int64(len(content)), MTime: 100, Sum: &s}
}

func TestDecide(t *testing.T) {
	var (
		absent  = Side{}
		dir     = Side{Present: true, Type: remote.TypeDir, Mode: 0o755}
		link    = Side{Present: true, Type: remote.TypeSymlink, Link: "/etc/passwd"}
		a, b, c = file("a", 0), file("b", 0), file("c", 0)
		exec    = file("a", 0o111)
		old     = file("old", 0) // a size of its own: no stat of a, b or c is its
		unknown = Side{Present: true, Unknown: true, Type: remote.TypeFile}
		noSum   = func(s Side) Side { s.Sum = nil; return s }
		touched = func(s Side) Side { s.MTime++; return s }
		// unhashed is s listed by its stat alone (see Side.Unhashed)
		unhashed = func(s Side) Side { s.Sum, s.Unhashed = nil, true; return s }
	)
	for _, tc := range []struct {
		name               string
		anc, local, remote Side
		deletes            bool
		want               Action
	}{
		// remote unchanged since the ancestor: nothing comes back, whatever the local side did
		{"unchanged", a, a, a, false, Keep},
		{"local edit goes up, not down", a, b, a, false, Keep},
		{"local delete goes up", a, absent, a, true, Keep},
		{"both absent", absent, absent, absent, true, Keep},
		// remote changed, local unchanged: download
		{"remote edit", a, a, b, false, Download},
		{"remote mode change", a, a, exec, false, Download},
		{"remote umask differs: not a change", a, a, func() Side { s := a; s.Mode = 0o600; return s }(), false, Keep},
		{"remote new file", absent, absent, b, false, Download},
		{"remote new dir", absent, absent, dir, false, MakeDir},
		{"remote edit, container without sha256sum", noSum(a), a, noSum(touched(b)), false, Download},
		// both changed: a conflict, never overwritten
		{"both edited differently", a, b, c, false, Conflict},
		{"both created differently", absent, b, c, false, Conflict},
		{"local deleted, remote edited", a, absent, b, true, Conflict},
		{"local dir where the container wrote a file", absent, dir, b, false, Conflict},
		// a container file the scan listed without its hash (written during
		// it): nothing is decided until a scan hashes it
		{"unhashed remote, same size and mtime as the local save", old, b, unhashed(c), false, Keep},
		{"unhashed remote, local unchanged", old, old, unhashed(b), false, Keep},
		{"unhashed remote, local edited", old, b, unhashed(touched(c)), false, Keep},
		// both made the same change: the ancestor becomes it
		{"both edited alike", a, b, b, false, Record},
		{"both created alike", absent, b, b, false, Record},
		{"both made the dir", absent, dir, dir, false, Record},
		// type changes in the container never replace a local entry
		{"remote file became a dir", a, a, dir, false, Conflict},
		{"remote dir became a file", dir, dir, a, false, Conflict},
		// symlinks never come back
		{"remote symlink", absent, absent, link, false, Refuse},
		{"remote file replaced by a symlink", a, a, link, false, Refuse},
		// remote deletes: only with --sync-back-deletes, and never over a local change
		{"remote delete, deletes off", a, a, absent, false, Keep},
		{"remote delete, deletes on", a, a, absent, true, DeleteLocal},
		{"remote delete of a dir, deletes on", dir, dir, absent, true, DeleteLocal},
		{"remote delete, local edited: modification wins", a, b, absent, true, Keep},
		// an ancestor the container never confirmed decides nothing
		{"unknown ancestor", unknown, a, b, true, Keep},
		{"unknown ancestor, remote gone", unknown, a, absent, true, Keep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.anc, tc.local, tc.remote, tc.deletes); got != tc.want {
				t.Fatalf("Decide = %v, want %v", got, tc.want)
			}
		})
	}
}
