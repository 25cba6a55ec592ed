//go:build bench

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// measureState is issue 31's row: a session restart on the 10,000-file tree with nothing
// changed, from the ancestor the last session saved (a three-way start: the container listed
// without hashes, the local tree by stat alone), against today's cold start of the same
// session with no saved state (the container listed with hashes, every local file of the same
// size hashed), each timed from the process's start to its `watching` event and to its
// initial-sync event (converged), in alternating order against the same container, which
// holds the tree throughout. Each start is checked to send nothing and to start from the
// ancestor it should.
func (b *bench) measureState(ctx context.Context) error {
	if _, err := b.c.targets(ctx, "st", 1); err != nil {
		return err
	}
	saved := filepath.Join(b.tmp, "state-saved")
	start := func(state string) (watching, converged time.Duration, ev sessiontest.Event, err error) {
		t0 := time.Now()
		s := b.newSession().StateDir(state).Args("deploy/st").Map(b.initialTree, "/app").Start()
		defer s.Stop()
		if _, err = s.Next("watching", 3*time.Minute); err != nil {
			return
		}
		watching = time.Since(t0)
		var in sessiontest.Event
		if in, err = s.Next("initial-sync", 3*time.Minute); err != nil {
			return
		}
		converged = time.Since(t0)
		if in.Error != "" {
			err = fmt.Errorf("initial sync: %s", in.Error)
			return
		}
		var when []string
		for _, e := range s.Events() {
			if e.Type == "ancestor" {
				ev = e
			}
			if at, perr := time.Parse(time.RFC3339Nano, e.Time); perr == nil {
				when = append(when, fmt.Sprintf("%s %.0fms", e.Type, float64(at.Sub(t0).Microseconds())/1000))
			}
		}
		b.logf("state start (%s): %v", filepath.Base(state), when)
		if in.Files != 0 || in.Deleted != 0 {
			err = fmt.Errorf("a start with nothing changed sent %d files, deleted %d", in.Files, in.Deleted)
		}
		return
	}
	// The first session copies the tree and saves its ancestor.
	s := b.newSession().StateDir(saved).Args("deploy/st").Map(b.initialTree, "/app").Start()
	if _, err := s.Next("initial-sync", 3*time.Minute); err != nil {
		return err
	}
	s.Stop()
	var warm, cold, warmW, coldW []time.Duration
	reps := max(b.reps, 5)
	for i := range 2 * reps {
		isWarm := (i+i/2)%2 == 0 // warm, cold, cold, warm, warm, cold, ...
		state := saved
		if !isWarm {
			dir, err := os.MkdirTemp(b.tmp, "state-cold-")
			if err != nil {
				return err
			}
			state = dir
		}
		w, c, ev, err := start(state)
		if err != nil {
			return fmt.Errorf("start %d: %w", i, err)
		}
		switch want := map[bool]string{true: "saved", false: "none"}[isWarm]; {
		case ev.From != want:
			return fmt.Errorf("start %d from %q (%s), want %s", i, ev.From, ev.Reason, want)
		case isWarm && len(ev.Decided) != 0:
			return fmt.Errorf("start %d with nothing changed decided %v", i, ev.Decided)
		}
		if isWarm {
			warm, warmW = append(warm, c), append(warmW, w)
		} else {
			cold, coldW = append(cold, c), append(coldW, w)
		}
	}
	b.logf("state: restart converged %v, cold %v; watching %v, cold %v", warm, cold, warmW, coldW)
	n := fmt.Sprintf(", 10,000 files, nothing changed (n=%d; ratio: median of per-pair ratios)", reps)
	r := b.res.pair("session restart from saved state, to converged"+n, secs(median(warm)), "s", "cold start (no saved state)", secs(median(cold)))
	rt := pairRatio(warm, cold)
	r.Ratio = ref(rt)
	r.target("≤ 0.3× cold start", rt <= 0.3)
	r = b.res.pair("session restart from saved state, to watching"+n, secs(median(warmW)), "s", "cold start (no saved state)", secs(median(coldW)))
	r.Ratio = ref(pairRatio(warmW, coldW))
	return nil
}
