//go:build e2e

package e2e

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// TestSyncBackDelta: a large listed file saved again goes as a patch, checked against what
// the container was last confirmed to hold in the same exec: a plain patch is a batch that
// changed it, with no conflict; a patch over bytes the app appended (which the patch's blocks
// would not carry) replaces nothing and is a conflict naming the container's sha256. No scan
// runs (a 1 h interval, no inotifywait), so only the upload's check can see the append. On
// busybox and on GNU tools.
func TestSyncBackDelta(t *testing.T) {
	for _, kind := range syncBackImages {
		t.Run(kind, func(t *testing.T) { testSyncBackDelta(t, kind) })
	}
}

func testSyncBackDelta(t *testing.T, kind string) {
	ns := namespace(t)
	repo := "syncback-delta-" + ns
	pushImage(t, repo, "dev", kind)
	deployment(t, ns, "web", image(repo, "dev"), 1, corev1.PullIfNotPresent)
	local := t.TempDir()
	const size = 4 << 20
	rnd := rand.New(rand.NewPCG(5, 6))
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rnd.IntN(256))
	}
	name := filepath.Join(local, "gen", "big.bin")
	write(t, name, string(data))
	const sel, root = "app=web", "/app"
	// An exec per batch: its link is not measured fast, so a save goes as a patch.
	s := newSession(t, ns).Args("deploy/web", "--transport", "exec", "--sync-back", "gen/**",
		"--sync-back-interval", "1h", "--sync-back-inotify=false").Map(local, root).Start().WaitSynced()
	defer s.Stop()
	waitConverged(t, ns, sel, 1, local, root, 2*time.Minute)
	pod := runningPods(t, ns, sel)[0].Name
	if _, err := s.Settle(time.Second); err != nil {
		t.Fatal(err)
	}
	seen := len(s.Events())

	copy(data[size/2:], "a new version string")
	write(t, name, string(data))
	waitConverged(t, ns, sel, 1, local, root, time.Minute)
	if _, err := s.Settle(time.Second); err != nil {
		t.Fatal(err)
	}
	var bytesSent int64
	changed := 0
	for _, ev := range s.Events()[seen:] {
		switch ev.Type {
		case "batch":
			bytesSent += ev.Bytes
			changed += ev.Changed
		case "conflict":
			t.Errorf("a plain patch reported a conflict: %+v", ev)
		}
	}
	if bytesSent > size/8 || changed != 1 {
		t.Errorf("a plain patch: %d bytes sent, %d changed; want a patch that changed 1", bytesSent, changed)
	}

	// The app appends to the file, then the local side saves it again.
	if r := kexec(t, ns, pod, "sh", "-c", "printf 'appended by the app' >> "+root+"/gen/big.bin"); r.code != 0 {
		t.Fatal(r)
	}
	theirs := string(append(bytes.Clone(data), "appended by the app"...))
	copy(data[10:], "v3")
	write(t, name, string(data))
	ev := s.WaitMatch("a conflict", func(ev sessiontest.Event) bool { return ev.Type == "conflict" })
	if ev.Path != name || ev.LocalSha256 != sha(string(data)) || ev.RemoteSha256 != sha(theirs) {
		t.Errorf("conflict event %+v, want local %s and the container's %s", ev, sha(string(data)), sha(theirs))
	}
	if r := kexec(t, ns, pod, "sha256sum", root+"/gen/big.bin"); r.code != 0 || len(r.stdout) < 64 || r.stdout[:64] != sha(theirs) {
		t.Errorf("the container's file: %s %q, want sha256 %s (the app's append kept)", r, r.stdout, sha(theirs))
	}
}
