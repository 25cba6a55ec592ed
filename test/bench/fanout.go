//go:build bench

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// fanoutReplicas are the deployments of the fan-out rows: how cost grows with replicas
// (-fanout; the first is the baseline, the second the cluster limit's).
var fanoutReplicas = []int{1, 5, 10, 20, 40}

// fanoutRemote: the fan-out phase ends with the remote profile's (-fanout-remote).
var fanoutRemote = true

// measureFanout is item 5: one session each on a 1-, 5-, 10-, 20- and 40-replica deployment,
// saves rotating between them, each timed by the session's own batch latency (first change
// seen → applied in every replica), with the CPU of everything on the path per batch and per
// replica. Paired with the cluster's own fan-out cost: `true` exec'd into 5 pods at once vs
// into 1, the order alternating. Then a 1 MB save through the remote profile (measureFanoutRemote).
func (b *bench) measureFanout(ctx context.Context) error {
	type side struct {
		name string
		n    int
		dir  string
		s    *sessiontest.Session
		ts   []filesync.Target
		lat  []time.Duration
		path *cpuPath
		cpu  map[string]int64 // ns of CPU over its measured batches, by cpuPath's names
		wall time.Duration    // the time those samples spanned
	}
	var sides []*side
	for _, n := range fanoutReplicas {
		sides = append(sides, &side{name: fmt.Sprintf("fan%d", n), n: n})
	}
	for _, sd := range sides {
		sd.dir = filepath.Join(b.tmp, sd.name)
		if err := os.MkdirAll(sd.dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(sd.dir, "edit.txt"), []byte("start\n"), 0o644); err != nil {
			return err
		}
		var err error
		if sd.ts, err = b.c.targets(ctx, sd.name, sd.n); err != nil {
			return err
		}
		sd.s = b.newSession().Args("deploy/"+sd.name).Map(sd.dir, "/app").Start()
		defer sd.s.Stop()
		for range sd.n {
			if _, err := sd.s.Next("initial-sync", 2*time.Minute); err != nil {
				return err
			}
		}
	}
	// Each side's CPU is sampled around each of its batches (the sides take turns, with pauses).
	for _, sd := range sides {
		var err error
		if sd.path, err = newCPUPath(sd.ts, sd.s.Pid()); err != nil {
			return err
		}
		sd.cpu = map[string]int64{}
	}
	var raw1, raw5 []time.Duration
	seed := uint64(time.Now().UnixNano())
	for i := -2; i < b.edits/3; i++ {
		for k := range sides {
			sd := sides[(k+i+3)%len(sides)]
			seed++
			before, start := sd.path.cpu(), time.Now()
			if err := os.WriteFile(filepath.Join(sd.dir, "edit.txt"), textContent(seed, 100+i%50), 0o644); err != nil {
				return err
			}
			ev, err := sd.s.Next("batch", 30*time.Second)
			if err != nil {
				return err
			}
			if i >= 0 {
				addCPU(sd.cpu, diffCPU(sd.path.cpu(), before))
				sd.wall += time.Since(start)
			}
			if ev.Targets != sd.n || ev.Failed != 0 {
				return fmt.Errorf("%s: a batch went to %d targets, %d failed", sd.name, ev.Targets, ev.Failed)
			}
			if i >= 0 {
				sd.lat = append(sd.lat, time.Duration(ev.LatencyMs*float64(time.Millisecond)))
			}
			time.Sleep(time.Duration(50+b.rnd.IntN(50)) * time.Millisecond)
			sd.s.Drain()
		}
		d5, d1, err := alternate(i, func() (time.Duration, error) { return parallelFloor(ctx, b.c, sides[1].ts) },
			func() (time.Duration, error) { return parallelFloor(ctx, b.c, sides[0].ts) })
		if err != nil {
			return err
		}
		if i >= 0 {
			raw1, raw5 = append(raw1, d1), append(raw5, d5)
		}
	}
	cpu, wall, err := execCPU(ctx, b.c, sides[0].ts[0], b.edits/3)
	if err != nil {
		return err
	}
	// The daemons are never idle (containerd, the kubelets and the apiserver burn 30–150 ms a
	// second here with nothing sent), nor is each pod's shell: what each side's processes burn
	// over as long with nothing sent is taken off, so each side is what its batches cost.
	const idleFor = 3 * time.Second
	for _, sd := range sides {
		before := sd.path.cpu()
		time.Sleep(idleFor)
		idle := diffCPU(sd.path.cpu(), before)
		b.logf("CPU of %d replicas' path idle, ms per s: %s", sd.n, fmtCPU(idle, int(idleFor/time.Second)))
		for k, v := range idle {
			sd.cpu[k] -= int64(float64(v) * sd.wall.Seconds() / idleFor.Seconds())
		}
	}
	one := sides[0].lat
	for _, sd := range sides {
		b.logf("batch %d replicas ms: %s", sd.n, fmtDurations(sd.lat))
	}
	b.logf("exec true ×1 ms: %s; ×5 parallel: %s", fmtDurations(raw1), fmtDurations(raw5))
	for _, sd := range sides {
		b.logf("CPU per batch, %d replicas, ms: %s", sd.n, fmtCPU(sd.cpu, len(sd.lat)))
	}
	n := fmt.Sprintf(" (n=%d)", len(one))
	targets := map[int]float64{10: 3.5}
	for _, sd := range sides[1:] {
		r := b.res.pair(fmt.Sprintf("batch time, %d replicas, p50%s", sd.n, n), msec(median(sd.lat)), "ms", "1 replica", msec(median(one)))
		if want, ok := targets[sd.n]; ok {
			r.target(fmt.Sprintf("≤ %.1f× one replica", want), msec(median(sd.lat)) <= want*msec(median(one)))
		}
	}
	// On this machine every replica's share (container, shim, and the daemons' work for it)
	// runs on the same cores as the client: a batch's wall time can't drop below its CPU
	// spread over them. Per replica, the growth is what one more replica costs.
	cpu1 := cpuPer(sumCPU(sides[0].cpu), len(one))
	box1 := cpuPer(sides[0].cpu["container"], len(one))
	for _, sd := range sides[1:] {
		c := cpuPer(sumCPU(sd.cpu), len(sd.lat))
		b.res.pair(fmt.Sprintf("CPU per batch, %d replicas, less the idle share: containers, shims, containerd, kubelet, apiserver, client (n=%d; spread over %d cores: %.0f ms)", sd.n, len(sd.lat), runtime.NumCPU(), msec(c)/float64(runtime.NumCPU())),
			msec(c), "ms", "1 replica", msec(cpu1))
	}
	client1 := cpuPer(sides[0].cpu["client"], len(one))
	for _, sd := range sides {
		per := cpuPer(sumCPU(sd.cpu), len(sd.lat)*sd.n)
		box := cpuPer(sd.cpu["container"], len(sd.lat)*sd.n)
		client := cpuPer(sd.cpu["client"], len(sd.lat)*sd.n)
		b.res.pair(fmt.Sprintf("CPU per replica per batch, %d replicas, less the idle share: all on the path (this side's container: %.2f ms, client: %.2f ms; n=%d)", sd.n, msec(box), msec(client), len(sd.lat)),
			msec(per), "ms", fmt.Sprintf("1 replica (its container: %.2f ms, client: %.2f ms)", msec(box1), msec(client1)), msec(cpu1))
	}
	b.res.pair(fmt.Sprintf("cluster limit: `true` exec'd into %d pods at once, p50%s", sides[1].n, n), msec(median(raw5)), "ms", "into 1 pod", msec(median(raw1)))
	b.res.pair(fmt.Sprintf("CPU per `true` exec: runc+shim, containerd, kubelet, apiserver, client (n=%d)", b.edits/3), msec(cpu), "ms", "its wall time", msec(wall))
	for _, sd := range sides {
		sd.s.Stop()
	}
	if !fanoutRemote {
		return nil
	}
	return b.measureFanoutRemote(ctx)
}

// remoteFanout are the replicas of the remote-profile fan-out row.
var remoteFanout = []int{1, 5, 10}

// measureFanoutRemote saves a 1 MB file into 1, 5 and 10 replicas through the remote-profile
// proxy, one session each, the saves rotating between them, each timed by the session's batch
// latency. The developer's uplink carries one copy per replica: N MiB at remoteRate is the
// least such a batch takes, whatever the tool.
func (b *bench) measureFanoutRemote(ctx context.Context) error {
	rc, closeProxy, err := b.remoteCluster()
	if err != nil {
		return err
	}
	defer closeProxy()
	type side struct {
		n   int
		dir string
		s   *sessiontest.Session
		lat []time.Duration
	}
	var sides []*side
	saved := b.c
	defer func() { b.c = saved }()
	b.c = rc
	for _, n := range remoteFanout {
		sd := &side{n: n, dir: filepath.Join(b.tmp, fmt.Sprintf("rfan%d", n))}
		if err := os.MkdirAll(sd.dir, 0o755); err != nil {
			return err
		}
		sd.s = b.newSession().Args(fmt.Sprintf("deploy/fan%d", n)).Map(sd.dir, "/rapp").Start()
		defer sd.s.Stop()
		for range n {
			if _, err := sd.s.Next("initial-sync", 2*time.Minute); err != nil {
				return err
			}
		}
		sides = append(sides, sd)
	}
	b.c = saved
	seed := uint64(time.Now().UnixNano())
	for i := -1; i < max(b.edits/6, 3); i++ {
		for k := range sides {
			sd := sides[(k+i+3)%len(sides)]
			seed++
			if err := os.WriteFile(filepath.Join(sd.dir, "big.bin"), content(seed, 1<<20), 0o644); err != nil {
				return err
			}
			ev, err := sd.s.Next("batch", time.Minute)
			if err != nil {
				return err
			}
			if ev.Targets != sd.n || ev.Failed != 0 {
				return fmt.Errorf("remote fan%d: a batch went to %d targets, %d failed", sd.n, ev.Targets, ev.Failed)
			}
			if i >= 0 {
				sd.lat = append(sd.lat, time.Duration(ev.LatencyMs*float64(time.Millisecond)))
			}
			time.Sleep(time.Duration(50+b.rnd.IntN(50)) * time.Millisecond)
			sd.s.Drain()
		}
	}
	prof := fmt.Sprintf("remote profile (%.0f Mbit/s, %s RTT)", remoteRate*8/1e6, remoteRTT)
	one := sides[0].lat
	for _, sd := range sides {
		b.logf("remote 1 MB batch %d replicas ms: %s", sd.n, fmtDurations(sd.lat))
		link := time.Duration(float64(sd.n<<20) / remoteRate * float64(time.Second))
		if sd.n == 1 {
			b.res.pair(fmt.Sprintf("1 MB save, batch time p50, 1 replica, %s (n=%d)", prof, len(sd.lat)), msec(median(sd.lat)), "ms",
				"the uplink alone for 1 MiB", msec(link))
			continue
		}
		b.res.pair(fmt.Sprintf("1 MB save, batch time p50, %d replicas, %s: the uplink carries %d copies, %.0f ms at least (n=%d)", sd.n, prof, sd.n, msec(link), len(sd.lat)),
			msec(median(sd.lat)), "ms", "1 replica", msec(median(one)))
	}
	return nil
}

// execCPU runs n sequential `true` execs into t and returns the CPU time they cost per exec in
// the processes on the exec path (see pathTicks; this process is the client), and their mean
// wall time. Other work in those daemons counts too, so it is an upper bound.
func execCPU(ctx context.Context, c *cluster, t filesync.Target, n int) (cpu, wall time.Duration, err error) {
	by, wall, err := execCPUBy(ctx, c, t, n)
	return cpuPer(sumCPU(by), n), wall, err
}

// execCPUBy is execCPU's CPU in ns by process (cpuPath's names), for all n execs.
func execCPUBy(ctx context.Context, c *cluster, t filesync.Target, n int) (map[string]int64, time.Duration, error) {
	path, err := newCPUPath([]filesync.Target{t}, os.Getpid())
	if err != nil {
		return nil, 0, err
	}
	before := path.cpu()
	start := time.Now()
	for range n {
		if _, err := c.floor(ctx, t); err != nil {
			return nil, 0, err
		}
	}
	wall := time.Since(start) / time.Duration(n)
	return diffCPU(path.cpu(), before), wall, nil
}

// pathNames are the processes on the path of an exec or a stream frame into containers, as
// cpuPath names them.
var pathNames = []string{"container", "shim", "containerd", "kubelet", "kube-apiserver", "client"}

// cpuPath is the processes on the path into some containers: the containers' own (a stream's
// loop, with the dd and tar it reaps), their pods' shims (with the runc processes they reap),
// containerd, the kubelet, the apiserver and the client. They are found once: sampling them
// is then a few reads of /proc and of the containers' cgroups, not a walk of /proc.
//
// The counts are nanoseconds, not the 10 ms ticks of /proc/PID/stat, which a small batch's
// few milliseconds per process fell between: a container's CPU is its cgroup's usage (every
// process it ever ran, the short-lived ones included), every other process's is the sum of
// its threads' run time (/proc/PID/task/*/schedstat) plus its reaped children's ticks.
type cpuPath struct {
	by      map[string][]int
	cgroups []string // the containers' CPU usage files (see cgroupUsage); none found: by["container"]
}

func newCPUPath(ts []filesync.Target, client int) (*cpuPath, error) {
	p := &cpuPath{by: map[string][]int{"client": {client}}}
	for _, name := range []string{"containerd", "kubelet", "kube-apiserver"} {
		p.by[name] = pidsOf(name)
	}
	for _, t := range ts {
		id := strings.TrimPrefix(t.ContainerID, "containerd://")
		shim, err := shimOf(id)
		if err != nil {
			return nil, err
		}
		p.by["shim"] = append(p.by["shim"], shim)
		var usage string
		for _, pid := range allPids() {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil && strings.Contains(string(b), id) {
				p.by["container"] = append(p.by["container"], pid)
				if usage == "" {
					usage = cgroupUsage(string(b))
				}
			}
		}
		if usage == "" {
			p.cgroups = nil // one container without: count them all by process
			break
		}
		p.cgroups = append(p.cgroups, usage)
	}
	return p, nil
}

// cpu samples the CPU of the path's processes in ns, by name.
func (p *cpuPath) cpu() map[string]int64 {
	by := map[string]int64{}
	for name, pids := range p.by {
		if name == "container" && len(p.cgroups) > 0 {
			continue
		}
		for _, pid := range pids {
			by[name] += procNS(pid)
		}
	}
	for _, f := range p.cgroups {
		by["container"] += readUsage(f)
	}
	return by
}

// cgroupUsage returns the file that holds the CPU usage of the cgroup in a /proc/PID/cgroup
// text: cgroup v1's cpuacct.usage (ns), or v2's cpu.stat (usage_usec); "" when neither is there.
func cgroupUsage(cgroup string) string {
	var v2 string
	for _, line := range strings.Split(strings.TrimSpace(cgroup), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			v2 = filepath.Join("/sys/fs/cgroup", f[2], "cpu.stat")
			continue
		}
		if slices.Contains(strings.Split(f[1], ","), "cpuacct") {
			for _, dir := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"} {
				if name := filepath.Join("/sys/fs/cgroup", dir, f[2], "cpuacct.usage"); readUsage(name) > 0 {
					return name
				}
			}
		}
	}
	if v2 != "" && readUsage(v2) > 0 {
		return v2
	}
	return ""
}

// readUsage reads a cgroup's CPU usage in ns from cgroupUsage's file; 0 if it can't.
func readUsage(name string) int64 {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	if filepath.Base(name) == "cpuacct.usage" {
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n * 1000
		}
	}
	return 0
}

// procNS is pid's CPU in ns: its threads' run time, and the ticks of its children that it reaped.
func procNS(pid int) int64 {
	var n int64
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, t := range tasks {
		if b, err := os.ReadFile(t); err == nil {
			f := strings.Fields(string(b))
			if len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				n += v
			}
		}
	}
	if len(tasks) == 0 {
		return procTicks(pid, true) * int64(time.Second/clockTicks)
	}
	if f := statFields(pid); len(f) >= 15 {
		for i := 13; i <= 14; i++ {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			n += v * int64(time.Second/clockTicks)
		}
	}
	return n
}

func diffCPU(after, before map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		d[k] = v - before[k]
	}
	return d
}

func addCPU(sum, add map[string]int64) {
	for k, v := range add {
		sum[k] += v
	}
}

func sumCPU(by map[string]int64) int64 {
	var n int64
	for _, v := range by {
		n += v
	}
	return n
}

// cpuPer is ns of CPU spread over n events.
func cpuPer(ns int64, n int) time.Duration {
	return time.Duration(ns) / time.Duration(n)
}

// fmtTicks lists by's CPU per event by process, in ms.
func fmtCPU(by map[string]int64, n int) string {
	parts := make([]string, 0, len(pathNames))
	for _, name := range pathNames {
		parts = append(parts, fmt.Sprintf("%s %.2f", name, msec(cpuPer(by[name], n))))
	}
	return strings.Join(parts, ", ")
}

// shimOf finds the containerd shim of a container: the parent of the container's first process,
// which is the process in the container's cgroup whose parent is not.
func shimOf(containerID string) (int, error) {
	in := map[int]int{} // pid → ppid
	for _, pid := range allPids() {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil && strings.Contains(string(b), containerID) {
			in[pid] = procPPID(pid)
		}
	}
	for _, ppid := range in {
		if _, ok := in[ppid]; !ok && ppid > 1 {
			return ppid, nil
		}
	}
	return 0, fmt.Errorf("no process of container %s found on this machine", containerID)
}

func allPids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// pidsOf returns the processes with one of the given command names.
func pidsOf(names ...string) []int {
	var out []int
	for _, pid := range allPids() {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && slices.Contains(names, strings.TrimSpace(string(b))) {
			out = append(out, pid)
		}
	}
	return out
}

func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
}

func procPPID(pid int) int {
	f := statFields(pid)
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// procTicks returns the user+system CPU of pid in clock ticks, with its reaped children's
// when children is set.
func procTicks(pid int, children bool) int64 {
	f := statFields(pid)
	if len(f) < 15 {
		return 0
	}
	last := 12
	if children {
		last = 14
	}
	var n int64
	for i := 11; i <= last; i++ {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		n += v
	}
	return n
}

// parallelFloor execs `true` into every target at once and returns when the last returned.
func parallelFloor(ctx context.Context, c *cluster, ts []filesync.Target) (time.Duration, error) {
	start := time.Now()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		lastErr error
	)
	for _, t := range ts {
		wg.Go(func() {
			if _, err := c.floor(ctx, t); err != nil {
				mu.Lock()
				lastErr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return time.Since(start), lastErr
}
