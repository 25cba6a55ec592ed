//go:build bench

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/ignore"
	"github.com/livesync-dev/kubectl-livesync/pkg/watch"
)

// measureWatcher is item 6 on a 100,000-file tree: watcher set-up time in process (paired
// with a bare walk of the tree, the least any recursive watch must do); then the binary
// watching it: idle CPU over 30 s, and a 10,000-file burst → the batch that completes it,
// checked file by file in the container (paired with a `tar -x` exec of the same files);
// peak RSS over all of it.
func (b *bench) measureWatcher(ctx context.Context) error {
	root := b.watchTree
	m, err := ignore.New(root, ignore.Options{})
	if err != nil {
		return err
	}
	skip := func(_, rel string, isDir bool) bool { return rel != "" && m.Match(rel, isDir) }
	var ready, walk []time.Duration
	for i := range b.reps {
		for k := range 2 {
			start := time.Now()
			if (k+i)%2 == 0 {
				w, err := watch.New([]string{root}, watch.Options{Skip: skip})
				if err != nil {
					return err
				}
				ready = append(ready, time.Since(start))
				_ = w.Close()
			} else {
				n := 0
				if err := filepath.WalkDir(root, func(string, fs.DirEntry, error) error { n++; return nil }); err != nil {
					return err
				}
				walk = append(walk, time.Since(start))
			}
		}
	}
	b.logf("watch.New ms: %s; walk ms: %s", fmtDurations(ready), fmtDurations(walk))
	n := fmt.Sprintf(" (n=%d)", len(ready))
	b.res.pair("watcher ready, 100,000 files / 5,051 dirs"+n, secs(median(ready)), "s", "bare walk of the tree", secs(median(walk))).
		target("< 10 s", median(ready) < 10*time.Second)

	ts, err := b.c.targets(ctx, "w", 1)
	if err != nil {
		return err
	}
	s, err := b.c.startSession("deploy/w", root+":/w", "--initial", "none")
	if err != nil {
		return err
	}
	defer s.stop()
	if _, err := s.next("initial-sync", 3*time.Minute); err != nil {
		return err
	}
	time.Sleep(3 * time.Second) // let start-up work (GC, the informer) settle
	cpu0, err := cpuTicks(s.pid())
	if err != nil {
		return err
	}
	start := time.Now()
	time.Sleep(b.idle)
	cpu1, err := cpuTicks(s.pid())
	if err != nil {
		return err
	}
	idle := float64(cpu1-cpu0) / clockTicks / time.Since(start).Seconds() * 100
	b.res.add(fmt.Sprintf("watcher idle CPU over %.0f s, 100,000 files (whole binary)", b.idle.Seconds()), idle, "% of a core").
		target("< 1%", idle < 1)

	// The burst: 10,000 new files over 500 directories, written as fast as possible. The probe
	// in the container says when the last of them is there.
	files := map[string][]byte{}
	var rels []string
	for i := range 10_000 {
		leaf := i % 500 * 10 // every tenth of the 5,000 leaf directories
		rel := fmt.Sprintf("d%02d/s%03d/burst-%05d.txt", leaf/100, leaf%100, i)
		rels = append(rels, rel)
		files[rel] = textContent(uint64(1_000_000+i), 150+i%200)
	}
	slices.Sort(rels) // the order a tar stream brings them in
	exp := make([]expect, len(rels))
	for i, r := range rels {
		exp[i] = expect{path: "/w/" + r, data: files[r]}
	}
	if err := b.c.uploadProbe(ctx, ts[0], b.probeBin); err != nil {
		return err
	}
	p := b.c.startProbe(ctx, ts[0])
	defer p.close()
	if err := p.arm(exp); err != nil {
		return err
	}
	s.drain()
	begin := time.Now()
	for _, rel := range rels {
		if err := os.WriteFile(filepath.Join(root, rel), files[rel], 0o644); err != nil {
			return err
		}
	}
	written := time.Since(begin)
	at, err := p.arrival(5 * time.Minute)
	if err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	done := at.Sub(begin)
	// Batch events (a worker that merged several batches reports each with the same counts)
	// until two quiet seconds, for the log.
	batches := 0
	for quiet := false; !quiet; {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return fmt.Errorf("burst: session ended: %s", s.tail())
			}
			if ev.Type == "batch" {
				batches++
				b.logf("burst batch event: %d changed, %.0f ms after the last write, latency %.0f ms", ev.Changed, msec(ev.Time.Sub(begin)-written), ev.LatencyMs)
			}
		case <-time.After(2 * time.Second):
			quiet = true
		}
	}
	missing, err := b.missing(ctx, "/w", rels, files)
	if err != nil {
		return err
	}
	b.logf("burst: written in %.0f ms, all in the container %.0f ms after the first write; %s", msec(written), msec(done), missing)
	rss, err := peakRSS(s.pid())
	if err != nil {
		return err
	}

	if _, err := b.c.sh(ctx, ts[0], "mkdir -p /tmp/base", nil); err != nil {
		return err
	}
	base, err := b.c.tarExec(ctx, ts[0], p, "/tmp/base", rels, files)
	if err != nil {
		return err
	}
	b.res.pair(fmt.Sprintf("10,000-file burst: last write → all in the container (writes took %.0f ms; batch events: %d)", msec(written), batches), msec(done-written), "ms",
		"`tar -x` exec of the same files", msec(base)).
		target("nothing missed", missing == "")
	b.res.add("watcher peak RSS, 100,000 files + burst (whole binary)", rss, "MiB").target("< 200 MiB", rss < 200)
	return nil
}

// missing compares what the container has under dir for rels with files; "" when all match.
func (b *bench) missing(ctx context.Context, dir string, rels []string, files map[string][]byte) (string, error) {
	ts, err := b.c.targets(ctx, "w", 1)
	if err != nil {
		return "", err
	}
	out, err := b.c.sh(ctx, ts[0], fmt.Sprintf("cd %s && find . -name 'burst-*' -type f | sort > /tmp/list && wc -l < /tmp/list && xargs cat < /tmp/list | sha256sum", dir), nil)
	if err != nil {
		return "", err
	}
	sorted := slices.Clone(rels)
	slices.SortFunc(sorted, func(a, b string) int { return strings.Compare("./"+a, "./"+b) })
	h := sha256.New()
	for _, r := range sorted {
		h.Write(files[r])
	}
	f := strings.Fields(out)
	if len(f) < 2 || f[0] != strconv.Itoa(len(rels)) || f[1] != hex.EncodeToString(h.Sum(nil)) {
		return fmt.Sprintf("container has %v, want %d files with sha256 %x", f, len(rels), h.Sum(nil)), nil
	}
	return "", nil
}

const clockTicks = 100 // USER_HZ on Linux

// cpuTicks returns the user+system CPU time of pid in clock ticks.
func cpuTicks(pid int) (int64, error) {
	if statFields(pid) == nil {
		return 0, fmt.Errorf("process %d is gone", pid)
	}
	return procTicks(pid, false), nil
}

// peakRSS returns the high-water mark of pid's resident set in MiB.
func peakRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM for pid %d", pid)
}
