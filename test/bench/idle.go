//go:build bench

package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// measureIdle is the idle row of the stream issue: an idle session with one target (the
// latency phase's, just after its initial sync), over b.idle: the client's CPU, and the
// heartbeat frames its stream sent, counted by the loop in the container from its /proc io
// counters. A heartbeat is "SEQ\n" read (len(SEQ)+1 bytes) and "K<SEQ> 0\0" written
// (len(SEQ)+4 bytes), so each one adds exactly 3 to wchar − rchar whatever the length of SEQ.
func (b *bench) measureIdle(l *latencyRun) error {
	id := strings.TrimPrefix(l.t.ContainerID, "containerd://")
	time.Sleep(3 * time.Second) // let start-up work (GC, the informer, the stream's probe) settle
	loop, err := streamLoop(id)
	if err != nil {
		return err
	}
	cpu0, err := cpuTicks(l.s.Pid())
	if err != nil {
		return err
	}
	r0, w0, err := procIO(loop)
	if err != nil {
		return err
	}
	start := time.Now()
	time.Sleep(b.idle)
	cpu1, err := cpuTicks(l.s.Pid())
	if err != nil {
		return err
	}
	r1, w1, err := procIO(loop)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	if d := (w1 - w0) - (r1 - r0); d < 0 || d%3 != 0 {
		return fmt.Errorf("stream loop %d: read %d and wrote %d bytes idle, not a whole number of heartbeats", loop, r1-r0, w1-w0)
	}
	frames := ((w1 - w0) - (r1 - r0)) / 3
	cpu := float64(cpu1-cpu0) / clockTicks / secs * 100
	b.logf("idle %.1f s: client CPU %d ticks, heartbeat frames %d (loop read %d, wrote %d bytes)", secs, cpu1-cpu0, frames, r1-r0, w1-w0)
	b.res.add(fmt.Sprintf("idle session, 1 target, over %.0f s: client CPU (whole binary)", secs), cpu, "% of a core").
		target("< 1%", cpu < 1)
	perTen := float64(frames) / secs * 10
	b.res.add(fmt.Sprintf("idle session, 1 target, over %.0f s: heartbeat frames sent (%d)", secs, frames), perTen, "per 10 s").
		target("≤ 1 per 10 s", perTen <= 1)
	return nil
}

// streamLoop finds the stream's loop of a container among the host's processes: in the
// container's cgroup, its command line ends with its $0, livesync-stream.
func streamLoop(containerID string) (int, error) {
	for _, pid := range allPids() {
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil || !strings.Contains(string(cg), containerID) {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.HasSuffix(string(bytes.TrimRight(cmd, "\x00")), "livesync-stream") {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no stream loop in container %s", containerID)
}

// procIO returns the bytes pid read and wrote (rchar, wchar of /proc/PID/io).
func procIO(pid int) (rchar, wchar int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "rchar":
			rchar = n
		case "wchar":
			wchar = n
		}
	}
	return rchar, wchar, nil
}
