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

// fanoutReplicas are the deployments of the fan-out rows: how cost grows with replicas.
var fanoutReplicas = []int{1, 5, 10, 20, 40}

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
		cpu  map[string]int64 // ticks over its measured batches
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
			before := sd.path.ticks()
			if err := os.WriteFile(filepath.Join(sd.dir, "edit.txt"), textContent(seed, 100+i%50), 0o644); err != nil {
				return err
			}
			ev, err := sd.s.Next("batch", 30*time.Second)
			if err != nil {
				return err
			}
			if i >= 0 {
				addTicks(sd.cpu, diffTicks(sd.path.ticks(), before))
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
	one := sides[0].lat
	for _, sd := range sides {
		b.logf("batch %d replicas ms: %s", sd.n, fmtDurations(sd.lat))
	}
	b.logf("exec true ×1 ms: %s; ×5 parallel: %s", fmtDurations(raw1), fmtDurations(raw5))
	for _, sd := range sides {
		b.logf("CPU per batch, %d replicas, ms: %s", sd.n, fmtTicks(sd.cpu, len(sd.lat)))
	}
	n := fmt.Sprintf(" (n=%d)", len(one))
	targets := map[int]float64{5: 1.3, 10: 1.6}
	for _, sd := range sides[1:] {
		r := b.res.pair(fmt.Sprintf("batch time, %d replicas, p50%s", sd.n, n), msec(median(sd.lat)), "ms", "1 replica", msec(median(one)))
		if want, ok := targets[sd.n]; ok {
			r.target(fmt.Sprintf("≤ %.1f× one replica", want), msec(median(sd.lat)) <= want*msec(median(one)))
		}
	}
	// On this machine every replica's share (container, shim, and the daemons' work for it)
	// runs on the same cores as the client: a batch's wall time can't drop below its CPU
	// spread over them. Per replica, the growth is what one more replica costs.
	cpu1 := ticksPer(sumTicks(sides[0].cpu), len(one))
	box1 := ticksPer(sides[0].cpu["container"], len(one))
	for _, sd := range sides[1:] {
		c := ticksPer(sumTicks(sd.cpu), len(sd.lat))
		b.res.pair(fmt.Sprintf("CPU per batch, %d replicas: containers, shims, containerd, kubelet, apiserver, client (n=%d; spread over %d cores: %.0f ms)", sd.n, len(sd.lat), runtime.NumCPU(), msec(c)/float64(runtime.NumCPU())),
			msec(c), "ms", "1 replica", msec(cpu1))
	}
	for _, sd := range sides {
		per := ticksPer(sumTicks(sd.cpu), len(sd.lat)*sd.n)
		box := ticksPer(sd.cpu["container"], len(sd.lat)*sd.n)
		b.res.pair(fmt.Sprintf("CPU per replica per batch, %d replicas: all on the path / the container alone (n=%d)", sd.n, len(sd.lat)),
			msec(per), "ms", fmt.Sprintf("1 replica (its container alone: %.2f ms; this side's: %.2f ms)", msec(box1), msec(box)), msec(cpu1))
	}
	b.res.pair("cluster limit: `true` exec'd into 5 pods at once, p50"+n, msec(median(raw5)), "ms", "into 1 pod", msec(median(raw1)))
	b.res.pair(fmt.Sprintf("CPU per `true` exec: runc+shim, containerd, kubelet, apiserver, client (n=%d)", b.edits/3), msec(cpu), "ms", "its wall time", msec(wall))
	for _, sd := range sides {
		sd.s.Stop()
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
	ticks, wall, err := execTicks(ctx, c, t, n)
	return ticksPer(sumTicks(ticks), n), wall, err
}

// execTicks is execCPU's CPU as ticks by process (cpuPath's names), for all n execs.
func execTicks(ctx context.Context, c *cluster, t filesync.Target, n int) (map[string]int64, time.Duration, error) {
	path, err := newCPUPath([]filesync.Target{t}, os.Getpid())
	if err != nil {
		return nil, 0, err
	}
	before := path.ticks()
	start := time.Now()
	for range n {
		if _, err := c.floor(ctx, t); err != nil {
			return nil, 0, err
		}
	}
	wall := time.Since(start) / time.Duration(n)
	return diffTicks(path.ticks(), before), wall, nil
}

// pathNames are the processes on the path of an exec or a stream frame into containers, as
// cpuPath names them.
var pathNames = []string{"container", "shim", "containerd", "kubelet", "kube-apiserver", "client"}

// cpuPath is the processes on the path into some containers: the containers' own (a stream's
// loop, with the dd and tar it reaps), their pods' shims (with the runc processes they reap),
// containerd, the kubelet, the apiserver and the client. They are found once: sampling them
// is then a few reads of /proc, not a walk of it.
type cpuPath struct {
	by map[string][]int
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
		for _, pid := range allPids() {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil && strings.Contains(string(b), id) {
				p.by["container"] = append(p.by["container"], pid)
			}
		}
	}
	return p, nil
}

// ticks samples the CPU ticks of the path's processes, children reaped included, by name.
func (p *cpuPath) ticks() map[string]int64 {
	by := map[string]int64{}
	for name, pids := range p.by {
		for _, pid := range pids {
			by[name] += procTicks(pid, true)
		}
	}
	return by
}

func diffTicks(after, before map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		d[k] = v - before[k]
	}
	return d
}

func addTicks(sum, add map[string]int64) {
	for k, v := range add {
		sum[k] += v
	}
}

func sumTicks(by map[string]int64) int64 {
	var n int64
	for _, v := range by {
		n += v
	}
	return n
}

// ticksPer is ticks of CPU spread over n events.
func ticksPer(ticks int64, n int) time.Duration {
	return time.Duration(ticks) * (time.Second / clockTicks) / time.Duration(n)
}

// fmtTicks lists by's CPU per event by process, in ms.
func fmtTicks(by map[string]int64, n int) string {
	parts := make([]string, 0, len(pathNames))
	for _, name := range pathNames {
		parts = append(parts, fmt.Sprintf("%s %.1f", name, msec(ticksPer(by[name], n))))
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
