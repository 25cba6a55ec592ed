package planner

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Hashing a small file allocates about what the hash needs, not a read
// buffer per file: a cold start hashes every local file the container
// holds at the same size, 100,000 of them in a monorepo.
func TestHashFileAllocatesLittle(t *testing.T) {
	if raceOn {
		t.Skip("under -race, sync.Pool drops buffers at random")
	}
	name := filepath.Join(t.TempDir(), "f.js")
	must(t, os.WriteFile(name, []byte("console.log(1)\n"), 0o644))
	_, _ = hashFile(name) // the pool's first buffer
	const n = 100
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		if _, err := hashFile(name); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 4<<10 {
		t.Errorf("hashing a 15-byte file allocated %d bytes", per)
	}
}
