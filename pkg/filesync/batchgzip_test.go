package filesync

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
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
	planOf := func(name string) *planner.Plan {
		fi, err := os.Stat(filepath.Join(dir, name))
		must(t, err)
		e, _ := planner.EntryOf(fi)
		return &planner.Plan{Copies: []planner.Copy{{Rel: name, Name: name, Src: filepath.Join(dir, name), Entry: e}}}
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

// last returns the mode of the last apply r saw.
func (r *modeRecorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.modes) == 0 {
		return ""
	}
	return r.modes[len(r.modes)-1]
}

// The engine compresses a batch by the rule, with the container's gzip as its
// listing found it: a large compressible save goes "z" over a link that was
// not measured fast (here an exec per batch, which measures nothing), a small
// one "x"; without gzip in the container, "x" whatever its size.
func TestEngineCompressesBatches(t *testing.T) {
	for name, without := range map[string][]string{"gzip": nil, "no gzip": {"gzip"}} {
		t.Run(name, func(t *testing.T) {
			rec := &modeRecorder{}
			f := newWrappedFixture(t, Config{}, func(ex Executor) Executor { rec.Executor = ex; return rec })
			if without != nil {
				nb := busybox(t, without...)
				nb.Sandbox = f.ex.Sandbox
				rec.Executor = nb
			}
			f.e.AddTarget(podTarget("web-1"))
			f.run(t)
			if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
				t.Fatal(ev.Err)
			}
			writeTree(t, f.local, map[string]string{"big.go": strings.Repeat("package main // source\n", 20_000)})
			f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "big.go")}, 1)
			want := "z"
			if without != nil {
				want = "x"
			}
			if got := rec.last(); got != want {
				t.Errorf("a 460 KB source file went %q, want %q", got, want)
			}
			writeTree(t, f.local, map[string]string{"small.go": "package main\n"})
			f.batch(t, coalesce.Change{Root: f.local, Path: filepath.Join(f.local, "small.go")}, 1)
			if got := rec.last(); got != "x" {
				t.Errorf("a small file went %q, want x", got)
			}
			assertSameTree(t, f.local, f.remote("web-1"))
		})
	}
}

// A batch's send reports progress only once it has run for
// batchProgressAfter; an initial sync's from the start.
func TestBatchProgressAfter(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	var got []Progress
	pe := &progressExecutor{clk: fc, start: fc.Now(), after: batchProgressAfter, report: func(p Progress) { got = append(got, p) }}
	r := &countingReader{r: strings.NewReader(strings.Repeat("x", 100)), p: pe}
	buf := make([]byte, 10)
	_, _ = r.Read(buf)
	fc.Step(batchProgressAfter / 2)
	_, _ = r.Read(buf)
	if len(got) != 0 {
		t.Fatalf("reported before %s: %+v", batchProgressAfter, got)
	}
	fc.Step(batchProgressAfter)
	_, _ = r.Read(buf)
	if len(got) != 1 || got[0].Bytes != 30 || got[0].Elapsed != 3*batchProgressAfter/2 {
		t.Fatalf("after %s: %+v, want one report of 30 bytes", 3*batchProgressAfter/2, got)
	}
}
