package filesync

import (
	"context"
	"errors"
	"fmt"

	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// ErrNotSynced: Visit's target is gone, another container now, or its initial
// sync has not converged (or holds deletes back), so its index is no ancestor.
var ErrNotSynced = errors.New("the container's initial sync has not converged")

// Visit is what a function run by Engine.Visit may use until it returns: the
// target's executor (bounded, with the exec deadline) and, per mapping, its index.
type Visit struct {
	Ctx    context.Context
	Target Target
	Exec   Executor
	e      *Engine
	tg     *target
}

// Mapping returns mapping i's absolute local root and remote directory, and
// whether rel (or a parent) is ignored there; ok is false for a file mapping.
func (v *Visit) Mapping(i int) (root string, remote planner.RemotePath, ignored func(rel string, isDir bool) bool, ok bool) {
	m := v.e.maps[i]
	return m.Root, m.Remote, m.Ignored, !m.File
}

// Mappings returns how many mappings there are.
func (v *Visit) Mappings() int { return len(v.e.maps) }

// Entry returns what the target confirmed at rel under mapping i: a three-way
// decision's ancestor; known is false while its state there is unknown (see Index).
func (v *Visit) Entry(i int, rel string) (e planner.Entry, ok, known bool) {
	e, ok = v.tg.idx[i].Get(rel)
	return e, ok, !e.Stale()
}

// Generation returns a number that changes whenever what the target confirmed under mapping i
// changes: a receipt taken at one generation still holds while it is the same.
func (v *Visit) Generation(i int) uint64 { return v.tg.idx[i].Gen() }

// Record records that the target and the local side both hold e at rel
// (a file that came back from it): no plan sends it back there.
func (v *Visit) Record(i int, rel string, e planner.Entry) { v.tg.idx[i].Put(rel, e) }

// Gone records whether the target no longer holds rel (and what is under
// it) under mapping i, as a complete scan of it found, while the entry stays as the
// ancestor (a container delete that does not come home): the mass-delete
// guard weighs only what the target holds (see planner.Index.Gone).
func (v *Visit) Gone(i int, rel string, gone bool) { v.tg.idx[i].Gone(rel, gone) }

// Forget records that neither side holds rel, or anything under it.
func (v *Visit) Forget(i int, rel string) { v.tg.idx[i].DeleteTree(rel) }

// Replan has the engine plan rel under mapping i again once fn returns, as
// if it changed locally: a delete that the guard's precondition held until
// a pass looked at what it would take (see pkg/syncback).
func (v *Visit) Replan(i int, rel string) {
	v.tg.mu.Lock()
	v.tg.due[i].add(rel)
	v.tg.mu.Unlock()
	v.tg.signal()
}

// Visit runs fn on t's worker between its batches, so that nothing fn does in
// the container overlaps an upload to it, and returns fn's error or
// ErrNotSynced (also wrapping fn's error where t went while fn ran: Visit
// returns only once fn did). Without a running worker (--once) fn runs on the
// caller's goroutine.
func (e *Engine) Visit(ctx context.Context, t Target, fn func(*Visit) error) error {
	e.mu.Lock()
	tg, ok := e.targets[t.String()]
	running := e.runCtx != nil && !e.closing
	e.mu.Unlock()
	if !ok || tg.ContainerID != t.ContainerID || tg.ctx == nil {
		return ErrNotSynced
	}
	done := make(chan error, 1)
	run := func() {
		tg.mu.Lock()
		synced := tg.synced
		tg.mu.Unlock()
		if !synced || tg.holding() || tg.ctx.Err() != nil {
			done <- ErrNotSynced
			return
		}
		done <- fn(&Visit{Ctx: tg.ctx, Target: tg.Target, Exec: e.exec, e: e, tg: tg})
	}
	if !running {
		run()
		return <-done
	}
	select {
	case tg.visits <- run:
	case <-tg.ctx.Done():
		return ErrNotSynced
	case <-ctx.Done():
		return ctx.Err()
	}
	// The worker took run and runs it now: wait for it even when the target goes meanwhile
	// (fn's Ctx ends then), so that what fn wrote is the caller's to read once Visit returns.
	// What fn failed at once the target went is that: ErrNotSynced, as before it ran.
	err := <-done
	if err != nil && tg.ctx.Err() != nil && !errors.Is(err, ErrNotSynced) {
		return fmt.Errorf("%w (%w)", ErrNotSynced, err)
	}
	return err
}

// Upload is a path that a batch is about to replace or delete in a target,
// with what the target confirmed there (Has false: nothing; Known false:
// unknown, see Index); for a directory it deletes, Entries counts what the
// index holds at and under it.
type Upload struct {
	Target     Target
	Mapping    int
	Rel, Local string
	Ancestor   planner.Entry
	Has, Known bool
	Entries    int
	// Maybe, where Known is false, is what the container may hold at Rel
	// after plans it never confirmed (nil: nothing), when that is known
	// (see planner.Index.Maybe).
	Maybe []*[32]byte
}

// UploadGuard holds a batch's uploads to what the target confirmed
// (sync-back's upload precondition, see pkg/syncback); WithUploadGuard sets it.
type UploadGuard interface {
	// Expect returns apply.sh's precondition for u (remote.ExpectFile or
	// remote.ExpectAbsent, "" for none), or skip: u stays out of the batch.
	Expect(u Upload) (check string, skip bool)
	// Changed says u's precondition failed: the batch went without it.
	Changed(u Upload, now remote.Changed)
}

// Skipper is an UploadGuard that can tell, before a plan is guarded, the
// deletes its Expect would skip (see planner.Opts.Skip).
type Skipper interface {
	// Skips reports whether the batch leaves the delete of rel (local, its
	// local path) under mapping i in t out.
	Skips(t Target, mapping int, rel, local string) bool
}

// skips returns the planner's Skip for mapping i in tg, nil where the guard
// skips nothing.
func (e *Engine) skips(tg *target, i int, m *planner.Resolved) func(string) bool {
	s, ok := e.guard.(Skipper)
	if !ok || m.File {
		return nil
	}
	return func(rel string) bool { return s.Skips(tg.Target, i, rel, m.LocalPath(rel)) }
}

// WithUploadGuard sets the engine's UploadGuard.
func WithUploadGuard(g UploadGuard) Option { return func(e *Engine) { e.guard = g } }

// applyGuarded applies a batch's plan p with the guard's preconditions for
// its files (those under a deleted directory too, and the directory); a path whose
// precondition fails, or that the guard skips, is left out with what
// stands on it, and the rest goes again. A file sent as a patch goes in an
// exec of its own, which checks its precondition before the patch (see
// applyPatches): whatever carries a file's bytes, nothing replaces it
// before its check, in the same exec.
func (e *Engine) applyGuarded(tg *target, i int, m *planner.Resolved, p *sending) (applyResult, error) {
	return e.applyGuardedOn(tg, tg.idx[i], i, m, p)
}

// applyGuardedOn is applyGuarded against x, what the target confirmed (a
// start's saved ancestor, before tg has an index).
func (e *Engine) applyGuardedOn(tg *target, x *planner.Index, i int, m *planner.Resolved, p *sending) (applyResult, error) {
	for e.guard != nil && !m.File {
		ups, owner, skip := map[string]Upload{}, map[string]string{}, map[string]bool{}
		ask := func(rel, own string) {
			a, has := x.Get(rel)
			u := Upload{Target: tg.Target, Mapping: i, Rel: rel, Local: m.LocalPath(rel), Ancestor: a, Has: has, Known: !a.Stale()}
			if !u.Known {
				u.Maybe, _ = x.Maybe(rel)
			}
			if a.Type == planner.TypeDir {
				u.Entries = x.CountTree(rel)
			}
			if check, sk := e.guard.Expect(u); sk {
				skip[own] = true
			} else if check != "" {
				p.expect, ups["./"+rel], owner["./"+rel] = append(p.expect, precondition{rel, check}), u, own
			}
		}
		p.expect = nil
		for _, c := range p.Copies {
			if _, done := p.patched[c.Rel]; c.Type != planner.TypeDir && !done {
				// A patch applied by an earlier try was checked in its
				// own exec: the container holds it now, not the ancestor.
				ask(c.Rel, c.Rel)
			}
		}
		for _, d := range p.Deletes {
			x.Walk(d, func(rel string) {
				if a, ok := x.Get(rel); ok && (a.Type != planner.TypeDir || rel == d) {
					ask(rel, d)
				}
			})
		}
		if p.Drop(skip); p.Empty() && len(p.Rmdirs) == 0 {
			return applyResult{}, nil
		}
		res, err := e.applyPlan(tg.ctx, e.batchExec(tg, p.Plan), tg.Target, m, p, e.batchGzip(tg, p.Plan), nil)
		if err == nil && len(res.late) > 0 {
			// Done but these, found changed as they were about to be
			// replaced or deleted and left as they were: out of the plan,
			// which is recorded as sent.
			gone := map[string]bool{}
			for _, c := range res.late {
				if u, ok := ups[c.Name]; ok {
					e.guard.Changed(u, c)
					gone[owner[c.Name]] = true
				}
			}
			p.Drop(gone)
			res.deleted = len(p.Deletes)
		}
		var ce *remote.ChangedError
		if !errors.As(err, &ce) {
			return res, err
		}
		gone := map[string]bool{}
		for _, c := range ce.Changed {
			if u, ok := ups[c.Name]; ok {
				e.guard.Changed(u, c)
				gone[owner[c.Name]] = true
			}
		}
		if len(gone) == 0 {
			return res, err
		}
		p.Drop(gone)
	}
	return e.applyPlan(tg.ctx, e.batchExec(tg, p.Plan), tg.Target, m, p, e.batchGzip(tg, p.Plan), nil)
}
