//go:build bench

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// heapProfileEnv is the binary's switch for heap profiles (see
// cmd/kubectl-livesync/heapprof.go): a directory it writes them to.
const heapProfileEnv = "LIVESYNC_HEAP_PROFILE"

// heapSnapshot asks the session process pid for a heap profile (SIGUSR1) and waits for its
// heap-<n>.pprof in dir; it returns the file's path.
func heapSnapshot(pid, n int, dir string) (string, error) {
	name := filepath.Join(dir, fmt.Sprintf("heap-%d.pprof", n))
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		return "", fmt.Errorf("asking %d for a heap profile: %w", pid, err)
	}
	for range 100 {
		if _, err := os.Stat(name); err == nil {
			return name, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("no heap profile %s from %d after 10 s", name, pid)
}

// keepProfile copies a profile into _output under name, where it stays after the run.
func keepProfile(from, name string) (string, error) {
	b, err := os.ReadFile(from)
	if err != nil {
		return "", err
	}
	to := filepath.Join("_output", name)
	if err := os.MkdirAll("_output", 0o755); err != nil {
		return "", err
	}
	return to, os.WriteFile(to, b, 0o644)
}

// heapByPackage sums a heap profile's in-use bytes by the package that holds them: the innermost
// frame of this module, else the innermost outside the standard library, else the innermost
// (pprof's flat view puts them all on runtime.mallocgc's callers: maps, strings, gob). It
// returns the total and the top n lines, "pkg MiB (share)".
func heapByPackage(ctx context.Context, binary, profile string, n int) (float64, []string, error) {
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-traces", "-sample_index=inuse_space", binary, profile).Output()
	if err != nil {
		return 0, nil, fmt.Errorf("go tool pprof -traces %s: %w", profile, err)
	}
	const module = "github.com/livesync-dev/kubectl-livesync/"
	byPkg := map[string]float64{}
	var total float64
	var value float64
	var frames []string
	flush := func() {
		if len(frames) > 0 {
			pick := pkgOf(frames[0])
			if i := slices.IndexFunc(frames, func(f string) bool { return strings.HasPrefix(f, module) }); i >= 0 {
				pick = pkgOf(frames[i])
			} else if i := slices.IndexFunc(frames, func(f string) bool { return strings.Contains(strings.Split(f, "/")[0], ".") }); i >= 0 {
				pick = pkgOf(frames[i])
			}
			byPkg[strings.TrimPrefix(pick, module)] += value
			total += value
		}
		frames, value = nil, 0
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "-----------+") {
			flush()
			continue
		}
		f := strings.Fields(l)
		switch {
		case len(f) == 0 || strings.HasSuffix(f[0], ":"):
			continue // headers and labels ("bytes: 1kB")
		case len(f) == 2:
			v, err := parseSize(f[0])
			if err != nil {
				continue
			}
			value = v
			frames = append(frames, f[1])
		case len(f) == 1:
			frames = append(frames, f[0])
		}
	}
	flush()
	keys := make([]string, 0, len(byPkg))
	for k := range byPkg {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return int(byPkg[b] - byPkg[a]) })
	var lines []string
	for _, k := range keys[:min(n, len(keys))] {
		lines = append(lines, fmt.Sprintf("%s %.1f MiB (%.0f%%)", k, byPkg[k]/(1<<20), byPkg[k]/total*100))
	}
	return total / (1 << 20), lines, nil
}

// pkgOf returns the package of a function name as pprof prints it
// ("github.com/x/y/pkg/watch.(*watcher).drain" → "github.com/x/y/pkg/watch").
func pkgOf(fn string) string {
	slash := strings.LastIndex(fn, "/")
	if dot := strings.Index(fn[slash+1:], "."); dot >= 0 {
		return fn[:slash+1+dot]
	}
	return fn
}

// parseSize reads pprof's sizes: "1.50MB", "512kB", "96B".
func parseSize(s string) (float64, error) {
	mult := 1.0
	for _, u := range []struct {
		suffix string
		m      float64
	}{{"GB", 1 << 30}, {"MB", 1 << 20}, {"kB", 1 << 10}, {"B", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.m
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	return v * mult, err
}

// currentRSS returns pid's resident set now in MiB.
func currentRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// loadAvg returns the 1-minute load average, for the log.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}
