package filesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

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
	// tried holds what each try of the plan whose outcome the container
	// never told carried (see sent), in order. Where widen (the container hashes with sha256sum), the next
	// try's preconditions pass on those too: the container may hold what an
	// earlier try sent, the local side's own bytes, and a local save made
	// between the tries goes over them. Before, the retry reported them as
	// a container change, a conflict, and the save stayed home (TestModel
	// seeds 3756678103747597156 round 369, 7010222998496574562 round 428).
	tried []map[string]*[32]byte
	widen bool
	// unswap are the recoveries this apply begins with (see leftovers):
	// rels, and their remote.UnswapArgs.
	unswap, unswapArgs []string
	// swapped are the files this try's places and takes replace or delete
	// through apply.sh's swap, by rel, with their preconditions: what a
	// kill may leave half done (see leftovers).
	swapped map[string]string
}

// swap records that this try replaces or deletes rel through apply.sh's
// swap, checked against check (see leftovers).
func (p *sending) swap(rel, check string) {
	if p.swapped == nil {
		p.swapped = map[string]string{}
	}
	p.swapped[rel] = check
}

// sent returns, by rel, the content each copy of p carried as far as it is
// known after an apply whose outcome is not: the archive's hashes of what it
// sent whole, a patch's result, what a move or copy in the container held.
func (p *sending) sent(res applyResult) map[string]*[32]byte {
	out := maps.Clone(res.Sums)
	if out == nil {
		out = map[string]*[32]byte{}
	}
	maps.Copy(out, res.Carried) // what a file that changed while archived carried
	for rel, pt := range p.Patches {
		out[rel] = &pt.new
	}
	for rel, mv := range p.Moves {
		out[rel] = &mv.Sum
	}
	return out
}

// unacked records what a try whose outcome the container never told (a
// stream cut, a lost ack) carried (see tried).
func (p *sending) unacked(res applyResult) { p.tried = append(p.tried, p.sent(res)) }

// checkOf returns pc's check as this try makes it (see tried).
func (p *sending) checkOf(pc precondition) string {
	if !p.widen {
		return pc.check
	}
	var sums []*[32]byte
	for _, s := range p.tried {
		if sum := s[pc.rel]; sum != nil {
			sums = append(sums, sum) // WidenExpect leaves out repeats
		}
	}
	return remote.WidenExpect(pc.check, sums)
}

// precondition is apply.sh's check (remote.ExpectFile and the like) of
// what the container must hold at rel before the plan replaces or deletes
// it.
type precondition struct{ rel, check string }

// expectAt returns p's precondition for rel, if any.
func (p *sending) expectAt(rel string) []string {
	for _, pc := range p.expect {
		if pc.rel == rel {
			return []string{p.checkOf(pc)}
		}
	}
	return nil
}

// scriptArgsOf turns p into apply.sh's arguments: the planner's (see
// planner.ScriptArgs) and sync-back's preconditions, but those of the
// patches an earlier try applied. A file with one that the archive (whole,
// the copies in sent) replaces or the plan deletes is checked again at the
// moment it is replaced or deleted (remote.PlaceArgs, remote.TakeArgs):
// testing the preconditions first only tells that nothing changed before,
// and a container write that landed between the test and the tar was lost
// under it. The archive brings those files in beside their paths: staged
// returns their rels.
func scriptArgsOf(m *planner.Resolved, p *sending, sent []planner.Copy) (a *remote.ApplyArgs, staged map[string]bool) {
	a = planner.ScriptArgs(m, p.Plan)
	if len(p.expect) == 0 {
		return a, nil // no sync-back here: nothing to check again, nor to index per batch
	}
	whole, copied, deleted := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, c := range sent {
		whole[c.Rel] = c.Type == planner.TypeFile
	}
	for _, c := range p.Copies {
		copied[c.Rel] = true
	}
	for _, d := range p.Deletes {
		deleted[d] = true
	}
	for _, mv := range p.Moves {
		// The move takes it, after checking it (see remote.MoveArgs).
		delete(deleted, mv.Src)
	}
	taken := map[string]bool{}
	room := maxPlaces // the places all go in the tar's exec (see remote.ApplyArgs.Split)
	for _, pc := range p.expect {
		if _, done := p.patched[pc.rel]; done {
			continue
		}
		check := p.checkOf(pc)
		a.Expect = append(a.Expect, check)
		if m.File || !remote.Guards(check) {
			continue
		}
		switch {
		case whole[pc.rel] && remote.CanStage(pc.rel) && len(check) < room:
			if staged == nil {
				staged = map[string]bool{}
			}
			staged[pc.rel] = true
			a.Places = append(a.Places, remote.PlaceArgs(check))
			room -= len(check) + 2
		case deleted[pc.rel] && !copied[pc.rel]:
			taken["./"+pc.rel] = true
			a.Takes = append(a.Takes, remote.TakeArgs(check))
		default:
			continue
		}
		p.swap(pc.rel, check)
	}
	if len(taken) > 0 {
		a.Deletes = slices.DeleteFunc(a.Deletes, func(d string) bool { return taken[d] })
	}
	return a, staged
}

// maxPlaces bounds the bytes of one batch's places (see scriptArgsOf): the
// files beyond it are extracted in place after the preconditions' test, as
// any other file is.
const maxPlaces = remote.MaxArgBytes / 2

// stage renames the members of files whose rels are staged to their staged
// names (see scriptArgsOf).
func stage(files []tarstream.File, staged map[string]bool) []tarstream.File {
	for i := range files {
		if staged[files[i].Rel] {
			files[i].Name = remote.StagedName(files[i].Name)
		}
	}
	return files
}

// applyResult is what one apply sent.
type applyResult struct {
	tarstream.Result
	deleted int
	// replaced holds directories (rels) where the container had a symlink,
	// now an empty directory: what the index holds under them is gone.
	replaced []string
	// late holds the paths found changed as the batch was about to replace
	// or delete them (see scriptArgsOf), which it left as they were: the
	// rest of it was applied.
	late []remote.Changed
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
	p.swapped = nil
	unswap := p.unswapArgs
	if len(unswap) > 0 && len(p.Patches) > 0 {
		// The recoveries go first, before a patch's precondition is tested.
		a := &remote.ApplyArgs{Root: string(m.RemoteDir()), Unswap: unswap}
		if m.File {
			a.File = "./" + m.RemoteName("")
		}
		if _, err := remote.Apply(ctx, ex, t, "recovering files", a, nil); err != nil {
			return res, withMapping(err, t, m)
		}
		unswap = nil
	}
	moves, sent := planner.MoveArgs(m, p.Plan)
	sent, err := applyPatches(ctx, ex, t, m, p, sent)
	if err != nil {
		return res, err
	}
	// After the patches: the preconditions of those applied were checked
	// in their own execs.
	args, staged := scriptArgsOf(m, p, sent)
	args.Unswap = unswap
	args.Moves, args.Tar = moves, len(sent) > 0
	args.Gz = o.Gzip && args.Tar
	for _, a := range args.Split(remote.MaxArgBytes) {
		if a.Empty() {
			continue // all of it patched (see applyPatches)
		}
		if !a.Tar {
			replaced, err := remote.Apply(ctx, ex, t, "deleting files", a, nil)
			res.replaced = append(res.replaced, rels(replaced)...)
			if err = res.applied(err); err != nil {
				return res, withMapping(err, t, m)
			}
			continue
		}
		r, wait := tarstream.Stream(stage(planner.TarFiles(sent), staged), tarstream.Options{Gzip: a.Gz, Owner: o.Owner})
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
		if err = res.applied(err); err != nil {
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
	for _, c := range res.late {
		for _, cp := range p.Copies {
			if "./"+cp.Name == c.Name && res.Sums[cp.Rel] != nil {
				delete(res.Sums, cp.Rel) // not what the container holds
				res.Files--
			}
		}
	}
	return res, nil
}

// applied keeps in r the paths an apply that did the rest of its batch
// found changed (see scriptArgsOf), and returns err without them.
func (r *applyResult) applied(err error) error {
	var ce *remote.ChangedError
	if errors.As(err, &ce) && ce.Applied {
		r.late = append(r.late, ce.Changed...)
		return nil
	}
	return err
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
