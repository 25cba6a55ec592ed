//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// TestSyncBigSaveMoves: what the container already holds is moved or copied there, not sent
// again, and a file written to a temporary name and renamed over the real one is sent once,
// under its real name; a move whose source the container changed is refused and the file is
// sent whole. Every step ends with the container's tree equal to the local one, content hashes
// included.
func TestSyncBigSaveMoves(t *testing.T) {
	ns := namespace(t)
	repo := "bigsave-" + ns
	pushImage(t, repo, "dev", "app")
	deployment(t, ns, "web", image(repo, "dev"), 1, corev1.PullIfNotPresent)
	local := t.TempDir()
	const size = 1 << 20
	rnd := rand.New(rand.NewPCG(1, 2))
	binary := func() []byte {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(rnd.IntN(256))
		}
		return b
	}
	writeBytes := func(rel string, b []byte) {
		t.Helper()
		p := filepath.Join(local, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mv := func(from, to string) {
		t.Helper()
		if err := os.Rename(filepath.Join(local, filepath.FromSlash(from)), filepath.Join(local, filepath.FromSlash(to))); err != nil {
			t.Fatal(err)
		}
	}
	writeBytes("bin/server.old", binary())
	write(t, filepath.Join(local, "bin", "small"), "s")
	const sel, root = "app=web", "/app"
	s := newSession(t, ns).Args("deploy/web").Map(local, root).Start()
	waitConverged(t, ns, sel, 1, local, root, 2*time.Minute)
	pod := runningPods(t, ns, sel)[0].Name
	if _, err := s.Settle(time.Second); err != nil {
		t.Fatal(err)
	}
	seen := len(s.Events())
	// step does what changes the tree, waits until the container holds it, and returns the
	// batches it took.
	step := func(name string, do func()) []sessiontest.Event {
		t.Helper()
		do()
		waitConverged(t, ns, sel, 1, local, root, time.Minute)
		if _, err := s.Settle(time.Second); err != nil {
			t.Fatal(err)
		}
		var out []sessiontest.Event
		evs := s.Events()
		for _, ev := range evs[seen:] {
			if ev.Type == "batch" {
				out = append(out, ev)
			}
		}
		seen = len(evs)
		return out
	}
	sent := func(bs []sessiontest.Event) (n int64) {
		for _, b := range bs {
			n += b.Bytes
		}
		return n
	}

	// sentUnder: the bytes of the batches that name name and not real (a batch that moves a
	// temporary file into place names both: the copy under its real name, the delete). The
	// temporary file may go before its bytes do: the watcher sees it created, and a writer
	// the machine's load holds between its open and its first write past the quiet window
	// and TempSettle (seen at load 11 on 2 cores) leaves it empty for that long; its bytes
	// must not go under it.
	sentUnder := func(bs []sessiontest.Event, name, real string) (n int64) {
		for _, b := range bs {
			if slices.Contains(b.Names, name) && !slices.Contains(b.Names, real) {
				n += b.Bytes
			}
		}
		return n
	}

	if bs := step("a rename", func() { mv("bin/server.old", "bin/server") }); sent(bs) > 16<<10 {
		t.Errorf("a rename sent %d bytes in %d batches, want it moved in the container", sent(bs), len(bs))
	}
	if bs := step("git mv of a directory", func() { mv("bin", "out") }); sent(bs) > 16<<10 {
		t.Errorf("a moved directory sent %d bytes, want its file moved in the container", sent(bs))
	}
	if bs := step("a copy of a known file", func() {
		b, err := os.ReadFile(filepath.Join(local, "out", "server"))
		if err != nil {
			t.Fatal(err)
		}
		writeBytes("out/server.copy", b)
	}); sent(bs) > 16<<10 {
		t.Errorf("a copy sent %d bytes, want it copied in the container", sent(bs))
	}
	if bs := step("temp + rename", func() {
		// As `cp x .x.tmp && mv .x.tmp x` does it: the rename is another process's, a few
		// ms after the close.
		writeBytes("out/.server.tmp", binary())
		if out, err := exec.Command("mv", filepath.Join(local, "out", ".server.tmp"), filepath.Join(local, "out", "server")).CombinedOutput(); err != nil {
			t.Fatalf("mv: %v: %s", err, out)
		}
	}); sent(bs) < size || sent(bs) > size+size/2 || sentUnder(bs, root+"/out/.server.tmp", root+"/out/server") >= size/2 {
		t.Errorf("temp + rename: %d bytes in %d batches (%v), want the file's bytes sent once, under its real name only", sent(bs), len(bs), bs)
	}
	// The container's copy of a move's source changed behind the session's back (its index
	// still has the old sum): the move is refused, nothing is moved, and the file is sent.
	r := kexec(t, ns, pod, "sh", "-c", "rm -f /app/out/server.copy && printf changed >> /app/out/server")
	if r.code != 0 {
		t.Fatalf("changing the container's copy: %s", r)
	}
	if bs := step("a refused move", func() {
		if err := os.Remove(filepath.Join(local, "out", "server.copy")); err != nil {
			t.Fatal(err)
		}
		mv("out/server", "out/renamed")
	}); sent(bs) < size {
		t.Errorf("a refused move sent %d bytes, want the file sent whole", sent(bs))
	}
	b, err := os.ReadFile(filepath.Join(local, "out", "renamed"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if r := kexec(t, ns, pod, "sha256sum", "/app/out/renamed"); r.code != 0 || !strings.HasPrefix(r.stdout, hex.EncodeToString(sum[:])) {
		t.Fatalf("the container's copy: %s, want sha256 %x", r, sum)
	}
}

// TestSyncBigSaveDelta: a large file saved again goes as a patch of the container's copy (here
// over an exec per batch, whose link is not measured fast), which the container builds beside
// it and renames only once it hashes as the local file: the container's file is byte-identical
// (its sha256) after bytes changed in place and after bytes inserted, and a patch of a copy the
// container changed behind the session's back builds the wrong hash, is refused, leaves no
// temporary file, and the file is sent whole.
func TestSyncBigSaveDelta(t *testing.T) {
	ns := namespace(t)
	repo := "bigdelta-" + ns
	pushImage(t, repo, "dev", "app")
	deployment(t, ns, "web", image(repo, "dev"), 1, corev1.PullIfNotPresent)
	local := t.TempDir()
	const size = 4 << 20
	rnd := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rnd.IntN(256))
	}
	name := filepath.Join(local, "server")
	if err := os.WriteFile(name, data, 0o755); err != nil {
		t.Fatal(err)
	}
	const sel, root = "app=web", "/app"
	s := newSession(t, ns).Args("deploy/web", "--transport", "exec").Map(local, root).Start()
	waitConverged(t, ns, sel, 1, local, root, 2*time.Minute)
	pod := runningPods(t, ns, sel)[0].Name
	if _, err := s.Settle(time.Second); err != nil {
		t.Fatal(err)
	}
	seen := len(s.Events())
	save := func(b []byte) int64 {
		t.Helper()
		if err := os.WriteFile(name, b, 0o755); err != nil {
			t.Fatal(err)
		}
		waitConverged(t, ns, sel, 1, local, root, time.Minute)
		if _, err := s.Settle(time.Second); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if r := kexec(t, ns, pod, "sha256sum", root+"/server"); r.code != 0 || !strings.HasPrefix(r.stdout, hex.EncodeToString(sum[:])) {
			t.Fatalf("the container's file: %s, want sha256 %x", r, sum)
		}
		var n int64
		evs := s.Events()
		for _, ev := range evs[seen:] {
			if ev.Type == "batch" {
				n += ev.Bytes
			}
		}
		seen = len(evs)
		return n
	}
	copy(data[size/2:], "a new version string")
	if n := save(data); n > size/8 {
		t.Errorf("bytes changed in place: %d bytes sent, want a patch", n)
	}
	data = append(data[:size/4], append([]byte("one more line of code\n"), data[size/4:]...)...)
	if n := save(data); n > size/8 {
		t.Errorf("bytes inserted: %d bytes sent, want a patch", n)
	}
	// Bytes of a block the patch copies change in the container (bytes only appended would
	// not matter: the patch copies the blocks it needs, and what it builds hashes right).
	if r := kexec(t, ns, pod, "sh", "-c", "printf changed | dd of="+root+"/server bs=1 seek=3000000 conv=notrunc 2>/dev/null"); r.code != 0 {
		t.Fatalf("changing the container's copy: %s", r)
	}
	copy(data[10:], "v3")
	if n := save(data); n < size {
		t.Errorf("a refused patch: %d bytes sent, want the file whole", n)
	}
	if r := kexec(t, ns, pod, "sh", "-c", "ls -a "+root); r.code != 0 || strings.Contains(r.stdout, ".livesync-patch") {
		t.Errorf("left in the container: %s", r)
	}
}
