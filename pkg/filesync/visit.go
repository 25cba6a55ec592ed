package filesync

import (
	"context"
	"errors"
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
func (v *Visit) Mapping(i int) (root string, remote RemotePath, ignored func(rel string, isDir bool) bool, ok bool) {
	m := v.e.maps[i]
	return m.root, m.Remote, m.ignored, !m.file
}

// Mappings returns how many mappings there are.
func (v *Visit) Mappings() int { return len(v.e.maps) }

// Entry returns what the target confirmed at rel under mapping i: a three-way
// decision's ancestor; known is false while its state there is unknown (see Index).
func (v *Visit) Entry(i int, rel string) (e Entry, ok, known bool) {
	e, ok = v.tg.idx[i].Get(rel)
	return e, ok, !e.stale
}

// Record records that the target and the local side both hold e at rel
// (a file that came back from it): no plan sends it back there.
func (v *Visit) Record(i int, rel string, e Entry) { v.tg.idx[i].Put(rel, e) }

// Forget records that neither side holds rel, or anything under it.
func (v *Visit) Forget(i int, rel string) { v.tg.idx[i].DeleteTree(rel) }

// Visit runs fn on t's worker between its batches, so that nothing fn does in
// the container overlaps an upload to it, and returns fn's error or
// ErrNotSynced. Without a running worker (--once) fn runs on the caller's goroutine.
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
	select {
	case err := <-done:
		return err
	case <-tg.ctx.Done():
		return ErrNotSynced
	}
}
