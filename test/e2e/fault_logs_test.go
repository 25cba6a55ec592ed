//go:build e2e

package e2e

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// TestFaultLogsStreamCut: the kubelet is killed with SIGKILL under a --logs session and started
// again, as the fault suite does: the log stream breaks, and the session resumes from the last
// line it showed. The lines the container wrote while the kubelet was down arrive after it is
// back, and no line is lost or repeated (the numbered lines run on without a gap). Like
// TestFault it needs hack/localcluster's cluster and the cluster lock held exclusively:
//
//	flock -x /tmp/livesync-e2e.lock env E2E_RUN=TestFaultLogsStreamCut hack/e2e.sh
func TestFaultLogsStreamCut(t *testing.T) {
	lc, noCluster := localClusterFromEnv(t)
	if lc == nil {
		t.Logf("not run: %s", noCluster) // as TestFault records its cluster faults
		return
	}
	ns := namespace(t)
	webDeployment(t, ns)
	local := t.TempDir()
	write(t, filepath.Join(local, "index.html"), "v1")
	s := newSession(t, ns).Args("deploy/web", "--logs").Map(local, "/www").Timeout(3 * time.Minute).Start()
	defer s.Stop()
	s.WaitSynced()
	p := onePod(t, ns, "web")
	pod := p.Name
	// The kubelet of the pod's node: the one whose restart cuts the log stream.
	kubelet, err := lc.nodeDaemon("kubelet", p.Spec.NodeName)
	if err != nil {
		t.Fatal(err)
	}
	tick := func(ev sessiontest.Event) int {
		if ev.Type != "log" || ev.Target == nil || ev.Target.Pod != pod || !strings.HasPrefix(ev.Message, "tick ") {
			return -1
		}
		n, _ := strconv.Atoi(ev.Message[strings.LastIndexByte(ev.Message, ' ')+1:])
		return n
	}
	lastTick := func() int {
		n := -1
		for _, ev := range s.Events() {
			n = max(n, tick(ev))
		}
		return n
	}
	waitFor(t, "tick lines", time.Minute, func() (bool, error) { return lastTick() >= 5, nil })

	lc.lockCluster(t)
	if err := lc.restart(kubelet); err != nil {
		t.Fatalf("before killing the %s: %v", kubelet, err)
	}
	pid, err := lc.pid(kubelet)
	if err != nil {
		t.Fatal(err)
	}
	lc.outage(t, kubelet, pid)
	down := time.Now()
	before := lastTick()
	// The container keeps writing while the kubelet is down (containerd runs it).
	waitFor(t, "the outage to last 5s", 10*time.Second, func() (bool, error) { return time.Since(down) > 5*time.Second, nil })
	if err := lc.restart(kubelet); err != nil {
		t.Fatalf("restarting the %s: %v", kubelet, err)
	}
	lc.unlock()
	up := time.Now()
	t.Logf("%s (node %s) down %.1fs; last tick before %d", kubelet, p.Spec.NodeName, up.Sub(down).Seconds(), before)
	// Written during the outage (about 5 lines a second), shown after it.
	waitFor(t, "the lines written during the outage", 2*time.Minute, func() (bool, error) {
		return lastTick() >= before+int(up.Sub(down).Seconds()*5)+5, nil
	})
	s.Stop()
	late := 0
	for _, ev := range s.Events() {
		if tick(ev) < 0 {
			continue
		}
		printed, err1 := time.Parse(time.RFC3339Nano, ev.Time)
		written, err2 := time.Parse(time.RFC3339Nano, ev.LogTime)
		if err1 == nil && err2 == nil && written.After(down.Add(time.Second)) && written.Before(up) && printed.After(up) {
			late++
		}
	}
	if late == 0 {
		t.Errorf("no line written during the outage was shown after it: the stream was not cut, or they were lost")
	}
	n := checkLogNumbers(t, s.Events())
	t.Logf("%d tick lines, %d of them written during the outage and shown after it", n, late)
}
