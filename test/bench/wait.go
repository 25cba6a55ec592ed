//go:build bench

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// waitReplicas is the deployment the wait phase syncs into: a receipt is for every replica.
const waitReplicas = 3

// waitRun is the wait phase's session on deploy/wt, the probes in its replicas and the state
// directory through which `kubectl livesync wait` finds the session.
type waitRun struct {
	b      *bench
	ts     []filesync.Target
	s      *sessiontest.Session
	ps     []*probe
	local  string
	state  string
	seed   uint64
	remote string

	// answered is, for each measured wait after a save, how long the session took to answer it
	// by its own account (the "in D" that ends wait's line): the rest of the wait is the process
	// and the time before the session was asked.
	answered []time.Duration
	// fails lists what went wrong with the waits: an exit code other than 0, a replica whose
	// sha256 is not the local file's once wait returned. Each is a failure of the phase.
	fails []string
}

// measureWait is `kubectl livesync wait --for=synced PATH` as a script or an agent runs it after
// each save: the built binary as a child process, from the synced directory, timed from the
// write to its return. Paired, round by round in alternating order, with the same save without
// the receipt: the moment the probes saw its bytes in all three replicas. After each wait every
// replica's sha256 of the file is read back: a wait that returned 0 while a replica holds other
// bytes is a failure of the phase. Then the same wait again with nothing pending, the receipt's
// fixed cost (a process, the session's socket, the local hash), paired with the binary's start
// alone (`version`).
func (b *bench) measureWait(ctx context.Context) error {
	w := &waitRun{b: b, local: filepath.Join(b.tmp, "wait"), state: filepath.Join(b.tmp, "wait-state"), remote: "/app/edit.txt", seed: uint64(time.Now().UnixNano())}
	for _, dir := range []string{w.local, w.state} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(w.local, "edit.txt"), []byte("start\n"), 0o644); err != nil {
		return err
	}
	var err error
	if w.ts, err = b.c.targets(ctx, "wt", waitReplicas); err != nil {
		return err
	}
	for _, t := range w.ts {
		if err := b.c.uploadProbe(ctx, t, b.probeBin); err != nil {
			return err
		}
	}
	w.s = b.newSession().StateDir(w.state).Args("deploy/wt").Map(w.local, "/app").Start()
	defer w.s.Stop()
	for range waitReplicas {
		if _, err := w.s.Next("initial-sync", 2*time.Minute); err != nil {
			return err
		}
	}
	for _, t := range w.ts {
		w.ps = append(w.ps, b.c.startProbe(ctx, t))
	}
	defer func() {
		for _, p := range w.ps {
			p.close()
		}
	}()

	n := max(b.edits/2, 5)
	var waits, visible, idle, starts []time.Duration
	for i := -2; i < n; i++ {
		d, base, err := alternate(i, func() (time.Duration, error) { return w.saveAndWait(ctx, i) }, w.saveVisible)
		if err != nil {
			return fmt.Errorf("edit %d: %w", i, err)
		}
		again, start, err := alternate(i, func() (time.Duration, error) { return w.waitAgain(ctx, i) }, func() (time.Duration, error) { return w.version(ctx) })
		if err != nil {
			return fmt.Errorf("edit %d, wait again: %w", i, err)
		}
		if i >= 0 {
			waits, visible = append(waits, d), append(visible, base)
			idle, starts = append(idle, again), append(starts, start)
		}
	}
	b.logf("save + wait --for=synced ms: %s", fmtDurations(waits))
	b.logf("of which the session's answer, by its own account, ms: %s (p50 %.0f, p95 %.0f)", fmtDurations(w.answered), msec(percentile(w.answered, 50)), msec(percentile(w.answered, 95)))
	b.logf("save→visible in all %d replicas ms: %s", waitReplicas, fmtDurations(visible))
	b.logf("wait with nothing pending ms: %s", fmtDurations(idle))
	b.logf("kubectl-livesync version ms: %s", fmtDurations(starts))
	for _, f := range w.fails {
		b.logf("FAIL %s", f)
	}
	for _, p := range []float64{50, 95} {
		b.res.pair(fmt.Sprintf("`wait --for=synced PATH` after a save, save→wait returned, %d replicas, p%.0f (n=%d)", waitReplicas, p, len(waits)), msec(percentile(waits, p)), "ms",
			fmt.Sprintf("the same save, save→visible in all %d replicas (probe), p%.0f", waitReplicas, p), msec(percentile(visible, p)))
	}
	b.res.pair(fmt.Sprintf("`wait --for=synced PATH` with nothing pending, the receipt's fixed cost: the process, the session's socket, the local hash, p50 (n=%d)", len(idle)), msec(median(idle)), "ms",
		"`kubectl-livesync version`, the binary's start alone, p50", msec(median(starts)))
	b.res.add(fmt.Sprintf("waits that exited non-zero, or after which a replica's sha256 was not the local file's (of %d waits after a save and %d with nothing pending, %d reads)", n+2, n+2, (n+2)*waitReplicas), float64(len(w.fails)), "failures").
		target("0", len(w.fails) == 0)
	if len(w.fails) > 0 {
		b.t.Errorf("wait: %d failures: %s", len(w.fails), strings.Join(w.fails, "; "))
	}
	return nil
}

// next is the content of the next save: small, and unlike every earlier one.
func (w *waitRun) next() []byte {
	w.seed++
	return textContent(w.seed, 64+int(w.seed%200))
}

// saveAndWait saves edit.txt and runs `wait --for=synced edit.txt` right after, as a script
// would, and returns the time from the write to wait's return; then checks every replica.
func (w *waitRun) saveAndWait(ctx context.Context, i int) (time.Duration, error) {
	data := w.next()
	w.idle()
	start := time.Now()
	if err := os.WriteFile(filepath.Join(w.local, "edit.txt"), data, 0o644); err != nil {
		return 0, err
	}
	out, code, err := w.runWait(ctx)
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	if code != 0 {
		w.fails = append(w.fails, fmt.Sprintf("edit %d: wait exited %d: %s", i, code, out))
	} else if i == -2 {
		w.b.logf("wait: %s", out)
	}
	if j := strings.LastIndex(out, " in "); i >= 0 && j >= 0 {
		if d, err := time.ParseDuration(out[j+len(" in "):]); err == nil {
			w.answered = append(w.answered, d)
		}
	}
	if err := w.check(ctx, i, data, out); err != nil {
		return 0, err
	}
	return took, w.settle()
}

// waitAgain runs the same wait with nothing pending and returns how long it took.
func (w *waitRun) waitAgain(ctx context.Context, i int) (time.Duration, error) {
	start := time.Now()
	out, code, err := w.runWait(ctx)
	took := time.Since(start)
	if err == nil && code != 0 {
		w.fails = append(w.fails, fmt.Sprintf("edit %d, nothing pending: wait exited %d: %s", i, code, out))
	}
	return took, err
}

// version runs `kubectl-livesync version` and returns how long it took: what starting the
// binary costs, without the socket.
func (w *waitRun) version(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if out, err := exec.CommandContext(ctx, w.b.c.binary, "version").CombinedOutput(); err != nil {
		return 0, fmt.Errorf("running %s version: %w: %s", w.b.c.binary, err, out)
	}
	return time.Since(start), nil
}

// runWait runs `kubectl-livesync wait --for=synced edit.txt` in the synced directory and
// returns its output (stdout, then stderr), its exit code and an error only when it did not run.
func (w *waitRun) runWait(ctx context.Context) (string, int, error) {
	cmd := exec.CommandContext(ctx, w.b.c.binary, "wait", "--for=synced", "--timeout", "60s", "edit.txt")
	cmd.Dir, cmd.Env = w.local, append(os.Environ(), "XDG_STATE_HOME="+w.state)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return strings.TrimSpace(out.String()), ee.ExitCode(), nil
	}
	return strings.TrimSpace(out.String()), 0, err
}

// check reads the file's sha256 in every replica and records each that is not data's.
func (w *waitRun) check(ctx context.Context, i int, data []byte, said string) error {
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	for _, t := range w.ts {
		out, err := w.b.c.sh(ctx, t, "sha256sum "+w.remote, nil)
		if err != nil {
			return err
		}
		if got, _, _ := strings.Cut(out, " "); got != want {
			w.fails = append(w.fails, fmt.Sprintf("edit %d: %s holds sha256 %q, the local file %s (wait said: %s)", i, t, got, want, said))
		}
	}
	return nil
}

// saveVisible saves edit.txt with the probes of every replica armed and returns the time from
// the write to the moment the last probe saw the bytes.
func (w *waitRun) saveVisible() (time.Duration, error) {
	data := w.next()
	w.idle()
	for _, p := range w.ps {
		if err := p.arm([]expect{{path: w.remote, data: data}}); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	if err := os.WriteFile(filepath.Join(w.local, "edit.txt"), data, 0o644); err != nil {
		return 0, err
	}
	var last time.Time
	for _, p := range w.ps {
		at, err := p.arrival(time.Minute)
		if err != nil {
			return 0, err
		}
		if at.After(last) {
			last = at
		}
	}
	return last.Sub(start), w.settle()
}

// idle pauses before a save until the session's coalescer counts as idle again (as
// latencyRun.idle), with a little jitter: both sides' saves then start alike, each cut once the
// save is complete. A save sooner after the last batch is taken for the next change of one long
// operation and waits out a quiet window: with 30–100 ms between rounds instead, the probe's
// side read 18–51 ms (median 22) when it led a round and 7–28 ms (median 11) when it followed
// the wait's side and its three sha256sum execs.
func (w *waitRun) idle() {
	time.Sleep(coalesce.MaxAdaptiveQuiet + time.Duration(50+w.b.rnd.IntN(50))*time.Millisecond)
}

// settle waits for the session to report the save's batch, into every replica, so the next
// save starts from idle.
func (w *waitRun) settle() error {
	ev, err := w.s.Next("batch", 30*time.Second)
	if err != nil {
		return err
	}
	if ev.Targets != waitReplicas || ev.Failed != 0 {
		return fmt.Errorf("a batch went to %d targets, %d failed", ev.Targets, ev.Failed)
	}
	time.Sleep(20 * time.Millisecond) // let a split batch show up before draining
	w.s.Drain()
	return nil
}
