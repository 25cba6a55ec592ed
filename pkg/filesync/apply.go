package filesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// scriptArgsOf turns p into apply.sh's arguments.
func scriptArgsOf(m *mapping, p *Plan) *remote.ApplyArgs {
	a := &remote.ApplyArgs{Root: string(m.remoteDir()), Tar: len(p.Copies) > 0}
	for _, pc := range p.expect {
		if _, done := p.patched[pc.rel]; !done {
			a.Expect = append(a.Expect, pc.check)
		}
	}
	if m.file {
		a.File = "./" + m.remoteName("")
	}
	for _, d := range p.Deletes {
		a.Deletes = append(a.Deletes, "./"+m.remoteName(d))
	}
	if m.file {
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
		if fi, err := os.Lstat(m.localPath(rel)); err == nil && fi.IsDir() && localtree.Perm(fi)&0o700 != 0o700 {
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

// applyResult is what one apply sent.
type applyResult struct {
	tarstream.Result
	deleted int
	// replaced holds directories (rels) where the container had a symlink,
	// now an empty directory: what the index holds under them is gone.
	replaced []string
}

// forgetReplaced makes idx forget what it holds under directories that
// apply found as symlinks and replaced, and returns them to be planned
// again, so their contents are sent again.
func (r applyResult) forgetReplaced(idx *Index) map[string]struct{} {
	if len(r.replaced) == 0 {
		return nil
	}
	out := make(map[string]struct{}, len(r.replaced))
	for _, rel := range r.replaced {
		idx.DeleteTree(rel)
		out[rel] = struct{}{}
	}
	return out
}

// apply makes one plan happen in one target: usually one exec carrying the
// paths in argv and the tar on stdin; paths beyond the argv budget go in
// exec calls of their own, before or after the one with the tar as their
// step requires. Every attempt streams a fresh archive, so it can be retried
// as a whole. With gz the archive goes gzip-compressed: only where the
// listing found gzip (see compressInitial).
//
// Copies the container holds already (p.Moves) are moved or copied there;
// where it refuses them, the plan goes again without them.
func apply(ctx context.Context, ex Executor, t Target, m *mapping, p *Plan, o tarstream.Options) (applyResult, error) {
	res, err := applyOnce(ctx, ex, t, m, p, o)
	if len(p.Moves) > 0 && remote.IsMoveRefused(err) {
		p.Moves = nil
		again, err := applyOnce(ctx, ex, t, m, p, o)
		again.replaced = append(res.replaced, again.replaced...)
		return again, err
	}
	return res, err
}

// applyOnce is apply's one try.
func applyOnce(ctx context.Context, ex Executor, t Target, m *mapping, p *Plan, o tarstream.Options) (applyResult, error) {
	res := applyResult{deleted: len(p.Deletes)}
	moves, sent := moveArgs(m, p)
	sent, err := applyPatches(ctx, ex, t, m, p, sent)
	if err != nil {
		return res, err
	}
	// After the patches: the preconditions of those applied were checked
	// in their own execs.
	args := scriptArgsOf(m, p)
	args.Moves, args.Tar = moves, len(sent) > 0
	args.Gz = o.Gzip && args.Tar
	for _, a := range args.Split(remote.MaxArgBytes) {
		if a.Empty() {
			continue // all of it patched (see applyPatches)
		}
		if !a.Tar {
			replaced, err := remote.Apply(ctx, ex, t, "deleting files", a, nil)
			res.replaced = append(res.replaced, rels(replaced)...)
			if err != nil {
				return res, withMapping(err, t, m)
			}
			continue
		}
		r, wait := tarstream.Stream(filesOf(sent), tarstream.Options{Gzip: a.Gz, Owner: o.Owner})
		replaced, err := remote.Apply(ctx, ex, t, "copying files", a, r)
		_ = r.Close()
		ares, aerr := wait()
		res.Result = ares
		res.replaced = append(res.replaced, rels(replaced)...)
		if aerr != nil && !errors.Is(aerr, io.ErrClosedPipe) {
			// A local read failure explains a remote one better than the
			// remote's view of a truncated stream.
			return res, aerr
		}
		// A closed pipe only means the remote side stopped reading, possibly
		// before the trailing end-of-archive blocks; its own result decides.
		if err != nil {
			return res, withMapping(err, t, m)
		}
	}
	for rel, pd := range p.patched {
		if res.Sums == nil {
			res.Sums = map[string]*[32]byte{}
		}
		res.Sums[rel] = &pd.sum
		res.Files++
		res.Bytes += pd.bytes
	}
	if len(moves) > 0 {
		// Confirmed by the same ack as the archive: their sums are the
		// ones the container checked at their sources.
		if res.Sums == nil {
			res.Sums = map[string]*[32]byte{}
		}
		for _, c := range p.Copies {
			if mv, ok := p.Moves[c.Rel]; ok {
				res.Sums[c.Rel] = &mv.Sum
			}
		}
		res.Files += len(moves)
	}
	return res, nil
}

// filesOf is what the tar stream needs of copies.
func filesOf(copies []Copy) []tarstream.File {
	out := make([]tarstream.File, len(copies))
	for i, c := range copies {
		out[i] = tarstream.File{Rel: c.Rel, Name: c.Name, Src: c.Src, Type: c.Type, Mode: c.Mode, Size: c.Size, MTime: c.MTime, Link: c.Link}
	}
	return out
}

// rels keeps the directories apply.sh reported replaced that are rels.
func rels(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if localtree.ValidRel(d) && d != "" {
			out = append(out, d)
		}
	}
	return out
}

// withMapping rewrites a type conflict at m's root, which the container
// reports without knowing the mapping, as the one line that names it.
func withMapping(err error, t Target, m *mapping) error {
	var se *remote.SyncError
	if errors.As(err, &se) && errors.Is(se.Kind, remote.ErrTypeConflict) {
		c := remoteIsDir
		if remote.IsNotDirConflict(se) {
			c = remoteNotDir
		}
		ce := conflictError(m, fmt.Sprintf("container %q of pod %q", t.Container, t.Pod), c)
		ce.Target, ce.Op, ce.Stderr, ce.Err = t, se.Op, se.Stderr, se.Err
		return ce
	}
	return err
}
