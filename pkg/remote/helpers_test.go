package remote

import (
	"context"
	"io"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/localexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testtree"
	clocktesting "k8s.io/utils/clock/testing"
)

var testTarget = Target{Namespace: "ns", Pod: "web-1", Container: "app", ContainerID: "c1"}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// localExecutor runs this package's scripts on this machine (see localexec).
type localExecutor struct{ localexec.Runner }

func (l *localExecutor) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return l.Run(ctx, argv, stdin, stdout, stderr)
}

// busybox returns an executor whose tools are busybox applets, skipping the
// test when busybox is not installed.
func busybox(t testing.TB, without ...string) *localExecutor {
	t.Helper()
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("needs /bin/busybox (apt-get install busybox-static)")
	}
	r, err := localexec.NewBusybox("/bin/busybox", t.TempDir(), without...)
	if err != nil {
		t.Fatal(err)
	}
	return &localExecutor{Runner: *r}
}

// executors returns the busybox and GNU (host) variants to run a test with.
func executors(t *testing.T) map[string]*localExecutor {
	t.Helper()
	if _, err := os.Stat("/bin/tar"); err != nil {
		t.Skip("needs GNU tar at /bin/tar")
	}
	return map[string]*localExecutor{"busybox": busybox(t), "gnu": {}}
}

// waitForWaiters yields until something waits on fc.
func waitForWaiters(t *testing.T, fc *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !fc.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("nothing started waiting on the clock")
		}
		runtime.Gosched()
	}
}

// waitForNWaiters yields until n timers wait on fc.
func waitForNWaiters(t *testing.T, fc *clocktesting.FakeClock, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for fc.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters on the clock, want %d", fc.Waiters(), n)
		}
		runtime.Gosched()
	}
}

// writeTree and readTree are testtree's Write and Read.
func writeTree(t *testing.T, dir string, entries map[string]string) {
	t.Helper()
	testtree.Write(t, dir, entries)
}
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	return testtree.Read(t, dir)
}
