package planner

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"hash"
	"strings"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// remoteEntry is one entry of a container listing.
type remoteEntry = remote.Entry

// Listing is what the container has under a mapping's remote path, by rel.
type Listing struct {
	Alg     string // "sha256sum", "md5sum" or ""
	Gzip    bool   // `gzip -dc` works: an archive may be sent compressed
	Exists  bool
	notDir  bool                   // a directory mapping's root is something else
	Entries map[string]remoteEntry // by rel
	// unknown holds rels that were found but not described: stat failed,
	// or a FIFO, socket or device. Mirror keeps the directories holding them.
	unknown []string
}

// ListRemote lists m's remote side in t: the whole remote directory, or a
// file mapping's one entry; with stat alone, without hashes.
func ListRemote(ctx context.Context, ex remote.Executor, t remote.Target, m *Resolved, stat bool) (*Listing, error) {
	name := ""
	if m.File {
		name = m.RemoteName("")
	}
	list := remote.List
	if stat {
		list = remote.ListStat
	}
	rl, err := list(ctx, ex, t, string(m.RemoteDir()), name)
	if err != nil {
		return nil, err
	}
	return listingOf(rl, m), nil
}

// listingOf keeps what rl lists that belongs to m, by rel.
func listingOf(rl *remote.Listing, m *Resolved) *Listing {
	l := &Listing{Alg: rl.Alg, Gzip: rl.Gzip, Exists: rl.Exists, notDir: rl.NotDir, Entries: make(map[string]remoteEntry, len(rl.Names))}
	for name, e := range rl.Names {
		if rel, ok := remoteRel(m, name); ok {
			l.Entries[rel] = e
		}
	}
	for _, name := range rl.Unknown {
		if rel, ok := remoteRel(m, name); ok {
			l.unknown = append(l.unknown, rel)
		}
	}
	return l
}

// remoteRel turns a listed "./name" into a rel of m; false for anything that
// does not belong to m or is not a clean relative path.
func remoteRel(m *Resolved, name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "./")
	if !ok {
		return "", false
	}
	if m.File {
		return "", rest == m.RemoteName("")
	}
	return rest, rest != "" && localtree.ValidRel(rest)
}

// matchesRemote reports whether the container already has le. Permission bits
// are compared loosely (group/other write may differ by the remote umask).
// A file read to compare is counted on mt (nil: not counted).
func matchesRemote(m *Resolved, rel string, le *Entry, re remoteEntry, alg string, mt *Meter) bool {
	switch le.Type {
	case TypeSymlink:
		return le.Link == re.Link
	case TypeDir:
		return (le.Mode^re.Mode)&^0o022 == 0
	}
	if le.Size != re.Size || (le.Mode^re.Mode)&^0o022 != 0 {
		return false
	}
	if le.Sum != nil && alg == "sha256sum" && len(re.Sum) == sha256.Size {
		return [32]byte(re.Sum) == *le.Sum // hashed before, its stat unchanged since (see ApplyCache)
	}
	var h hash.Hash
	switch {
	case re.Sum == nil:
		return le.MTime.Unix() == re.MTime
	case alg == "sha256sum":
		h = sha256.New()
	case alg == "md5sum":
		h = md5.New()
	default:
		return false
	}
	sum, err := hashWith(m.LocalPath(rel), h)
	mt.hashed()
	if err != nil || !bytes.Equal(sum, re.Sum) {
		return false
	}
	if alg == "sha256sum" {
		le.Sum = (*[32]byte)(sum)
	}
	return true
}
