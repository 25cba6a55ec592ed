package filesync

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// A batch goes compressed by the initial sync's rule (big enough, a sample
// shrinks, the container's gzip works) only over a link measured slow.
func TestCompressBatch(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "src.go"), []byte(strings.Repeat("package main // source\n", 20_000)), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "small.go"), []byte(strings.Repeat("x", 100<<10)), 0o644))
	random := make([]byte, 1<<20)
	_, _ = rand.Read(random)
	must(t, os.WriteFile(filepath.Join(dir, "random.bin"), random, 0o644))
	planOf := func(name string) *Plan {
		fi, err := os.Stat(filepath.Join(dir, name))
		must(t, err)
		e, _ := entryOf(fi)
		return &Plan{Copies: []Copy{{Rel: name, Name: name, Src: filepath.Join(dir, name), Entry: e}}}
	}
	remoteProfile := remote.Link{Rate: 50e6 / 8, RTT: 21 * time.Millisecond}
	for name, tt := range map[string]struct {
		gz   bool
		file string
		link remote.Link
		want bool
	}{
		"source over a slow link":       {true, "src.go", remoteProfile, true},
		"source, link not yet measured": {true, "src.go", remote.Link{}, true},
		"source over loopback":          {true, "src.go", remote.Link{Rate: 60e6, RTT: 2 * time.Millisecond}, false},
		"source, a near round trip":     {true, "src.go", remote.Link{RTT: 2 * time.Millisecond}, false},
		"source, no gzip":               {false, "src.go", remoteProfile, false},
		"small":                         {true, "small.go", remoteProfile, false},
		"incompressible":                {true, "random.bin", remoteProfile, false},
	} {
		if got := compressBatch(tt.gz, planOf(tt.file), tt.link); got != tt.want {
			t.Errorf("%s: compressBatch = %v, want %v", name, got, tt.want)
		}
	}
}
