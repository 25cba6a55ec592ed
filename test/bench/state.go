//go:build bench

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// measureState is issue 31's row, on the 10,000-file tree and on 100,000 small files: a session restart with nothing
// changed, from the ancestor the last session saved (a three-way start: the container listed
// without hashes, the local tree by stat alone), against today's cold start of the same
// session with no saved state (the container listed with hashes, every local file of the same
// size hashed), each timed from the process's start to its `watching` event and to its
// initial-sync event (converged), in alternating order against the same container, which
// holds the tree throughout. Each start is checked to send nothing and to start from the
// ancestor it should.
func (b *bench) measureState(ctx context.Context) error {
	if err := b.measureStateOf(ctx, "st", b.initialTree, 10_000, 0.2); err != nil {
		return err
	}
	tree := filepath.Join(b.tmp, "state-100k")
	if err := watchTree(tree); err != nil {
		return err
	}
	return b.measureStateOf(ctx, "st100", tree, 100_000, 0.1)
}

// measureStateOf is measureState's pair on one tree of files files, synced into deploy/deploy's
// /app; want is the target ratio. The last warm and the last cold start write CPU profiles,
// kept in _output as cpu-state-{warm,cold}-<files>.pprof.
func (b *bench) measureStateOf(ctx context.Context, deploy, tree string, files int, want float64) error {
	if _, err := b.c.targets(ctx, deploy, 1); err != nil {
		return err
	}
	saved := filepath.Join(b.tmp, "state-saved-"+deploy)
	profiles := map[bool]string{true: filepath.Join(b.tmp, deploy+"-warm.pprof"), false: filepath.Join(b.tmp, deploy+"-cold.pprof")}
	start := func(state string, profile string) (watching, converged time.Duration, ev sessiontest.Event, err error) {
		t0 := time.Now()
		s := b.newSession().StateDir(state).Args("deploy/"+deploy).Map(tree, "/app").Env("LIVESYNC_CPU_PROFILE=" + profile).Start()
		defer s.Stop()
		if _, err = s.Next("watching", 5*time.Minute); err != nil {
			return
		}
		watching = time.Since(t0)
		var in sessiontest.Event
		if in, err = s.Next("initial-sync", 5*time.Minute); err != nil {
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
		b.logf("state start, %d files (%s): %v (load %s)", files, filepath.Base(state), when, loadAvg())
		if in.Files != 0 || in.Deleted != 0 {
			err = fmt.Errorf("a start with nothing changed sent %d files, deleted %d", in.Files, in.Deleted)
		}
		return
	}
	// The first session copies the tree and saves its ancestor.
	s := b.newSession().StateDir(saved).Args("deploy/"+deploy).Map(tree, "/app").Start()
	if _, err := s.Next("initial-sync", 5*time.Minute); err != nil {
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
		w, c, ev, err := start(state, profiles[isWarm])
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
	for isWarm, from := range profiles {
		kept, err := keepProfile(from, fmt.Sprintf("cpu-state-%s-%d.pprof", map[bool]string{true: "warm", false: "cold"}[isWarm], files))
		if err != nil {
			return err
		}
		b.logf("%s: %s", kept, cpuTop(ctx, b.c.binary, kept, 25))
	}
	b.logf("state, %d files: restart converged %v, cold %v; watching %v, cold %v", files, warm, cold, warmW, coldW)
	n := fmt.Sprintf(", %s files, nothing changed (n=%d; ratio: median of per-pair ratios)", thousands(files), reps)
	r := b.res.pair("session restart from saved state, to converged"+n, secs(median(warm)), "s", "cold start (no saved state)", secs(median(cold)))
	rt := pairRatio(warm, cold)
	r.Ratio = ref(rt)
	r.target(fmt.Sprintf("≤ %.1f× cold start", want), rt <= want)
	r = b.res.pair("session restart from saved state, to watching"+n, secs(median(warmW)), "s", "cold start (no saved state)", secs(median(coldW)))
	r.Ratio = ref(pairRatio(warmW, coldW))
	return nil
}

// cpuTop is the top n lines of `go tool pprof -top -cum` of a CPU profile, or why not.
func cpuTop(ctx context.Context, binary, profile string, n int) string {
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount", strconv.Itoa(n), binary, profile).Output()
	if err != nil {
		return fmt.Sprintf("go tool pprof: %v", err)
	}
	return "\n" + string(out)
}

// thousands prints n with commas: 100000 → 100,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
