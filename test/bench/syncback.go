//go:build bench

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/ignore"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// syncBackGlobs are the five listed globs of the sync-back rows (issue 24).
var syncBackGlobs = []string{"package-lock.json", "go.sum", "gen/**", "db/migrate/", "vendor/modules.txt"}

// measureSyncBack is the sync-back rows of issue 24, against deploy/sb (one replica, /app
// holding a 10,000-file tree of which the globs list 221 files; package-lock.json, unanchored,
// starts the scan at the mapping's root): a container write → the local
// file at the default --sync-back-interval, against the interval; the container CPU of one
// scan (the steady state's, what changed since the last one, and the full one every 30 s)
// against one `find` of the mapping; and an idle session's client CPU with sync-back on.
func (b *bench) measureSyncBack(ctx context.Context) error {
	ts, err := b.c.targets(ctx, "sb", 1)
	if err != nil {
		return err
	}
	t := ts[0]
	if err := b.c.sbTree(ctx, t); err != nil {
		return err
	}
	if err := b.scanCPU(ctx, t); err != nil {
		return err
	}

	// The local side starts empty: the initial sync uploads nothing and deletes nothing, and
	// every container write comes back.
	local := filepath.Join(b.tmp, "syncback")
	if err := os.MkdirAll(local, 0o755); err != nil {
		return err
	}
	args := []string{"deploy/sb"}
	for _, g := range syncBackGlobs {
		args = append(args, "--sync-back", g)
	}
	s := b.newSession().Args(args...).Map(local, "/app").Start()
	defer s.Stop()
	if _, err := s.Next("initial-sync", 2*time.Minute); err != nil {
		return err
	}
	// The full tree's first scan brings the listed files home.
	if err := poll(ctx, 2*time.Minute, func() (bool, error) {
		_, err := os.Stat(filepath.Join(local, "vendor/modules.txt"))
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("the listed files did not come home: %w\n%s", err, s.Dump())
	}
	time.Sleep(3 * time.Second) // let start-up work (GC, the informer, the stream) settle
	cpu0, err := cpuTicks(s.Pid())
	if err != nil {
		return err
	}
	start := time.Now()
	time.Sleep(b.idle)
	cpu1, err := cpuTicks(s.Pid())
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	cpu := float64(cpu1-cpu0) / clockTicks / secs * 100
	b.res.add(fmt.Sprintf("idle session with --sync-back (5 globs, 10,000-file mapping, 1 s interval), over %.0f s: client CPU", secs), cpu, "% of a core").
		target("< 1%", cpu < 1)

	// Container write → local file (see writeBack).
	n := max(b.edits/3, 10)
	lat := make([]time.Duration, 0, n)
	for i := range n {
		d, err := b.writeBack(ctx, t, s, local, fmt.Sprintf("gen/w%d.go", i), i)
		if err != nil {
			return err
		}
		lat = append(lat, d)
		// Start the next write at a random phase of the interval.
		time.Sleep(time.Duration(b.rnd.Int64N(int64(time.Second))))
	}
	iv := msec(time.Second)
	p50, p95 := msec(median(lat)), msec(percentile(lat, 95))
	b.res.pair(fmt.Sprintf("container write → local file, p50, 1 s interval (n=%d)", n), p50, "ms", "the interval", iv).target("≤ 1.2×", p50 <= 1.2*iv)
	b.res.pair(fmt.Sprintf("container write → local file, p95, 1 s interval (n=%d)", n), p95, "ms", "the interval", iv).target("≤ 2×", p95 <= 2*iv)
	s.Stop()
	return b.measureSyncBackTrigger(ctx)
}

// sbTree writes sync-back's bench tree into /app of t: 50 directories × 196 files under src/
// (unlisted), 200 under gen/, 20 under db/migrate/, and the lockfiles: 10,000 files, of which
// syncBackGlobs list 221.
func (c *cluster) sbTree(ctx context.Context, t filesync.Target) error {
	_, err := c.sh(ctx, t, `mkdir -p /app && cd /app && i=0; while [ $i -lt 50 ]; do mkdir -p src/d$i; j=0; while [ $j -lt 196 ]; do echo "$i $j" > src/d$i/f$j.go; j=$((j+1)); done; i=$((i+1)); done
mkdir -p gen db/migrate vendor; j=0; while [ $j -lt 200 ]; do echo "g $j" > gen/g$j.go; j=$((j+1)); done
j=0; while [ $j -lt 20 ]; do echo "m $j" > db/migrate/m$j.sql; j=$((j+1)); done
echo '{}' > package-lock.json; echo x > go.sum; echo x > vendor/modules.txt; find . -type f | wc -l`, nil)
	return err
}

// writeBack writes name (under /app) in t with one exec and returns how long after that exec
// returned (the write is done by then) the local file held it, polled every 2 ms.
func (b *bench) writeBack(ctx context.Context, t filesync.Target, s *sessiontest.Session, local, name string, i int) (time.Duration, error) {
	want := fmt.Sprintf("write %d %d", i, time.Now().UnixNano())
	if _, err := b.c.sh(ctx, t, "printf '%s' '"+want+"' > /app/"+name, nil); err != nil {
		return 0, err
	}
	at := time.Now()
	for {
		if got, _ := os.ReadFile(filepath.Join(local, name)); string(got) == want {
			return time.Since(at), nil
		}
		if time.Since(at) > time.Minute {
			return 0, fmt.Errorf("%s did not come home\n%s", name, s.Dump())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// measureSyncBackTrigger is the row of issue 24 for an image with inotifywait (deploy/sbi,
// app-gnu, the same tree): a container write → the local file when inotifywait's event runs the
// pass (a 1 h interval: no other scan runs), against the exec floor (`true` via client-go, in
// deploy/sb's busybox pod on the same node: app-gnu holds no `true`), measured alternately with
// the writes.
func (b *bench) measureSyncBackTrigger(ctx context.Context) error {
	ts, err := b.c.targets(ctx, "sbi", 1)
	if err != nil {
		return err
	}
	t := ts[0]
	if err := b.c.sbTree(ctx, t); err != nil {
		return err
	}
	fts, err := b.c.targets(ctx, "sb", 1)
	if err != nil {
		return err
	}
	// A tree that has been there a while, as a dev container's is: a scan lists what is newer
	// than about 3 s before the previous one, so the first pass after the trigger's start would
	// list and hash the whole tree just made (measured: the first write then took 1 s, the
	// others 40–100 ms).
	time.Sleep(4 * time.Second)
	local := filepath.Join(b.tmp, "syncback-inotify")
	if err := os.MkdirAll(local, 0o755); err != nil {
		return err
	}
	args := []string{"deploy/sbi", "--sync-back-interval", "1h"}
	for _, g := range syncBackGlobs {
		args = append(args, "--sync-back", g)
	}
	s := b.newSession().Args(args...).Map(local, "/app").Start()
	defer s.Stop()
	ev, err := s.Next("sync-back-trigger", 2*time.Minute)
	if err != nil {
		return err
	}
	if ev.Reason != "watching" {
		return fmt.Errorf("no inotifywait trigger in deploy/sbi: %+v\n%s", ev, s.Dump())
	}
	// The pass that the trigger's start runs brings the listed files home.
	if err := poll(ctx, 2*time.Minute, func() (bool, error) {
		_, err := os.Stat(filepath.Join(local, "vendor/modules.txt"))
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("the listed files did not come home: %w\n%s", err, s.Dump())
	}
	time.Sleep(3 * time.Second) // let start-up work settle
	n := max(b.edits/3, 10)
	lat := make([]time.Duration, 0, n)
	floors := make([]time.Duration, 0, n)
	for i := range n {
		f, err := b.c.floor(ctx, fts[0])
		if err != nil {
			return err
		}
		floors = append(floors, f)
		d, err := b.writeBack(ctx, t, s, local, fmt.Sprintf("gen/i%d.go", i), i)
		if err != nil {
			return err
		}
		lat = append(lat, d)
		time.Sleep(time.Duration(200+b.rnd.Int64N(300)) * time.Millisecond)
	}
	b.logf("inotify write→local ms: %s; floor ms: %s", fmtDurations(lat), fmtDurations(floors))
	f50, f95 := msec(median(floors)), msec(percentile(floors, 95))
	p50, p95 := msec(median(lat)), msec(percentile(lat, 95))
	b.res.pair(fmt.Sprintf("container write → local file with inotifywait in the image (app-gnu; 1 h interval: the trigger alone), p50 (n=%d)", n), p50, "ms", "the exec floor, p50", f50).target("≤ 2×", p50 <= 2*f50)
	b.res.pair(fmt.Sprintf("the same, p95 (n=%d)", n), p95, "ms", "the exec floor, p95", f95).target("≤ 2×", p95 <= 2*f95)
	return nil
}

// scanCPU records the container CPU of one sync-back scan of /app, the steady state's and the
// full one, against one `find` of it, each run reps times in one exec and in alternating order:
// user+sys from `times`, of the processes an exec's shell waits for and, for a scan over the
// stream, of the loop's shell itself too (its builtins read the time and stamp the markers).
func (b *bench) scanCPU(ctx context.Context, t filesync.Target) error {
	g, err := ignore.NewGlobs(syncBackGlobs)
	if err != nil {
		return err
	}
	hashed, _ := g.FileTests()                           // as pkg/syncback passes them
	now, err := b.c.sh(ctx, t, "sleep 1; date +%s", nil) // nothing in the tree is newer
	if err != nil {
		return err
	}
	since, err := strconv.ParseInt(strings.TrimSpace(now), 10, 64)
	if err != nil {
		return err
	}
	const reps = 10
	// $1: how many runs; $2: the script; the rest: its $0 and arguments.
	execLoop := `n=$1 s=$2; shift 2; i=0; while [ $i -lt $n ]; do sh -c "$s" "$@" >/dev/null || exit; i=$((i+1)); done; times`
	// A scan as the stream's loop runs it (scripts/stream.sh), with the loop's own functions
	// (remote.StreamScanFuncs) and $0 livesync-stream: livesync_mark in the loop's shell, then
	// livesync_scan in a subshell; a scan that looks back looks back to two seconds before the
	// previous one's now, as pkg/syncback asks. $1: how many runs; the rest: scan.sh's
	// arguments. The markers are warmed first, a scan a second for seven seconds (as a loop's
	// are after as many of sync-back), so that the measured scans take one of the ring's, not
	// the touch of a loop's first scans; the last line names the marker the next would take.
	// Both lines of `times`, before and after the measured runs, count: the loop's shell (its
	// builtins, the subshells' forks, and this loop's own counting, a few microseconds) and
	// its children.
	streamLoop := remote.StreamScanFuncs() + `n=$1 d=$2 s=$3; shift 3
scan() { livesync_mark; e=$( { livesync_scan "$d" "$s" "$@"; } </dev/null 2>&1 >/dev/null) || exit; [ -z "$s" ] || s=$((livesync_t - 2)); }
if [ -n "$s" ]; then i=0; while [ $i -lt 7 ]; do scan "$@"; sleep 1; i=$((i+1)); done; fi
times; i=0; while [ $i -lt $n ]; do scan "$@"; i=$((i+1)); done; times
if [ -n "$s" ]; then livesync_pick "$s"; echo "marker ${livesync_m##*/}"; fi`
	run := func(argv []string, stream bool) (time.Duration, error) {
		var stdout, stderr strings.Builder
		full := append([]string{"sh", "-c", execLoop, "bench", strconv.Itoa(reps), argv[2]}, argv[3:]...)
		if stream {
			full = append([]string{"sh", "-c", streamLoop, "livesync-stream", strconv.Itoa(reps)}, argv[4:]...)
		}
		if err := b.c.exec.Exec(ctx, t, full, nil, &stdout, &stderr); err != nil {
			return 0, fmt.Errorf("%w: %s", err, stderr.String())
		}
		if !stream {
			return childTimes(stdout.String(), reps)
		}
		out, marker, _ := strings.Cut(stdout.String(), "marker ")
		if m := strings.TrimSpace(marker); m == "s" || (m == "" && argv[5] != "") {
			return 0, fmt.Errorf("steady scans without a marker of the ring (%q): the touch fallback was measured", m)
		}
		return loopTimes(out, reps)
	}
	var inc, incExec, fullScan, find []time.Duration
	for round := range 3 {
		steps := []struct {
			into   *[]time.Duration
			argv   []string
			stream bool
		}{
			{&inc, remote.ScanArgv("/app", since+int64(round), g.Starts(), hashed), true},
			{&incExec, remote.ScanArgv("/app", since+int64(round), g.Starts(), hashed), false},
			{&fullScan, remote.ScanArgv("/app", 0, g.Starts(), hashed), true},
			{&find, []string{"sh", "-c", `find "$1"`, "find", "/app"}, false},
		}
		if round%2 == 1 {
			steps[0], steps[3] = steps[3], steps[0]
		}
		for _, st := range steps {
			d, err := run(st.argv, st.stream)
			if err != nil {
				return err
			}
			*st.into = append(*st.into, d)
		}
	}
	f := msec(median(find))
	b.res.pair("container CPU per sync-back scan over the stream, steady state (what changed since the last), 10,000-file mapping, 5 globs", msec(median(inc)), "ms", "one `find` of the mapping", f).
		target("≤ 1×", median(inc) <= median(find))
	b.res.pair("the same scan as an exec of its own (a container without dd)", msec(median(incExec)), "ms", "one `find` of the mapping", f)
	b.res.pair("container CPU per full sync-back scan over the stream (every 30 s: lists all under the globs' start points, here the whole mapping, and hashes the files the globs may list), 10,000-file mapping, 5 globs", msec(median(fullScan)), "ms", "one `find` of the mapping", f)
	return nil
}

// childTimes parses the second line of `times` (the children's user and system time, "0m1.23s
// 0m0.45s") into the CPU per run of reps runs.
func childTimes(out string, reps int) (time.Duration, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		return 0, fmt.Errorf("unexpected `times` output %q", out)
	}
	sum, err := timesLine(lines[len(lines)-1])
	return sum / time.Duration(reps), err
}

// loopTimes parses two runs of `times`, before and after reps runs, into the CPU per run of the
// shell and its children together: what the second adds to the first, on both lines.
func loopTimes(out string, reps int) (time.Duration, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		return 0, fmt.Errorf("unexpected `times` output %q", out)
	}
	var sum time.Duration
	for i, l := range lines {
		d, err := timesLine(l)
		if err != nil {
			return 0, err
		}
		if i < 2 {
			d = -d
		}
		sum += d
	}
	return sum / time.Duration(reps), nil
}

// timesLine sums a line of `times`: a user and a system time, "0m1.23s 0m0.45s".
func timesLine(line string) (time.Duration, error) {
	var sum time.Duration
	for _, f := range strings.Fields(line) {
		m, s, ok := strings.Cut(strings.TrimSuffix(f, "s"), "m")
		if !ok {
			return 0, fmt.Errorf("unexpected `times` field %q", f)
		}
		d, err1 := time.ParseDuration(m + "m")
		e, err2 := time.ParseDuration(s + "s")
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("unexpected `times` field %q", f)
		}
		sum += d + e
	}
	return sum, nil
}
