//go:build bench

package main

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// copier is one way to put the initial tree into a fresh directory of a running container.
type copier struct {
	name string
	run  func(ctx context.Context, dest string) error
}

// measureInitial is item 3: the 10,000-file tree into one pod by livesync --once, by
// `tar -c | kubectl exec -i POD -- tar -x` and by `kubectl cp`, each timed as a user would
// (the whole command) in rotating order; every copy is checked for all files and bytes.
func (b *bench) measureInitial(ctx context.Context) error {
	ts, err := b.c.targets(ctx, "big", 1)
	if err != nil {
		return err
	}
	t := ts[0]
	c := b.c
	kubectl := func(args ...string) []string {
		return append([]string{c.kubectl, "--kubeconfig", c.kubeconfig, "-n", c.ns}, args...)
	}
	copiers := []copier{
		{"livesync", func(ctx context.Context, dest string) error {
			return run(ctx, c.binary, "--kubeconfig", c.kubeconfig, "-n", c.ns, "deploy/big", b.initialTree+":"+dest, "--once")
		}},
		{"tar pipe", func(ctx context.Context, dest string) error {
			pipe := fmt.Sprintf("tar -c -C %s . | %s", shellQuote(b.initialTree),
				strings.Join(kubectl("exec", "-i", t.Pod, "-c", "app", "--", "sh", "-c", shellQuote("mkdir -p "+dest+" && exec tar -x -f - -C "+dest)), " "))
			return run(ctx, "bash", "-o", "pipefail", "-c", pipe)
		}},
		{"kubectl cp", func(ctx context.Context, dest string) error {
			args := kubectl("cp", b.initialTree, t.Pod+":"+dest, "-c", "app")
			return run(ctx, args[0], args[1:]...)
		}},
	}
	times := map[string][]time.Duration{}
	for rep := range b.initialReps {
		for k := range copiers {
			cp := copiers[(k+rep)%len(copiers)]
			dest := fmt.Sprintf("/tmp/cmp/%s-%d", strings.ReplaceAll(cp.name, " ", ""), rep)
			var d time.Duration
			for attempt := 0; ; attempt++ {
				start := time.Now()
				err := cp.run(ctx, dest)
				d = time.Since(start)
				if err == nil {
					err = b.checkCopy(ctx, t, dest)
				}
				if _, rmErr := c.sh(ctx, t, "rm -rf "+dest, nil); rmErr != nil {
					return rmErr
				}
				if err == nil {
					break
				}
				b.logf("%s copy %d failed (attempt %d): %v", cp.name, rep, attempt+1, err)
				if attempt == 2 {
					return fmt.Errorf("%s: %w", cp.name, err)
				}
			}
			times[cp.name] = append(times[cp.name], d)
		}
	}
	for _, cp := range copiers {
		b.logf("initial %s s: %v", cp.name, times[cp.name])
	}
	ls, tp, kc := median(times["livesync"]), median(times["tar pipe"]), median(times["kubectl cp"])
	// The machine's load drifts by more than the difference between the tools, so the ratio is
	// the median of the per-repetition ratios (each pair ran back to back), not of the medians.
	n := fmt.Sprintf(", %d files / %.0f MiB (n=%d; ratio: median of per-pair ratios)", 10_000, mib(b.initialBytes), b.initialReps)
	rt := pairRatio(times["livesync"], times["tar pipe"])
	r := b.res.pair("initial sync vs tar pipe"+n, secs(ls), "s", "tar -c | kubectl exec -i -- tar -x", secs(tp))
	r.Ratio = ref(rt)
	r.target("≤ 1.2× tar pipe", rt <= 1.2)
	r = b.res.pair("initial sync vs kubectl cp"+n, secs(ls), "s", "kubectl cp", secs(kc))
	r.Ratio = ref(pairRatio(times["livesync"], times["kubectl cp"]))
	return nil
}

// pairRatio is the median of a[i]/b[i], rounded to three places.
func pairRatio(a, b []time.Duration) float64 {
	var rs []time.Duration // ratios ×1e6, to reuse median
	for i := range min(len(a), len(b)) {
		rs = append(rs, time.Duration(float64(a[i])/float64(b[i])*1e6))
	}
	return math.Round(float64(median(rs))/1e3) / 1000
}

// checkCopy verifies that dest holds the whole initial tree: every file and every byte.
func (b *bench) checkCopy(ctx context.Context, t filesync.Target, dest string) error {
	out, err := b.c.sh(ctx, t, fmt.Sprintf("cd %s && find . -type f | wc -l && find . -type f -exec cat {} + | wc -c", dest), nil)
	if err != nil {
		return err
	}
	f := strings.Fields(out)
	want := []string{"10000", strconv.FormatInt(b.initialBytes, 10)}
	if len(f) != 2 || f[0] != want[0] || f[1] != want[1] {
		return fmt.Errorf("copy in %s is incomplete: files and bytes %v, want %v", dest, f, want)
	}
	return nil
}

// measureResync is item 4: a session syncs the tree into an emptyDir, every remote mtime is
// changed (as in an image that has the sources baked in), the container restarts, and the
// session's re-sync of the unchanged tree is compared with its own full copy.
func (b *bench) measureResync(ctx context.Context) error {
	ts, err := b.c.targets(ctx, "big", 1)
	if err != nil {
		return err
	}
	s := b.newSession().Args("deploy/big").Map(b.initialTree, "/app").Start()
	defer s.Stop()
	full, err := s.Next("initial-sync", 3*time.Minute)
	if err != nil {
		return err
	}
	if err := b.checkCopy(ctx, ts[0], "/app"); err != nil {
		return err
	}
	var fulls, res []sessiontest.Event
	for i := range 2 {
		if _, err := b.c.sh(ctx, ts[0], "find /app -exec touch {} + && kill 1", nil); err != nil {
			return err
		}
		re, err := s.Next("initial-sync", 3*time.Minute)
		if err != nil {
			return fmt.Errorf("re-sync %d: %w", i, err)
		}
		if re.Target == nil || re.Target.ContainerID == ts[0].ContainerID {
			return fmt.Errorf("re-sync %d went to the old container", i)
		}
		if ts, err = b.c.targets(ctx, "big", 1); err != nil {
			return err
		}
		if err := b.checkCopy(ctx, ts[0], "/app"); err != nil {
			return err
		}
		fulls, res = append(fulls, full), append(res, re)
		if i == 0 {
			// The second pair: a full copy into a fresh directory of the same container,
			// by the same session's engine, right before the next restart.
			s.Stop()
			if _, err := b.c.sh(ctx, ts[0], "rm -rf /app/* && sync", nil); err != nil {
				return err
			}
			s = b.newSession().Args("deploy/big").Map(b.initialTree, "/app").Start()
			defer s.Stop()
			if full, err = s.Next("initial-sync", 3*time.Minute); err != nil {
				return err
			}
		}
	}
	var fb, rb int64
	var fd, rd []time.Duration
	for i := range res {
		b.logf("full copy %d: %d files %d bytes %.0f ms; re-sync: %d files %d bytes %.0f ms",
			i, fulls[i].Files, fulls[i].Bytes, fulls[i].DurationMs, res[i].Files, res[i].Bytes, res[i].DurationMs)
		fb, rb = max(fb, fulls[i].Bytes), max(rb, res[i].Bytes)
		fd = append(fd, time.Duration(fulls[i].DurationMs*float64(time.Millisecond)))
		rd = append(rd, time.Duration(res[i].DurationMs*float64(time.Millisecond)))
	}
	n := fmt.Sprintf(" (n=%d)", len(res))
	r := b.res.pair("re-sync of unchanged tree after restart, bytes sent (max)"+n, float64(rb), "B", "full copy", float64(fb))
	r.target("< 2% of full copy", float64(rb) < 0.02*float64(fb))
	b.res.pair("re-sync of unchanged tree after restart, time"+n, secs(median(rd)), "s", "full copy", secs(median(fd)))
	return nil
}

func run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(lastLines(string(out), 5)))
	}
	return nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
