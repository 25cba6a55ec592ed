package filesync

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
)

// What the container already holds is moved or copied there, not sent
// again: a rename, a copy, a moved directory; a source that is not what was
// confirmed there is refused, and the batch is sent whole.
func TestEngineMovesWhatTheContainerHolds(t *testing.T) {
	f := newEngineFixture(t, Config{})
	big := strings.Repeat("a built binary\n", 10_000) // 150 KB
	writeTree(t, f.local, map[string]string{"bin/server.old": big, "bin/small": "s"})
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
		t.Fatal(ev.Err)
	}
	local := func(rel string) string { return filepath.Join(f.local, filepath.FromSlash(rel)) }
	rescan := coalesce.Change{Root: f.local, Rescan: true}
	step := func(name string, minBytes, maxBytes int64, do func()) {
		t.Helper()
		do()
		b := f.batch(t, rescan, 1)
		if b.Failed != 0 || b.Bytes < minBytes || b.Bytes > maxBytes {
			t.Fatalf("%s: batch = %+v, want it to send %d to %d bytes", name, b, minBytes, maxBytes)
		}
		assertSameTree(t, f.local, f.remote("web-1"))
	}
	step("a rename", 0, 0, func() { must(t, os.Rename(local("bin/server.old"), local("bin/server"))) })
	step("a copy", 0, 0, func() {
		writeTree(t, f.local, map[string]string{"bin/server.copy": big})
		must(t, os.Chmod(local("bin/server.copy"), 0o755))
	})
	step("a moved directory", 0, 4<<10, func() { must(t, os.Rename(local("bin"), local("out"))) })
	// The container's copy of a source changed behind the index's back:
	// refused, and the file is sent.
	step("a delete", 0, 0, func() { must(t, os.Remove(local("out/server.copy"))) })
	must(t, os.WriteFile(filepath.Join(f.remote("web-1"), "out", "server"), []byte(strings.Repeat("x", len(big))), 0o755))
	step("a refused move", int64(len(big)), int64(len(big))+16<<10, func() { must(t, os.Rename(local("out/server"), local("out/server.new"))) })
	if got, err := os.ReadFile(filepath.Join(f.remote("web-1"), "out", "server.new")); err != nil || string(got) != big {
		t.Fatalf("after a refused move: %d bytes, %v", len(got), err)
	}
}
