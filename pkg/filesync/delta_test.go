package filesync

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/delta"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return b
}

// waitSig waits until the engine learned the signature of content.
func waitSig(t *testing.T, e *Engine, content []byte) {
	t.Helper()
	sum := sha256.Sum256(content)
	deadline := time.Now().Add(20 * time.Second)
	for e.sigs.Get(sum) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the signature of what was sent was never learned")
		}
		runtime.Gosched()
	}
}

// A large file saved again goes as a patch of the container's copy; one the
// container changed behind the session's back is refused and sent whole.
func TestEngineSendsDeltas(t *testing.T) {
	f := newEngineFixture(t, Config{})
	v1 := randomBytes(3, 2<<20)
	writeTree(t, f.local, map[string]string{"bin/server": string(v1)})
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
		t.Fatal(ev.Err)
	}
	waitSig(t, f.e, v1)
	name := filepath.Join(f.local, "bin", "server")
	change := coalesce.Change{Root: f.local, Path: name}

	v2 := bytes.Join([][]byte{v1[:1<<20], []byte("an inserted line"), v1[1<<20:]}, nil)
	must(t, os.WriteFile(name, v2, 0o755))
	if b := f.batch(t, change, 1); b.Failed != 0 || b.Bytes > 2*deltaBlock {
		t.Fatalf("a patch: batch = %+v, want at most %d bytes sent", b, 2*deltaBlock)
	}
	assertSameTree(t, f.local, f.remote("web-1"))

	// The container's copy changed: the patch is refused, the old file is
	// left for the whole file to replace.
	must(t, os.WriteFile(filepath.Join(f.remote("web-1"), "bin", "server"), []byte("changed in the container"), 0o755))
	v3 := bytes.Clone(v2)
	copy(v3[100:], "v3")
	must(t, os.WriteFile(name, v3, 0o755))
	if b := f.batch(t, change, 1); b.Failed != 0 || b.Bytes < int64(len(v3)) {
		t.Fatalf("a refused patch: batch = %+v, want the file sent whole", b)
	}
	assertSameTree(t, f.local, f.remote("web-1"))
}

// cutPatch cuts every patch's stdin short, as a connection that drops
// mid-patch does, and otherwise passes execs on.
type cutPatch struct {
	Executor
	err error // returned instead of running the patch, when set
}

func (c *cutPatch) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(argv) > 5 && argv[3] == "livesync" && argv[5] == "p" {
		if c.err != nil {
			return c.err
		}
		b, _ := io.ReadAll(stdin)
		stdin = bytes.NewReader(b[:len(b)/2])
	}
	return c.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
}

// A patch whose stdin is cut short leaves the old file, and the file goes
// whole in the same apply; one whose exec fails otherwise ends the apply and
// is dropped, so that the retry sends the file whole.
func TestPatchCut(t *testing.T) {
	local, remoteDir := t.TempDir(), filepath.Join(t.TempDir(), "app")
	v1 := randomBytes(4, 2<<20)
	v2 := bytes.Clone(v1)
	copy(v2[deltaBlock*3:], "changed")
	writeTree(t, local, map[string]string{"server": string(v2)})
	writeTree(t, remoteDir, map[string]string{"server": string(v1)})
	m := testMapping(t, local, remoteDir, nil)
	fi, err := os.Stat(filepath.Join(local, "server"))
	must(t, err)
	e, _ := entryOf(fi)
	newPlan := func() *Plan {
		ops, lit := delta.Of(v2, delta.SignatureOf(v1))
		return &Plan{
			Copies:  []Copy{{Rel: "server", Name: "server", Src: filepath.Join(local, "server"), Entry: e}},
			Patches: map[string]*patch{"server": {old: sha256.Sum256(v1), new: sha256.Sum256(v2), ops: ops, lit: lit}},
		}
	}
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			writeTree(t, remoteDir, map[string]string{"server": string(v1)})
			p := newPlan()
			cut := &cutPatch{Executor: ex, err: errors.New("connection reset")}
			if _, err := apply(context.Background(), cut, testTarget, m, p, tarstream.Options{}); err == nil || len(p.Patches) != 0 {
				t.Fatalf("a failed patch: %v, patches left %d; want the error and none", err, len(p.Patches))
			}
			if got, _ := os.ReadFile(filepath.Join(remoteDir, "server")); !bytes.Equal(got, v1) {
				t.Fatal("a failed patch changed the old file")
			}
			res, err := apply(context.Background(), cut, testTarget, m, p, tarstream.Options{})
			must(t, err)
			if res.Bytes < int64(len(v2)) {
				t.Errorf("the retry sent %d bytes, want the file whole", res.Bytes)
			}
			assertSameTree(t, local, remoteDir)

			writeTree(t, remoteDir, map[string]string{"server": string(v1)})
			cut.err = nil
			res, err = apply(context.Background(), cut, testTarget, m, newPlan(), tarstream.Options{})
			must(t, err)
			if res.Bytes < int64(len(v2)) {
				t.Errorf("after a cut patch %d bytes went, want the file whole", res.Bytes)
			}
			assertSameTree(t, local, remoteDir)
		})
	}
}

// A patch whose new bytes compress goes with them gzip-compressed (mode q).
func TestEngineSendsCompressedDeltas(t *testing.T) {
	rec := &modeRecorder{}
	f := newWrappedFixture(t, Config{}, func(ex Executor) Executor { rec.Executor = ex; return rec })
	line := func(i int) string { return "line " + strconv.Itoa(i) + " of a text that compresses well\n" }
	var b strings.Builder
	for i := 0; b.Len() < 4<<20; i++ {
		b.WriteString(line(i))
	}
	v1 := b.String()
	writeTree(t, f.local, map[string]string{"big.txt": v1})
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
		t.Fatal(ev.Err)
	}
	waitSig(t, f.e, []byte(v1))
	var ins strings.Builder
	for i := 0; ins.Len() < 400<<10; i++ {
		ins.WriteString(line(-i))
	}
	v2 := v1[:1<<20] + ins.String() + v1[1<<20:]
	name := filepath.Join(f.local, "big.txt")
	must(t, os.WriteFile(name, []byte(v2), 0o644))
	if b := f.batch(t, coalesce.Change{Root: f.local, Path: name}, 1); b.Failed != 0 || b.Bytes > int64(ins.Len())/2 {
		t.Fatalf("batch = %+v, want under %d bytes", b, ins.Len()/2)
	}
	if got := rec.last(); got != "q" {
		t.Errorf("the patch went %q, want q", got)
	}
	assertSameTree(t, f.local, f.remote("web-1"))
}
