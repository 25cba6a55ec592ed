//go:build bench

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// latencyRun is one save→visible series against one synced container.
type latencyRun struct {
	c      *cluster
	t      filesync.Target
	s      *sessiontest.Session
	p      *probe
	local  string
	remote string
	seed   uint64
	// handLost counts hand-rolled writes that never showed up.
	handLost int
}

// startLatency syncs local into /app of deploy/name with the given extra flags and starts the
// probe in its container.
func (b *bench) startLatency(ctx context.Context, name, local string, flags ...string) (*latencyRun, error) {
	ts, err := b.c.targets(ctx, name, 1)
	if err != nil {
		return nil, err
	}
	if err := b.c.uploadProbe(ctx, ts[0], b.probeBin); err != nil {
		return nil, err
	}
	s := b.newSession().Args("deploy/"+name).Args(flags...).Map(local, "/app").Start()
	if _, err := s.Next("initial-sync", 2*time.Minute); err != nil {
		s.Stop()
		return nil, err
	}
	return &latencyRun{c: b.c, t: ts[0], s: s, p: b.c.startProbe(ctx, ts[0]), local: local, remote: "/app", seed: uint64(time.Now().UnixNano())}, nil
}

func (l *latencyRun) stop() {
	l.p.close()
	l.s.Stop()
}

// save writes files (rel → content) locally, as an editor or a tool would, and returns the
// time from the first write to the moment the probe saw the last of them in the container,
// then waits for the session to report the batch so the next save starts from idle.
func (l *latencyRun) save(rels []string, files map[string][]byte) (time.Duration, error) {
	exp := make([]expect, len(rels))
	for i, r := range rels {
		exp[i] = expect{path: path.Join(l.remote, r), data: files[r]}
	}
	if err := l.p.arm(exp); err != nil {
		return 0, err
	}
	start := time.Now()
	for _, r := range rels {
		if err := os.WriteFile(filepath.Join(l.local, r), files[r], 0o644); err != nil {
			return 0, err
		}
	}
	at, err := l.p.arrival(time.Minute)
	if err != nil {
		return 0, err
	}
	if _, err := l.s.Next("batch", 30*time.Second); err != nil {
		return 0, err
	}
	time.Sleep(20 * time.Millisecond) // let a split batch show up before draining
	l.s.Drain()
	return at.Sub(start), nil
}

// idle waits until the session's coalescer counts as idle again (coalesce.MaxAdaptiveQuiet
// after its last batch), so that each burst is measured as a user's formatter run or build
// after a pause is: saves that follow a batch sooner are taken for one long operation, whose
// windows widen on purpose. Without it the rounds, 100–150 ms apart once the tar baseline took
// ~50 ms on containerd 2, read 23, 36, 64, 101, 113… ms: each a window twice the last.
func (l *latencyRun) idle() { time.Sleep(coalesce.MaxAdaptiveQuiet + 50*time.Millisecond) }

func (l *latencyRun) text(n int) []byte {
	l.seed++
	return textContent(l.seed, n)
}

// measureLatency is items 1 and 2 of the issue: the exec floor and save→visible for one small
// file, interleaved pair by pair (the order alternates, so drift cancels); then a 50-file burst
// and a 5 MB file, each paired with a plain `tar -x` exec of the same bytes, in alternating
// order too.
func (b *bench) measureLatency(ctx context.Context) error {
	local := filepath.Join(b.tmp, "latency")
	if err := os.MkdirAll(filepath.Join(local, "burst"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(local, "edit.txt"), []byte("start\n"), 0o644); err != nil {
		return err
	}
	l, err := b.startLatency(ctx, "lat", local)
	if err != nil {
		return err
	}
	defer l.stop()
	if err := b.measureIdle(l); err != nil { // idle.go
		return err
	}

	floors, saves, hands, err := l.triples(ctx, b, b.edits)
	if err != nil {
		return err
	}
	b.logf("floor ms: %s", fmtDurations(floors))
	b.logf("save  ms: %s", fmtDurations(saves))
	b.logf("kubectl exec cat ms: %s", fmtDurations(hands))
	f50, f95 := percentile(floors, 50), percentile(floors, 95)
	s50, s95 := percentile(saves, 50), percentile(saves, 95)
	h50 := percentile(hands, 50)
	n := fmt.Sprintf(" (n=%d)", len(saves))
	b.res.add("exec floor: `true` via client-go, p50"+n, msec(f50), "ms")
	b.res.add("exec floor: `true` via client-go, p95"+n, msec(f95), "ms")
	b.res.pair("save→visible, 1 small file, p50"+n, msec(s50), "ms", "exec floor p50", msec(f50)).
		target("≤ 0.25× floor", msec(s50) <= 0.25*msec(f50))
	b.res.pair("save→visible, 1 small file, p95"+n, msec(s95), "ms", "exec floor p95", msec(f95)).
		target("≤ 0.4× floor", msec(s95) <= 0.4*msec(f95))
	b.res.pair("save→visible, 1 small file, p50"+n, msec(s50), "ms", fmt.Sprintf("hand-rolled `kubectl exec -i … cat >` per change, p50 (%d of its writes lost)", l.handLost), msec(h50)).
		target("≤ 0.2×", msec(s50) <= 0.2*msec(h50))
	// CPU is counted in ns (see cpuPath): blocks of batches and of execs, interleaved. The daemons (apiserver, kubelet, containerd) are never idle: what
	// the same processes burn over as long with nothing sent is taken off both sides, so
	// each side is what its own work costs.
	const block = 10
	blocks := max(b.edits/block, 4)
	streamBy, execBy := map[string]int64{}, map[string]int64{}
	var streamWall, execWall time.Duration
	for r := range blocks {
		_, _, err := alternate(r, func() (time.Duration, error) {
			by, wall, err := l.batchCPU(block)
			addCPU(streamBy, by)
			streamWall += wall
			return 0, err
		}, func() (time.Duration, error) {
			by, wall, err := execCPUBy(ctx, l.c, l.t, block)
			addCPU(execBy, by)
			execWall += wall * block
			return 0, err
		})
		if err != nil {
			return err
		}
	}
	idlePath, err := newCPUPath([]filesync.Target{l.t}, l.s.Pid())
	if err != nil {
		return err
	}
	const idleFor = 5 * time.Second
	idle0 := idlePath.cpu()
	time.Sleep(idleFor)
	idleBy := diffCPU(idlePath.cpu(), idle0)
	nCPU := blocks * block
	b.logf("CPU per small batch through the stream, ms: %s (%.1f ms of wall each)", fmtCPU(streamBy, nCPU), msec(streamWall/time.Duration(nCPU)))
	b.logf("CPU per `true` exec, ms: %s (%.1f ms of wall each)", fmtCPU(execBy, nCPU), msec(execWall/time.Duration(nCPU)))
	b.logf("CPU of the same processes idle, ms per s: %s", fmtCPU(idleBy, int(idleFor/time.Second)))
	idleRate := float64(sumCPU(idleBy)) / idleFor.Seconds() // ns per second
	net := func(by map[string]int64, wall time.Duration) time.Duration {
		return max(0, cpuPer(sumCPU(by), nCPU)-time.Duration(idleRate*wall.Seconds()/float64(nCPU)))
	}
	streamCPU, execCPUs := net(streamBy, streamWall), net(execBy, execWall)
	b.logf("CPU per small batch, before taking the idle share off: stream %.1f ms, exec %.1f ms", msec(cpuPer(sumCPU(streamBy), nCPU)), msec(cpuPer(sumCPU(execBy), nCPU)))
	b.res.pair(fmt.Sprintf("CPU per small batch through the stream, less the idle share: container, shim, containerd, kubelet, apiserver, client (n=%d, in blocks of %d interleaved)", nCPU, block), msec(streamCPU), "ms",
		"per `true` exec (the least an exec per batch costs), the same", msec(execCPUs)).
		target("≤ 0.25×", msec(streamCPU) <= 0.25*msec(execCPUs))
	b.quietLatency = append(b.quietLatency, quietPoint{quiet: 50 * time.Millisecond, p50: s50, floor: f50, n: len(saves)})

	procs, err := l.processesPerBatch(ctx, 20)
	if err != nil {
		return err
	}
	b.res.add("container processes per small batch through the stream (forks: PIDs the container's PID namespace handed out, n=20; busybox image)", procs, "processes")

	// A 50-file burst (a formatter or a branch switch), paired with tar -x of the same files.
	if _, err := l.c.sh(ctx, l.t, "mkdir -p /tmp/base", nil); err != nil {
		return err
	}
	var bursts, burstBase []time.Duration
	for i := range b.reps * 5 {
		l.idle()
		files := map[string][]byte{}
		var rels []string
		for j := range 50 {
			rel := fmt.Sprintf("burst/b%02d.txt", j)
			rels = append(rels, rel)
			files[rel] = l.text(200 + (j*97)%3000)
		}
		s, base, err := alternate(i, func() (time.Duration, error) { return l.save(rels, files) },
			func() (time.Duration, error) { return l.c.tarExec(ctx, l.t, l.p, "/tmp/base", rels, files) })
		if err != nil {
			return fmt.Errorf("burst %d: %w", i, err)
		}
		bursts, burstBase = append(bursts, s), append(burstBase, base)
	}
	b.logf("burst ms: %s; tar -x ms: %s", fmtDurations(bursts), fmtDurations(burstBase))
	b.res.pair(fmt.Sprintf("save→visible, 50-file burst, p50 (n=%d)", len(bursts)), msec(median(bursts)), "ms", "`tar -x` exec of the same 50 files", msec(median(burstBase)))

	// One 5 MB file, paired with tar -x of it.
	var bigs, bigBase []time.Duration
	for i := range b.reps * 3 {
		l.idle()
		data := content(l.seed+uint64(i)*7919, 5<<20)
		rels, files := []string{"big.bin"}, map[string][]byte{"big.bin": data}
		s, base, err := alternate(i, func() (time.Duration, error) { return l.save(rels, files) },
			func() (time.Duration, error) { return l.c.tarExec(ctx, l.t, l.p, "/tmp/base", rels, files) })
		if err != nil {
			return fmt.Errorf("5 MB file %d: %w", i, err)
		}
		bigs, bigBase = append(bigs, s), append(bigBase, base)
	}
	b.logf("5MB ms: %s; tar -x ms: %s", fmtDurations(bigs), fmtDurations(bigBase))
	b.res.pair(fmt.Sprintf("save→visible, one 5 MB file, p50 (n=%d)", len(bigs)), msec(median(bigs)), "ms", "`tar -x` exec of the same file", msec(median(bigBase)))
	return nil
}

// triples measures n rounds (after three warm-up rounds) of the exec floor,
// save→visible of one small file, and a user's hand-rolled loop (`kubectl exec
// -i POD -- sh -c 'cat > F'` per change, timed to the probe's sight of it), in
// an order that rotates every round so drift cancels.
func (l *latencyRun) triples(ctx context.Context, b *bench, n int) (floors, saves, hands []time.Duration, err error) {
	for i := -3; i < n; i++ {
		var got [3]time.Duration
		for k := range 3 {
			switch j := (i + 3 + k) % 3; j {
			case 0:
				got[j], err = l.c.floor(ctx, l.t)
			case 1:
				got[j], err = l.save([]string{"edit.txt"}, map[string][]byte{"edit.txt": l.text(64 + (i+3)%200)})
			case 2:
				got[j], err = l.handRolled(ctx, "/tmp/hand.txt", l.text(64+(i+3)%200))
				if errors.Is(err, errHandLost) {
					// The probe is out of step now: start a new one, and
					// count the loss against the one-liner (a lost write has
					// no time: this round has no sample of it).
					b.logf("%v", err)
					l.handLost++
					l.p.close()
					_, _ = l.c.sh(ctx, l.t, "kill $(pidof lsprobe) 2>/dev/null; true", nil)
					l.p = l.c.startProbe(ctx, l.t)
					got[j], err = -1, nil
				}
			}
			if err != nil {
				return nil, nil, nil, fmt.Errorf("edit %d, %s: %w", i, []string{"exec floor", "save", "kubectl exec cat"}[(i+3+k)%3], err)
			}
			time.Sleep(time.Duration(30+b.rnd.IntN(70)) * time.Millisecond)
		}
		if i >= 0 {
			floors, saves = append(floors, got[0]), append(saves, got[1])
			if got[2] >= 0 {
				hands = append(hands, got[2])
			}
		}
	}
	return floors, saves, hands, nil
}

// handRolled is the one-liner livesync replaces: `kubectl exec -i POD -c app --
// sh -c 'cat > F'` with the file on stdin, timed from its start to the moment
// the probe sees the content at F.
func (l *latencyRun) handRolled(ctx context.Context, remote string, data []byte) (time.Duration, error) {
	if err := l.p.arm([]expect{{path: remote, data: data}}); err != nil {
		return 0, err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, l.c.kubectl, "--kubeconfig", l.c.kubeconfig, "-n", l.c.ns, "exec", "-i", l.t.Pod, "-c", l.t.Container,
		"--", "sh", "-c", "cat > "+remote)
	cmd.Stdin = bytes.NewReader(data)
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("kubectl exec cat: %w: %s", err, out)
	}
	at, err := l.p.arrival(15 * time.Second)
	if err != nil {
		got, _ := l.c.sh(ctx, l.t, "wc -c < "+remote, nil)
		return 0, fmt.Errorf("%w: %s holds %s bytes, want %d (kubectl exec returned 0)", errHandLost, remote, strings.TrimSpace(got), len(data))
	}
	return at.Sub(start), nil
}

// errHandLost is a hand-rolled write that kubectl reported done but that never showed up
// whole in the container.
var errHandLost = errors.New("hand-rolled write lost")

// batchTicks saves one small file n times, each after idle (a pause longer than the widest
// adaptive quiet window: back-to-back saves would be a stream of changes, batched 200 ms
// apart) and waited for by the session's batch event (the probe is not armed, so it does
// not poll), and returns the CPU (ns) the saves cost by process on their path (cpuPath; the
// livesync process is the client), sampled from each write to its batch event, and the wall
// time those windows took.
func (l *latencyRun) batchCPU(n int) (map[string]int64, time.Duration, error) {
	path, err := newCPUPath([]filesync.Target{l.t}, l.s.Pid())
	if err != nil {
		return nil, 0, err
	}
	by := map[string]int64{}
	var wall time.Duration
	for range n {
		time.Sleep(250 * time.Millisecond)
		l.s.Drain()
		start, before := time.Now(), path.cpu()
		if err := os.WriteFile(filepath.Join(l.local, "edit.txt"), l.text(100), 0o644); err != nil {
			return nil, 0, err
		}
		if _, err := l.s.Next("batch", 30*time.Second); err != nil {
			return nil, 0, err
		}
		addCPU(by, diffCPU(path.cpu(), before))
		wall += time.Since(start)
	}
	return by, wall, nil
}

// processesPerBatch counts the processes a small batch costs in the container: every fork
// takes the next PID of the container's PID namespace, so the PIDs handed out between an
// exec of `echo $$` before n saves (each after idle, waited for by its batch event) and one
// after, less one, are the batches' processes. An exec adds no PID (busybox re-executing
// itself for tar is one process); anything else forking in the container at the time would
// count too: the app is `sleep`, the probe is not armed.
func (l *latencyRun) processesPerBatch(ctx context.Context, n int) (float64, error) {
	lastPID := func() (int, error) {
		out, err := l.c.sh(ctx, l.t, "echo $$", nil)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(strings.TrimSpace(out))
	}
	before, err := lastPID()
	if err != nil {
		return 0, err
	}
	for range n {
		time.Sleep(250 * time.Millisecond)
		l.s.Drain()
		if err := os.WriteFile(filepath.Join(l.local, "edit.txt"), l.text(100), 0o644); err != nil {
			return 0, err
		}
		if _, err := l.s.Next("batch", 30*time.Second); err != nil {
			return 0, err
		}
	}
	after, err := lastPID()
	if err != nil {
		return 0, err
	}
	return float64(after-before-1) / float64(n), nil
}

// alternate runs one pair of measurements, measured first on even rounds and baseline first
// on odd ones, so that neither side always runs on the heels of the other (a warm cache, a
// busy kubelet) and drift cancels.
func alternate(round int, measured, baseline func() (time.Duration, error)) (m, b time.Duration, err error) {
	if round%2 == 0 {
		if m, err = measured(); err == nil {
			b, err = baseline()
		}
		return m, b, err
	}
	if b, err = baseline(); err == nil {
		m, err = measured()
	}
	return m, b, err
}
