package filesync

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/delta"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/localexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// expectGuard is an UploadGuard that checks every upload against what the
// index confirmed, as sync-back's does for the files its globs list, and
// records the preconditions that failed.
type expectGuard struct {
	mu      sync.Mutex
	changed []remote.Changed
}

func (g *expectGuard) Expect(u Upload) (string, bool) {
	switch a := u.Ancestor; {
	case !u.Known && len(u.Maybe) > 0:
		return remote.ExpectOneOf("./"+u.Rel, u.Maybe), false // as sync-back's
	case !u.Known:
		return "", false
	case !u.Has:
		return remote.ExpectAbsent("./" + u.Rel), false
	case a.Type == planner.TypeFile:
		return remote.ExpectFile("./"+u.Rel, a.Sum, a.Size, a.MTime.Unix()), false
	}
	return "", false
}

func (g *expectGuard) Changed(_ Upload, now remote.Changed) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.changed = append(g.changed, now)
}

// take returns the failed preconditions so far and forgets them.
func (g *expectGuard) take() []remote.Changed {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.changed
	g.changed = nil
	return out
}

// variantFixture is newEngineFixture with the container's tools those of r
// (busybox or GNU), and g as the engine's upload guard.
func variantFixture(t *testing.T, ex *localExecutor, g UploadGuard) *engineFixture {
	t.Helper()
	return newWrappedFixture(t, Config{}, func(in Executor) Executor {
		return &localExecutor{Runner: ex.Runner, Sandbox: in.(*localExecutor).Sandbox}
	}, WithUploadGuard(g))
}

func hexSum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// A large file sent as a patch is checked against what the container was
// last confirmed to hold there in the same exec as the patch, before it:
// a plain patch is a change, not a conflict; one over a container change
// the patch does not carry (bytes appended, the region it rewrites
// rewritten) replaces nothing and is a conflict.
func TestPatchChecksPrecondition(t *testing.T) {
	v1 := randomBytes(5, 2<<20)
	v2 := bytes.Clone(v1)
	copy(v2[20*deltaBlock:], "saved locally")
	tests := []struct {
		name      string
		container []byte // what the container holds when v2 is saved; nil: v1
	}{
		{"plain", nil},
		{"bytes appended", append(bytes.Clone(v1), "appended by the app\n"...)},
		{"the same region rewritten", func() []byte {
			out := bytes.Clone(v1)
			copy(out[20*deltaBlock+3:], "rewritten by the app")
			return out
		}()},
	}
	for name, ex := range executors(t) {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				g := &expectGuard{}
				f := variantFixture(t, ex, g)
				writeTree(t, f.local, map[string]string{"data/app.db": string(v1)})
				f.e.AddTarget(podTarget("web-1"))
				f.run(t)
				if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
					t.Fatal(ev.Err)
				}
				waitSig(t, f.e, v1)
				local := filepath.Join(f.local, "data", "app.db")
				inRemote := filepath.Join(f.remote("web-1"), "data", "app.db")
				if tt.container != nil {
					must(t, os.WriteFile(inRemote, tt.container, 0o644))
				}
				must(t, os.WriteFile(local, v2, 0o644))
				b := f.batch(t, coalesce.Change{Root: f.local, Path: local}, 1)
				c := g.take()
				if tt.container == nil {
					if b.Failed != 0 || b.Changed != 1 || b.Bytes > 2*deltaBlock {
						t.Errorf("batch = %+v, want 1 changed and at most %d bytes sent (a patch)", b, 2*deltaBlock)
					}
					if len(c) != 0 {
						t.Errorf("a plain patch reported conflicts: %+v", c)
					}
					assertSameTree(t, f.local, f.remote("web-1"))
					return
				}
				if got, _ := os.ReadFile(inRemote); !bytes.Equal(got, tt.container) {
					t.Errorf("the container's change was replaced: %d bytes there, sha256 %s; its own were %d", len(got), hexSum(got), len(tt.container))
				}
				if len(c) != 1 || c[0].Name != "./data/app.db" || c[0].Now != hexSum(tt.container) {
					t.Errorf("conflicts %+v, want one with the container's sha256 %s", c, hexSum(tt.container))
				}
				if b.Failed != 0 || b.Changed != 0 {
					t.Errorf("batch = %+v, want nothing changed", b)
				}
			})
		}
	}
}

// A listed file the container moves or copies itself is checked in the
// same exec as the move: a plain move is a change, not a conflict; one over
// a file the container made at the destination replaces nothing.
func TestMoveChecksPrecondition(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			g := &expectGuard{}
			f := variantFixture(t, ex, g)
			big := strings.Repeat("a generated bundle\n", 10_000) // 190 KB
			writeTree(t, f.local, map[string]string{"gen/a.js": big})
			f.e.AddTarget(podTarget("web-1"))
			f.run(t)
			if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
				t.Fatal(ev.Err)
			}
			local := func(rel string) string { return filepath.Join(f.local, filepath.FromSlash(rel)) }
			rescan := coalesce.Change{Root: f.local, Rescan: true}

			must(t, os.Rename(local("gen/a.js"), local("gen/b.js")))
			if b := f.batch(t, rescan, 1); b.Failed != 0 || b.Changed != 1 || b.Deleted != 1 || b.Bytes != 0 {
				t.Fatalf("a plain move: batch = %+v, want 1 changed, 1 deleted, nothing sent", b)
			}
			if c := g.take(); len(c) != 0 {
				t.Fatalf("a plain move reported conflicts: %+v", c)
			}
			assertSameTree(t, f.local, f.remote("web-1"))

			writeTree(t, f.local, map[string]string{"gen/c.js": big})
			if b := f.batch(t, rescan, 1); b.Failed != 0 || b.Changed != 1 || b.Bytes != 0 {
				t.Fatalf("a plain copy: batch = %+v, want 1 changed, nothing sent", b)
			}
			if c := g.take(); len(c) != 0 {
				t.Fatalf("a plain copy reported conflicts: %+v", c)
			}
			assertSameTree(t, f.local, f.remote("web-1"))

			// The container wrote the destination before the move arrives.
			theirs := "written by the app"
			must(t, os.WriteFile(filepath.Join(f.remote("web-1"), "gen", "d.js"), []byte(theirs), 0o644))
			must(t, os.Rename(local("gen/c.js"), local("gen/d.js")))
			b := f.batch(t, rescan, 1)
			if got, _ := os.ReadFile(filepath.Join(f.remote("web-1"), "gen", "d.js")); string(got) != theirs {
				t.Fatalf("the container's file was replaced by a move (%d bytes)", len(got))
			}
			if c := g.take(); len(c) != 1 || c[0].Name != "./gen/d.js" || c[0].Now != hexSum([]byte(theirs)) {
				t.Fatalf("conflicts %+v, want the container's file at ./gen/d.js", c)
			}
			if b.Failed != 0 || b.Changed != 0 {
				t.Fatalf("a refused move: batch = %+v, want nothing changed", b)
			}
		})
	}
}

// A patch applied before a conflict elsewhere in its batch stays applied,
// and the batch's next try neither patches nor checks it again: only the
// other file is a conflict.
func TestPatchBesideConflict(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			g := &expectGuard{}
			f := variantFixture(t, ex, g)
			v1 := randomBytes(6, 2<<20)
			writeTree(t, f.local, map[string]string{"data/app.db": string(v1), "data/conf.json": "{}"})
			f.e.AddTarget(podTarget("web-1"))
			f.run(t)
			if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
				t.Fatal(ev.Err)
			}
			waitSig(t, f.e, v1)
			theirs := `{"from": "the app"}`
			must(t, os.WriteFile(filepath.Join(f.remote("web-1"), "data", "conf.json"), []byte(theirs), 0o644))
			v2 := bytes.Clone(v1)
			copy(v2[9*deltaBlock:], "saved locally")
			must(t, os.WriteFile(filepath.Join(f.local, "data", "app.db"), v2, 0o644))
			must(t, os.WriteFile(filepath.Join(f.local, "data", "conf.json"), []byte(`{"saved": "locally"}`), 0o644))
			b := f.batch(t, coalesce.Change{Root: f.local, Rescan: true}, 1)
			if b.Failed != 0 || b.Changed != 1 || b.Bytes > 2*deltaBlock {
				t.Errorf("batch = %+v, want the patch alone changed", b)
			}
			if c := g.take(); len(c) != 1 || c[0].Name != "./data/conf.json" {
				t.Errorf("conflicts %+v, want ./data/conf.json alone", c)
			}
			if got, _ := os.ReadFile(filepath.Join(f.remote("web-1"), "data", "app.db")); !bytes.Equal(got, v2) {
				t.Errorf("the patched file holds %d bytes, sha256 %s; want the local one", len(got), hexSum(got))
			}
			if got, _ := os.ReadFile(filepath.Join(f.remote("web-1"), "data", "conf.json")); string(got) != theirs {
				t.Errorf("the container's change was replaced: %q", got)
			}
		})
	}
}

// failOnce fails the first apply that is not a patch, after the patches of
// its plan ran: a connection lost between the two.
type failOnce struct {
	Executor
	patches int
	failed  bool
}

func (f *failOnce) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if isApply(argv) && argv[5] == "p" {
		f.patches++
	} else if isApply(argv) && !f.failed {
		f.failed = true
		return errors.New("connection reset")
	}
	return f.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
}

// The retry of a plan whose patch was applied before its other exec
// failed sends the rest alone: not the patch again, nor its precondition,
// which the container no longer meets.
func TestPatchRetry(t *testing.T) {
	local, remoteDir := t.TempDir(), filepath.Join(t.TempDir(), "app")
	v1 := randomBytes(7, 2<<20)
	v2 := bytes.Clone(v1)
	copy(v2[deltaBlock*3:], "changed")
	m := testMapping(t, local, remoteDir, nil)
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			writeTree(t, local, map[string]string{"server": string(v2), "conf": "new"})
			writeTree(t, remoteDir, map[string]string{"server": string(v1), "conf": "old"})
			var copies []planner.Copy
			for _, rel := range []string{"conf", "server"} {
				fi, err := os.Stat(filepath.Join(local, rel))
				must(t, err)
				e, _ := planner.EntryOf(fi)
				copies = append(copies, planner.Copy{Rel: rel, Name: rel, Src: filepath.Join(local, rel), Entry: e})
			}
			old, conf := sha256.Sum256(v1), sha256.Sum256([]byte("old"))
			ops, lit := delta.Of(v2, delta.SignatureOf(v1))
			p := &sending{
				Plan:    &planner.Plan{Copies: copies},
				Patches: map[string]*patch{"server": {old: old, new: sha256.Sum256(v2), ops: ops, lit: lit}},
				expect: []precondition{
					{"conf", remote.ExpectFile("./conf", &conf, 3, 0)},
					{"server", remote.ExpectFile("./server", &old, int64(len(v1)), 0)},
				},
			}
			fo := &failOnce{Executor: ex}
			if _, err := apply(context.Background(), fo, testTarget, m, p, tarstream.Options{}); err == nil {
				t.Fatal("the first try succeeded")
			}
			res, err := apply(context.Background(), fo, testTarget, m, p, tarstream.Options{})
			if err != nil {
				t.Fatalf("the retry: %v", err)
			}
			if fo.patches != 1 {
				t.Errorf("%d patch execs, want 1", fo.patches)
			}
			if res.Files != 2 || res.Sums["server"] == nil || *res.Sums["server"] != sha256.Sum256(v2) {
				t.Errorf("result: %d files, sums %v; want both, the patch's among them", res.Files, res.Sums)
			}
			assertSameTree(t, local, remoteDir)
		})
	}
}

// A container save that lands after a batch's preconditions were tested,
// before its tar (the moment seeds of TestModel hit, the two saves 1 ms
// apart), stays: the file is a conflict, the rest of the batch is applied
// and recorded, and the index does not take the local file for what the
// container holds, so the next local save is a conflict again rather than
// sent over the container's. Before, the tar extracted the local file over
// the container's save.
func TestLateContainerSaveIsKept(t *testing.T) {
	for name, r := range localexec.Racing(t) {
		t.Run(name, func(t *testing.T) {
			g := &expectGuard{}
			f := variantFixture(t, &localExecutor{Runner: *r}, g)
			writeTree(t, f.local, map[string]string{"data/conf.json": "v1", "data/other.txt": "o1"})
			f.e.AddTarget(podTarget("web-1"))
			f.run(t)
			if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
				t.Fatal(ev.Err)
			}
			remoteDir := f.remote("web-1")
			theirs := "v1, then the container's own save"
			tmp := t.TempDir()
			t.Setenv("RACE_FILE", filepath.Join(remoteDir, "data", "conf.json"))
			t.Setenv("RACE_TMP", filepath.Join(tmp, "save"))
			t.Setenv("RACE_BODY", theirs)
			t.Setenv("RACE_COUNT", filepath.Join(tmp, "count"))
			t.Setenv("RACE_TOOL", "tar")
			t.Setenv("RACE_AT", "1")

			writeTree(t, f.local, map[string]string{"data/conf.json": "v2 from local", "data/other.txt": "o2"})
			rescan := coalesce.Change{Root: f.local, Rescan: true}
			b := f.batch(t, rescan, 1)
			got := readTree(t, remoteDir)
			if got["data/conf.json"] != "file -rw-r--r-- "+theirs || got["data/other.txt"] != "file -rw-r--r-- o2" {
				t.Errorf("the container holds %q, want its own save kept and other.txt sent", got)
			}
			noToolFiles(t, got)
			if c := g.take(); len(c) != 1 || c[0].Name != "./data/conf.json" || c[0].Now != hexSum([]byte(theirs)) {
				t.Errorf("conflicts %+v, want the container's save at ./data/conf.json", c)
			}
			if b.Failed != 0 || b.Changed != 1 {
				t.Errorf("batch = %+v, want other.txt changed", b)
			}

			t.Setenv("RACE_TOOL", "")
			writeTree(t, f.local, map[string]string{"data/conf.json": "v3 from local"})
			f.batch(t, rescan, 1)
			if got, _ := os.ReadFile(filepath.Join(remoteDir, "data", "conf.json")); string(got) != theirs {
				t.Errorf("the next local save replaced the container's: %q", got)
			}
			if c := g.take(); len(c) != 1 || c[0].Now != hexSum([]byte(theirs)) {
				t.Errorf("conflicts %+v, want the container's save again", c)
			}
		})
	}
}

// A batch killed in the middle of putting a listed file in place (a
// stream fenced, an exec cut: here, as it links the file in) leaves the
// path missing, what the container held there renamed aside, and the file
// staged beside it. The next apply to the target first puts back what was
// there, so the path is never found missing, the staged file goes, and the
// next save (or delete) goes through checked as usual; whether or not it
// places the file again. Before, the path stayed missing with its content
// in ".livesync-old.PID", and the staged file stayed for good: TestModel
// seed 4715102484349844458 round 150 found gen/e/.livesync-new.f.txt in
// the container after a stream cut mid-batch.
//
// Killed after it linked its file in, before it checked what it took
// aside, which was a container save that landed after the preconditions,
// the recovery puts the save back, as the swap would have: a conflict, the
// container's save kept.
func TestKilledSwapIsRecovered(t *testing.T) {
	t.Run("killed after the link, over a save", killedAfterLink)
	for _, deleted := range []bool{false, true} {
		for name, r := range localexec.Racing(t) {
			t.Run(fmt.Sprintf("%s/deleted meanwhile %v", name, deleted), func(t *testing.T) {
				g := &expectGuard{}
				f, remoteDir := killedFixture(t, r, g)
				conf := filepath.Join(remoteDir, "data", "conf.json")

				// Every ln kills the script that runs it: the one that links
				// the staged file in, once what was there is renamed aside.
				t.Setenv("RACE_KILL", "ln")
				writeTree(t, f.local, map[string]string{"data/conf.json": "v2 from local"})
				rescan := coalesce.Change{Root: f.local, Rescan: true}
				if b := f.batch(t, rescan, 1); b.Failed != 1 {
					t.Fatalf("batch = %+v, want it failed", b)
				}
				if _, err := os.Lstat(conf); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("the killed batch left data/conf.json (%v): the test no longer kills it inside its swap", err)
				}

				t.Setenv("RACE_KILL", "")
				want := "file -rw-r--r-- v2 from local"
				if deleted {
					must(t, os.Remove(filepath.Join(f.local, "data", "conf.json")))
					want = ""
				}
				writeTree(t, f.local, map[string]string{"data/other.txt": "o2"})
				// (The failed batch's backoff waits on the clock too.)
				if b := f.batch(t, rescan, 2); b.Failed != 0 {
					t.Fatalf("batch = %+v", b)
				}
				got := readTree(t, remoteDir)
				noToolFiles(t, got)
				if got["data/conf.json"] != want || got["data/other.txt"] != "file -rw-r--r-- o2" {
					t.Errorf("the container holds %q, want data/conf.json %q and other.txt sent", got, want)
				}
				if c := g.take(); len(c) != 0 {
					t.Errorf("conflicts %+v, want none: the container held what the batch expected", c)
				}
			})
		}
	}
}

func killedAfterLink(t *testing.T) {
	for name, r := range localexec.Racing(t) {
		t.Run(name, func(t *testing.T) {
			g := &expectGuard{}
			f, remoteDir := killedFixture(t, r, g)
			conf := filepath.Join(remoteDir, "data", "conf.json")
			theirs := "v1, then the container's own save"
			tmp := t.TempDir()
			// The container saves right before the tar (after the
			// preconditions); the second sha256sum, the swap's check of
			// what it took aside, kills the script.
			t.Setenv("RACE_FILE", conf)
			t.Setenv("RACE_TMP", filepath.Join(tmp, "save"))
			t.Setenv("RACE_BODY", theirs)
			t.Setenv("RACE_COUNT", filepath.Join(tmp, "count"))
			t.Setenv("RACE_TOOL", "tar")
			t.Setenv("RACE_AT", "1")
			t.Setenv("RACE_KILL", "sha256sum")
			t.Setenv("RACE_KILL_AT", "2")
			writeTree(t, f.local, map[string]string{"data/conf.json": "v2 from local"})
			rescan := coalesce.Change{Root: f.local, Rescan: true}
			if b := f.batch(t, rescan, 1); b.Failed != 1 {
				t.Fatalf("batch = %+v, want it failed", b)
			}
			if got, _ := os.ReadFile(conf); string(got) != "v2 from local" {
				t.Fatalf("the killed batch left data/conf.json %q: the test no longer kills it between its link and its check", got)
			}

			t.Setenv("RACE_TOOL", "")
			t.Setenv("RACE_KILL", "")
			writeTree(t, f.local, map[string]string{"data/other.txt": "o2"})
			if b := f.batch(t, rescan, 2); b.Failed != 0 {
				t.Fatalf("batch = %+v", b)
			}
			got := readTree(t, remoteDir)
			noToolFiles(t, got)
			if got["data/conf.json"] != "file -rw-r--r-- "+theirs {
				t.Errorf("the container holds %q, want the container's save at data/conf.json", got)
			}
			if c := g.take(); len(c) != 1 || c[0].Name != "./data/conf.json" || c[0].Now != hexSum([]byte(theirs)) {
				t.Errorf("conflicts %+v, want the container's save at ./data/conf.json", c)
			}
		})
	}
}

// A try killed inside its swap, then retried at once in the same batch:
// the retry begins with the recovery of what the killed try left (its own
// swap renames aside under another name, and would find the path
// missing), and nothing stays behind. Before, the retry's success counted
// as the recovery: TestModel seed 5961522209981438596 round 217 found
// gen/sub/.livesync-old.c.txt.2448 in the container.
func TestKilledSwapRetriedAtOnce(t *testing.T) {
	for name, r := range localexec.Racing(t) {
		t.Run(name, func(t *testing.T) {
			local, remoteDir := t.TempDir(), filepath.Join(t.TempDir(), "app")
			writeTree(t, local, map[string]string{"data/conf.json": "v2 from local"})
			writeTree(t, remoteDir, map[string]string{"data/conf.json": "v1"})
			m := testMapping(t, local, remoteDir, nil)
			fi, err := os.Stat(filepath.Join(local, "data", "conf.json"))
			must(t, err)
			e, _ := planner.EntryOf(fi)
			v1 := sha256.Sum256([]byte("v1"))
			p := &sending{
				Plan:   &planner.Plan{Copies: []planner.Copy{{Rel: "data/conf.json", Name: "data/conf.json", Src: filepath.Join(local, "data", "conf.json"), Entry: e}}},
				expect: []precondition{{"data/conf.json", remote.ExpectFile("./data/conf.json", &v1, 2, 0)}},
			}
			// The first ln kills the script (a stream cut, to the client),
			// after it renamed data/conf.json aside; the retry runs at once.
			tmp := t.TempDir()
			t.Setenv("RACE_COUNT", filepath.Join(tmp, "count"))
			t.Setenv("RACE_KILL", "ln")
			t.Setenv("RACE_KILL_AT", "1")
			eng := New(nil, Config{}, WithRetry(remote.RetryPolicy{Tries: 2}))
			if _, err := eng.applyPlan(context.Background(), cutExecutor{&localExecutor{Runner: *r}}, testTarget, m, p, false, nil); err != nil {
				t.Fatalf("the retry: %v", err)
			}
			got := readTree(t, remoteDir)
			noToolFiles(t, got)
			if got["data/conf.json"] != "file -rw-r--r-- v2 from local" {
				t.Errorf("the container holds %q, want data/conf.json sent", got)
			}
		})
	}
}

// killedFixture is a running engine with g as its upload guard, the tools
// of r in the container, data/conf.json and data/other.txt synced to
// web-1, and one try per batch: a killed exec is transient, and a retry
// would recover what it left before the test could look. It returns the
// container's directory too.
func killedFixture(t *testing.T, r *localexec.Runner, g UploadGuard) (*engineFixture, string) {
	t.Helper()
	f := newWrappedFixture(t, Config{}, func(in Executor) Executor {
		return &localExecutor{Runner: *r, Sandbox: in.(*localExecutor).Sandbox}
	}, WithUploadGuard(g), WithRetry(remote.RetryPolicy{Tries: 1}))
	writeTree(t, f.local, map[string]string{"data/conf.json": "v1", "data/other.txt": "o1"})
	f.e.AddTarget(podTarget("web-1"))
	f.run(t)
	if ev := wait[InitialSync](t, f.rec); ev.Err != nil {
		t.Fatal(ev.Err)
	}
	return f, f.remote("web-1")
}

// noToolFiles fails for each of apply.sh's temp names (a staged file, one
// renamed aside, a patch's) left in got, a readTree of the container.
func noToolFiles(t *testing.T, got map[string]string) {
	t.Helper()
	for name := range got {
		if strings.Contains(name, ".livesync-") {
			t.Errorf("left in the container: %s", name)
		}
	}
}

// cutExecutor reports a script killed by SIGKILL as a stream
// cut short: what the client sees when a fence kills the loop under it.
type cutExecutor struct{ Executor }

func (c cutExecutor) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	err := c.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
	var ee remote.ExitError
	if errors.As(err, &ee) && (ee.ExitStatus() == 137 || ee.ExitStatus() == -1) { // -1: os/exec's for a signal
		return errors.New("the stream was cut: EOF")
	}
	return err
}
