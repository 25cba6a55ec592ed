package filesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"

	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// sending is a plan on its way into a target: the planner's Plan and what
// the engine adds to it there, the copies it sends as deltas and
// sync-back's preconditions. One lives through all tries of one apply.
type sending struct {
	*planner.Plan
	// Patches are copies, by rel, sent as deltas of the file the container
	// holds there (see findPatches).
	Patches map[string]*patch
	// patched are the patches the container applied, by rel: a later try
	// of the plan (a retry, the guard's after a conflict) neither patches
	// nor checks them again.
	patched map[string]patched
	expect  []precondition // sync-back's (see applyGuarded)
}

// sent returns, by rel, the content each copy of p carried as far as it is
// known after an apply whose outcome is not: the archive's hashes of what it
// sent whole, a patch's result, what a move or copy in the container held.
func (p *sending) sent(res applyResult) map[string]*[32]byte {
	out := maps.Clone(res.Sums)
	if out == nil {
		out = map[string]*[32]byte{}
	}
	for rel, pt := range p.Patches {
		out[rel] = &pt.new
	}
	for rel, mv := range p.Moves {
		out[rel] = &mv.Sum
	}
	return out
}

// precondition is apply.sh's check (remote.ExpectFile and the like) of
// what the container must hold at rel before the plan replaces or deletes
// it.
type precondition struct{ rel, check string }

// expectAt returns p's precondition for rel, if any.
func (p *sending) expectAt(rel string) []string {
	for _, pc := range p.expect {
		if pc.rel == rel {
			return []string{pc.check}
		}
	}
	return nil
}

// scriptArgsOf turns p into apply.sh's arguments: the planner's (see
// planner.ScriptArgs) and sync-back's preconditions, but those of the
// patches an earlier try applied.
func scriptArgsOf(m *planner.Resolved, p *sending) *remote.ApplyArgs {
	a := planner.ScriptArgs(m, p.Plan)
	for _, pc := range p.expect {
		if _, done := p.patched[pc.rel]; !done {
			a.Expect = append(a.Expect, pc.check)
		}
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
func (r applyResult) forgetReplaced(idx *planner.Index) map[string]struct{} {
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
func apply(ctx context.Context, ex Executor, t Target, m *planner.Resolved, p *sending, o tarstream.Options) (applyResult, error) {
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
func applyOnce(ctx context.Context, ex Executor, t Target, m *planner.Resolved, p *sending, o tarstream.Options) (applyResult, error) {
	res := applyResult{deleted: len(p.Deletes)}
	moves, sent := planner.MoveArgs(m, p.Plan)
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
		r, wait := tarstream.Stream(planner.TarFiles(sent), tarstream.Options{Gzip: a.Gz, Owner: o.Owner})
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
func withMapping(err error, t Target, m *planner.Resolved) error {
	var se *remote.SyncError
	if errors.As(err, &se) && errors.Is(se.Kind, remote.ErrTypeConflict) {
		c := planner.RemoteIsDir
		if remote.IsNotDirConflict(se) {
			c = planner.RemoteNotDir
		}
		ce := planner.ConflictError(m, fmt.Sprintf("container %q of pod %q", t.Container, t.Pod), c)
		ce.Target, ce.Op, ce.Stderr, ce.Err = t, se.Op, se.Stderr, se.Err
		return ce
	}
	return err
}
