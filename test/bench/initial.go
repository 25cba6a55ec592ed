//go:build bench

package main

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"os/exec"
	"path/filepath"
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
//
// Every copy goes into a directory of its own on a tmpfs (deploy/cmp's emptyDir of medium
// Memory, as the burst rows), which no copy deleted into: on the node's journal-less ext4 a
// copy right after the `rm -rf` of the one before paid for the deleted inodes (see the burst
// row in PERFORMANCE.md), so the rows measured the order of the copiers, not the copiers.
func (b *bench) measureInitial(ctx context.Context) error {
	ts, err := b.c.targets(ctx, "cmp", 1)
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
			return run(ctx, c.binary, "--kubeconfig", c.kubeconfig, "-n", c.ns, "deploy/cmp", b.initialTree+":"+dest, "--once")
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
			dest := fmt.Sprintf("/cmp/%s-%d", strings.ReplaceAll(cp.name, " ", ""), rep)
			var d time.Duration
			for attempt := 0; ; attempt++ {
				start := time.Now()
				err := cp.run(ctx, dest)
				d = time.Since(start)
				if err == nil {
					err = b.checkCopy(ctx, t, dest, 10_000, b.initialBytes)
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
	r.target("≤ 1.0× tar pipe", rt <= 1.0)
	r = b.res.pair("initial sync vs kubectl cp"+n, secs(ls), "s", "kubectl cp", secs(kc))
	r.Ratio = ref(pairRatio(times["livesync"], times["kubectl cp"]))
	if err := b.measureInitialPipe(ctx, fmt.Sprintf("10,000 files / %.0f MiB", mib(b.initialBytes)), b.initialTree, []string{"remote"}); err != nil {
		return err
	}
	small := filepath.Join(b.tmp, "initial-100k")
	if err := watchTree(small); err != nil {
		return err
	}
	if err := b.measureInitialPipe(ctx, "100,000 small files", small, []string{"loopback", "remote"}); err != nil {
		return err
	}
	return b.measureInitialVendor(ctx)
}

// measureInitialPipe copies tree into one pod by livesync --once and by a raw
// `tar -c | kubectl exec -i -- tar -x` pipe through each of profiles ("loopback",
// "remote": through the remote-profile proxy), all in rotating order, each into a fresh
// tmpfs directory and checked for all files and bytes, and adds a row per profile.
func (b *bench) measureInitialPipe(ctx context.Context, label, tree string, profiles []string) error {
	files, size, err := treeSize(tree)
	if err != nil {
		return err
	}
	rc, closeProxy, err := b.remoteCluster()
	if err != nil {
		return err
	}
	defer closeProxy()
	ts, err := b.c.targets(ctx, "cmp", 1)
	if err != nil {
		return err
	}
	t := ts[0]
	var copiers []copier
	for _, prof := range profiles {
		c := b.c
		if prof == "remote" {
			c = rc
		}
		copiers = append(copiers,
			copier{prof + " livesync", func(ctx context.Context, dest string) error {
				return run(ctx, c.binary, "--kubeconfig", c.kubeconfig, "-n", c.ns, "deploy/cmp", tree+":"+dest, "--once")
			}},
			copier{prof + " tar pipe", func(ctx context.Context, dest string) error {
				remote := []string{c.kubectl, "--kubeconfig", c.kubeconfig, "-n", c.ns, "exec", "-i", t.Pod, "-c", "app", "--",
					"sh", "-c", shellQuote("mkdir -p " + dest + " && exec tar -x -f - -C " + dest)}
				return run(ctx, "bash", "-o", "pipefail", "-c", "tar -c -C "+shellQuote(tree)+" . | "+strings.Join(remote, " "))
			}},
		)
	}
	times := map[string][]time.Duration{}
	for rep := range b.initialReps {
		for k := range copiers {
			cp := copiers[(k+rep)%len(copiers)]
			dest := fmt.Sprintf("/cmp/p%d-%s-%d", files, strings.ReplaceAll(cp.name, " ", ""), rep)
			start := time.Now()
			err := cp.run(ctx, dest)
			d := time.Since(start)
			if err == nil {
				err = b.checkCopy(ctx, t, dest, files, size)
			}
			if _, rmErr := b.c.sh(ctx, t, "rm -rf "+dest, nil); rmErr != nil {
				return rmErr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", cp.name, err)
			}
			times[cp.name] = append(times[cp.name], d)
			b.logf("initial %s, %s: %.2f s (load %s)", label, cp.name, d.Seconds(), loadAvg())
		}
	}
	n := fmt.Sprintf(", %s, %.0f MiB (n=%d; ratio: median of per-pair ratios)", label, mib(size), b.initialReps)
	for _, prof := range profiles {
		name := prof
		if prof == "remote" {
			name = fmt.Sprintf("remote profile (%.0f Mbit/s, %s RTT)", remoteRate*8/1e6, remoteRTT)
		}
		ls, tp := times[prof+" livesync"], times[prof+" tar pipe"]
		rt := pairRatio(ls, tp)
		r := b.res.pair("initial sync, "+name+n, secs(median(ls)), "s", "raw `tar c | kubectl exec -i tar x` pipe through the same link", secs(median(tp)))
		r.Ratio = ref(rt)
		r.target("≤ 1.0× tar pipe", rt <= 1.0)
	}
	return nil
}

// measureInitialVendor copies a real source tree (`go mod vendor` of this module) into one pod
// by livesync --once, by a raw `tar -c | kubectl exec -i -- tar -x` pipe and by the same pipe
// with `gzip -1` on both ends, over loopback and through the remote-profile proxy, all in
// rotating order: the rows show whether compressing pays on each link, and what livesync's
// choice (compress where the container has gzip) costs or saves against the raw pipe.
func (b *bench) measureInitialVendor(ctx context.Context) error {
	tree := filepath.Join(b.tmp, "vendor")
	if out, err := exec.CommandContext(ctx, "go", "mod", "vendor", "-o", tree).CombinedOutput(); err != nil {
		return fmt.Errorf("go mod vendor: %w: %s", err, lastLines(string(out), 5))
	}
	files, size, err := treeSize(tree)
	if err != nil {
		return err
	}
	b.logf("vendor tree: %d files, %.1f MiB", files, mib(size))
	rc, closeProxy, err := b.remoteCluster()
	if err != nil {
		return err
	}
	defer closeProxy()
	ts, err := b.c.targets(ctx, "cmp", 1)
	if err != nil {
		return err
	}
	t := ts[0]
	var copiers []copier
	for _, prof := range []struct {
		name string
		c    *cluster
	}{{"loopback", b.c}, {"remote", rc}} {
		c := prof.c
		pipe := func(gz bool) func(ctx context.Context, dest string) error {
			return func(ctx context.Context, dest string) error {
				create, extract := "tar -c -C "+shellQuote(tree)+" .", "exec tar -x -f - -C "+dest
				if gz {
					create, extract = create+" | gzip -1", "gzip -dc | tar -x -f - -C "+dest
				}
				remote := []string{c.kubectl, "--kubeconfig", c.kubeconfig, "-n", c.ns, "exec", "-i", t.Pod, "-c", "app", "--",
					"sh", "-c", shellQuote("mkdir -p " + dest + " && " + extract)}
				return run(ctx, "bash", "-o", "pipefail", "-c", create+" | "+strings.Join(remote, " "))
			}
		}
		copiers = append(copiers,
			copier{prof.name + " livesync", func(ctx context.Context, dest string) error {
				return run(ctx, c.binary, "--kubeconfig", c.kubeconfig, "-n", c.ns, "deploy/cmp", tree+":"+dest, "--once")
			}},
			copier{prof.name + " tar pipe", pipe(false)},
			copier{prof.name + " tar|gzip pipe", pipe(true)},
		)
	}
	times := map[string][]time.Duration{}
	for rep := range b.initialReps {
		for k := range copiers {
			cp := copiers[(k+rep)%len(copiers)]
			dest := fmt.Sprintf("/cmp/%s-%d", strings.NewReplacer(" ", "", "|", "").Replace(cp.name), rep)
			start := time.Now()
			err := cp.run(ctx, dest)
			d := time.Since(start)
			if err == nil {
				err = b.checkCopy(ctx, t, dest, files, size)
			}
			if _, rmErr := b.c.sh(ctx, t, "rm -rf "+dest, nil); rmErr != nil {
				return rmErr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", cp.name, err)
			}
			times[cp.name] = append(times[cp.name], d)
		}
	}
	for _, cp := range copiers {
		b.logf("initial vendor %s s: %v", cp.name, times[cp.name])
	}
	n := fmt.Sprintf(", `go mod vendor` of this module, %d files / %.0f MiB (n=%d; ratio: median of per-pair ratios)", files, mib(size), b.initialReps)
	for _, prof := range []struct{ name, label, want string }{
		{"remote", fmt.Sprintf("remote profile (%.0f Mbit/s, %s RTT)", remoteRate*8/1e6, remoteRTT), "≤ 0.5×"},
		{"loopback", "loopback", "≤ 1.1×"},
	} {
		ls, tp, tz := times[prof.name+" livesync"], times[prof.name+" tar pipe"], times[prof.name+" tar|gzip pipe"]
		rt := pairRatio(ls, tp)
		r := b.res.pair("initial sync, "+prof.label+n, secs(median(ls)), "s",
			"raw `tar c | kubectl exec -i tar x` pipe through the same link", secs(median(tp)))
		r.Ratio = ref(rt)
		want := 0.5
		if prof.name == "loopback" {
			want = 1.1
		}
		r.target(prof.want+" tar pipe", rt <= want)
		r = b.res.pair("`tar c | gzip -1 | kubectl exec -i sh -c 'gzip -dc | tar x'`, "+prof.label+n, secs(median(tz)), "s",
			"raw tar pipe through the same link", secs(median(tp)))
		r.Ratio = ref(pairRatio(tz, tp))
	}
	return nil
}

// treeSize counts the regular files under dir and their bytes.
func treeSize(dir string) (files int, size int64, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files, size = files+1, size+fi.Size()
		return nil
	})
	return files, size, err
}

// pairRatio is the median of a[i]/b[i], rounded to three places.
func pairRatio(a, b []time.Duration) float64 {
	var rs []time.Duration // ratios ×1e6, to reuse median
	for i := range min(len(a), len(b)) {
		rs = append(rs, time.Duration(float64(a[i])/float64(b[i])*1e6))
	}
	return math.Round(float64(median(rs))/1e3) / 1000
}

// checkCopy verifies that dest holds a whole tree: files regular files of size bytes in all.
func (b *bench) checkCopy(ctx context.Context, t filesync.Target, dest string, files int, size int64) error {
	out, err := b.c.sh(ctx, t, fmt.Sprintf("cd %s && find . -type f | wc -l && find . -type f -exec cat {} + | wc -c", dest), nil)
	if err != nil {
		return err
	}
	f := strings.Fields(out)
	want := []string{strconv.Itoa(files), strconv.FormatInt(size, 10)}
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
	if err := b.checkCopy(ctx, ts[0], "/app", 10_000, b.initialBytes); err != nil {
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
		if err := b.checkCopy(ctx, ts[0], "/app", 10_000, b.initialBytes); err != nil {
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
