//go:build bench

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// microBenchmarks are item 7: the Go benchmarks of the planner, the tar builder, the ignore
// matcher and the watcher, with what each measures.
var microBenchmarks = map[string]string{
	"BenchmarkPlan":           "planner: 1,000 hinted files, none changed",
	"BenchmarkPlanRescan":     "planner: rescan of 100,000 unchanged files",
	"BenchmarkArchive":        "tar builder: 1,000 files of 2 KiB",
	"BenchmarkApplyOneFile":   "plan+tar+apply of one file, local busybox",
	"BenchmarkListRemote":     "container listing of 10,000 files, local busybox",
	"BenchmarkMatch/warm":     "ignore matcher: one path, warm",
	"BenchmarkMatch/walk100k": "ignore matcher: new matcher + 100,000 paths",
	"BenchmarkWatchReady":     "watcher set-up: 10,000 files / 1,111 dirs",
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+([\d.]+) MB/s)?`)

// measureMicro runs the Go micro-benchmarks once each and adds a row per benchmark.
func (b *bench) measureMicro(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^(BenchmarkPlan|BenchmarkPlanRescan|BenchmarkArchive|BenchmarkApplyOneFile|BenchmarkListRemote|BenchmarkMatch|BenchmarkWatchReady)$",
		"-benchtime", b.benchtime, "-count", "1", "./pkg/filesync", "./pkg/ignore", "./pkg/watch")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go test -bench: %w\n%s", err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		what := microBenchmarks[m[1]]
		if what == "" {
			what = m[1]
		}
		ns, _ := strconv.ParseFloat(m[2], 64)
		v, unit := ns/1e6, "ms/op"
		if ns < 1e6 {
			v, unit = ns/1e3, "µs/op"
		}
		b.res.add(fmt.Sprintf("micro %s: %s", m[1], what), v, unit)
		b.logf("%s", sc.Text())
		if m[3] != "" {
			mbs, _ := strconv.ParseFloat(m[3], 64)
			b.res.add(fmt.Sprintf("micro %s: throughput", m[1]), mbs, "MB/s")
		}
	}
	return nil
}
