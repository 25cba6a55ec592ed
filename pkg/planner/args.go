package planner

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// ScriptArgs turns p into apply.sh's arguments for m's remote directory
// (see remote.ApplyArgs): what to check, delete, extract and chmod there.
// The engine adds the preconditions (Expect), the moves (see MoveArgs) and
// the patches.
func ScriptArgs(m *Resolved, p *Plan) *remote.ApplyArgs {
	a := &remote.ApplyArgs{Root: string(m.RemoteDir()), Tar: len(p.Copies) > 0}
	if m.File {
		a.File = "./" + m.RemoteName("")
	}
	for _, d := range p.Deletes {
		a.Deletes = append(a.Deletes, "./"+m.RemoteName(d))
	}
	if m.File {
		// The one entry sits directly in the remote directory: no parents
		// below the root, which the user chose and which is followed.
		return a
	}
	for _, d := range p.Rmdirs {
		a.Rmdirs = append(a.Rmdirs, "./"+d)
	}
	deleted := make(map[string]bool, len(p.Deletes))
	for _, d := range p.Deletes {
		deleted[d] = true
	}
	// goneWith: rel is deleted with a parent before the tar runs. Checking
	// it first would look through a link that the delete removes.
	goneWith := func(rel string) bool {
		for r := rel; r != ""; r = localtree.ParentRel(r) {
			if deleted[r] {
				return true
			}
		}
		return false
	}
	remoteOnly := make(map[string]bool, len(p.Rmdirs))
	for _, d := range p.Rmdirs {
		remoteOnly[d] = true
	}
	const (
		localDir      = 'p'
		remoteOnlyDir = 'k'
	)
	kind := map[string]byte{}
	mark := func(rel string, k byte) {
		if kind[rel] != localDir && !goneWith(rel) {
			kind[rel] = k
		}
	}
	modes := map[string]fs.FileMode{} // local modes of directories that are sent
	for _, c := range p.Copies {
		if c.Type == TypeDir {
			modes[c.Rel] = c.Mode
			mark(c.Rel, localDir)
		}
		for r := localtree.ParentRel(c.Rel); r != "" && kind[r] != localDir; r = localtree.ParentRel(r) {
			mark(r, localDir)
		}
	}
	for _, list := range [][]string{p.Deletes, p.Rmdirs} {
		for _, d := range list {
			for r := localtree.ParentRel(d); r != ""; r = localtree.ParentRel(r) {
				if remoteOnly[r] {
					mark(r, remoteOnlyDir)
				} else {
					mark(r, localDir)
				}
			}
		}
	}
	// Directories whose mode lacks u+rwx get it for the extraction, and
	// their own mode after it.
	fixed := map[string]fs.FileMode{}
	for rel, mode := range modes {
		if mode&0o700 != 0o700 {
			fixed[rel] = mode
		}
	}
	for rel, k := range kind {
		if _, ok := modes[rel]; ok || k != localDir {
			continue
		}
		if fi, err := os.Lstat(m.LocalPath(rel)); err == nil && fi.IsDir() && localtree.Perm(fi)&0o700 != 0o700 {
			fixed[rel] = localtree.Perm(fi)
		}
	}
	for _, rel := range slices.Sorted(maps.Keys(kind)) {
		a.Checks = append(a.Checks, string(kind[rel])+"./"+rel)
		if _, ok := fixed[rel]; ok {
			a.Checks = append(a.Checks, "w./"+rel)
		}
	}
	rels := slices.Sorted(maps.Keys(fixed))
	slices.Reverse(rels) // a child sorts after its parent
	for _, rel := range rels {
		a.Chmods = append(a.Chmods, fmt.Sprintf("%o./%s", fixed[rel], rel))
	}
	return a
}

// TarFiles is what the tar stream needs of copies.
func TarFiles(copies []Copy) []tarstream.File {
	out := make([]tarstream.File, len(copies))
	for i, c := range copies {
		out[i] = tarstream.File{Rel: c.Rel, Name: c.Name, Src: c.Src, Type: c.Type, Mode: c.Mode, Size: c.Size, MTime: c.MTime, Link: c.Link}
	}
	return out
}
