package remote

import (
	"context"
	"io"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/localexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testtree"
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

// busybox returns an executor whose tools are busybox applets (see
// localexec.Busybox).
func busybox(t testing.TB, without ...string) *localExecutor {
	t.Helper()
	return &localExecutor{Runner: *localexec.Busybox(t, without...)}
}

// executors returns the busybox and GNU (host) variants to run a test with.
func executors(t *testing.T) map[string]*localExecutor {
	t.Helper()
	out := map[string]*localExecutor{}
	for name, r := range localexec.Variants(t) {
		out[name] = &localExecutor{Runner: *r}
	}
	return out
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
