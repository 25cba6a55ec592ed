package remote

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestApplyPreconditions runs apply.sh's preconditions (sync-back's upload
// check) against real busybox and GNU tools, and busybox without
// sha256sum (size and mtime then), each over an exec per batch and over a
// kept-open stream (whose loop goes on after the refused batch): a batch whose container copy is no
// longer what the client confirmed changes nothing, deletes and tar
// included, and names each path with what it holds now.
func TestApplyPreconditions(t *testing.T) {
	exs := map[string]Executor{}
	for name, ex := range executors(t) {
		exs[name] = ex
	}
	exs["busybox without sha256sum"] = busybox(t, "sha256sum")
	for _, name := range slices.Collect(maps.Keys(exs)) {
		exs[name+" stream"] = exs[name]
	}
	for name, ex := range exs {
		t.Run(name, func(t *testing.T) {
			var loops *streamCounter
			if strings.HasSuffix(name, " stream") {
				ex, loops = newTestStreams(t, ex)
			}
			noSum := strings.Contains(name, "without sha256sum")
			ctx := context.Background()
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"lock.json": "v1", "gen/a.go": "a", "del.txt": "d"})
			mt := time.Unix(1_700_000_000, 0)
			for _, p := range []string{"lock.json", "gen/a.go", "del.txt"} {
				must(t, os.Chtimes(filepath.Join(dir, p), mt, mt))
			}
			sum := func(s string) *[32]byte { h := sha256.Sum256([]byte(s)); return &h }
			hexOf := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
			archive := func() *bytes.Reader {
				var b bytes.Buffer
				tw := tar.NewWriter(&b)
				for _, f := range []struct{ name, body string }{{"lock.json", "v2 from local"}, {"new.txt", "new"}} {
					must(t, tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: time.Now()}))
					_, err := tw.Write([]byte(f.body))
					must(t, err)
				}
				must(t, tw.Close())
				return bytes.NewReader(b.Bytes())
			}
			ok := []string{
				ExpectFile("./lock.json", sum("v1"), 2, mt.Unix()),
				ExpectFile("./del.txt", nil, 1, mt.Unix()), // no sum known: size and mtime
				ExpectAbsent("./new.txt"),
			}
			args := func(expect ...string) *ApplyArgs {
				return &ApplyArgs{Root: dir, Expect: expect, Checks: []string{"p./gen"}, Deletes: []string{"./del.txt"}, Tar: true}
			}

			// The container changed the lockfile, made new.txt and replaced
			// gen/a.go with a directory since the client last confirmed them.
			writeTree(t, dir, map[string]string{"lock.json": "v1 changed in the container", "new.txt": "theirs"})
			must(t, os.Remove(filepath.Join(dir, "gen", "a.go")))
			must(t, os.Mkdir(filepath.Join(dir, "gen", "a.go"), 0o755))
			before := readTree(t, dir)
			_, err := Apply(ctx, ex, testTarget, "copying files", args(append(ok, ExpectFile("./gen/a.go", sum("a"), 1, mt.Unix()))...), archive())
			var ce *ChangedError
			if !errors.As(err, &ce) || IsTransient(err) {
				t.Fatalf("apply over changed container copies: %v (%T)", err, err)
			}
			lockNow := hexOf("v1 changed in the container")
			newNow := hexOf("theirs")
			if noSum {
				fi, err := os.Stat(filepath.Join(dir, "lock.json"))
				must(t, err)
				lockNow = "27:" + itoa(fi.ModTime().Unix())
				fi, err = os.Stat(filepath.Join(dir, "new.txt"))
				must(t, err)
				newNow = "6:" + itoa(fi.ModTime().Unix())
			}
			want := []Changed{{"./lock.json", lockNow}, {"./new.txt", newNow}, {"./gen/a.go", "!"}}
			if !slices.Equal(ce.Changed, want) {
				t.Fatalf("changed = %+v, want %+v", ce.Changed, want)
			}
			if got := ce.Changed[0].Sum(); (got != "") == noSum {
				t.Fatalf("Sum() of %q = %q", ce.Changed[0].Now, got)
			}
			if after := readTree(t, dir); !mapsEqual(before, after) {
				t.Fatalf("a failed precondition changed the container:\nbefore %v\nafter  %v", before, after)
			}

			// What the client confirmed is there: the batch goes through.
			writeTree(t, dir, map[string]string{"lock.json": "v1"})
			must(t, os.Remove(filepath.Join(dir, "new.txt")))
			must(t, os.Chtimes(filepath.Join(dir, "lock.json"), mt, mt))
			if _, err := Apply(ctx, ex, testTarget, "copying files", args(ok...), archive()); err != nil {
				t.Fatalf("apply with every precondition holding: %v", err)
			}
			got := readTree(t, dir)
			if !strings.HasSuffix(got["lock.json"], " v2 from local") || !strings.HasSuffix(got["new.txt"], " new") {
				t.Fatalf("after the apply: %v", got)
			}
			if _, err := os.Lstat(filepath.Join(dir, "del.txt")); !os.IsNotExist(err) {
				t.Fatalf("del.txt not deleted: %v", err)
			}

			// Size and mtime hold where no sum is known: a same-size write
			// with another mtime is a change too.
			writeTree(t, dir, map[string]string{"same.txt": "xy"})
			must(t, os.Chtimes(filepath.Join(dir, "same.txt"), mt.Add(time.Second), mt.Add(time.Second)))
			_, err = Apply(ctx, ex, testTarget, "deleting files", &ApplyArgs{Root: dir, Expect: []string{ExpectFile("./same.txt", nil, 2, mt.Unix())}, Deletes: []string{"./same.txt"}}, nil)
			if !errors.As(err, &ce) {
				t.Fatalf("delete over a same-size write: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(dir, "same.txt")); err != nil {
				t.Fatalf("same.txt deleted: %v", err)
			}
			// A directory deleted whole that holds an entry the client never
			// saw: it stays; with the count the client knows, it goes.
			writeTree(t, dir, map[string]string{"d/known": "k", "d/new": "n"})
			del := func(n int) error {
				_, err := Apply(ctx, ex, testTarget, "deleting files", &ApplyArgs{Root: dir, Expect: []string{ExpectAtMost("./d", n)}, Deletes: []string{"./d"}}, nil)
				return err
			}
			if err := del(2); !errors.As(err, &ce) || !slices.Equal(ce.Changed, []Changed{{"./d", "+3"}}) {
				t.Fatalf("deleting a directory with an unseen entry: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(dir, "d", "new")); err != nil {
				t.Fatalf("d/new: %v", err)
			}
			must(t, del(3))
			if _, err := os.Lstat(filepath.Join(dir, "d")); !os.IsNotExist(err) {
				t.Fatalf("d not deleted: %v", err)
			}
			if loops != nil {
				if n, _ := loops.counts(); n != 1 {
					t.Fatalf("%d stream execs: a refused batch must not end the loop", n)
				}
			}
		})
	}
}

// TestApplyPreconditionsAcrossSplit: preconditions lead the first exec of
// a split batch, so none of its later execs runs before all are tested.
func TestApplyPreconditionsAcrossSplit(t *testing.T) {
	a := &ApplyArgs{Root: "/r", Expect: []string{"a./x", "a./y"}, Checks: []string{"p./d"}, Deletes: []string{"./z"}}
	parts := a.Split(8)
	if len(parts) < 2 || !slices.Equal(parts[0].Expect, []string{"a./x"}) || !slices.Equal(parts[1].Expect, []string{"a./y"}) {
		t.Fatalf("split: %+v", parts)
	}
	for _, p := range parts[2:] {
		if len(p.Expect) > 0 {
			t.Fatalf("a precondition after another step: %+v", parts)
		}
	}
	argv := (&ApplyArgs{Root: "/r", Expect: []string{"a./x"}, Checks: []string{"p./d"}}).Argv()
	if got := argv[7:]; !slices.Equal(got, []string{"2", "0", "0", "a./x", "p./d"}) {
		t.Fatalf("argv after the script's fixed arguments: %q", got)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// gatedReader hands out its bytes up to gate, then says so on reached and
// waits for release before the rest.
type gatedReader struct {
	b                []byte
	off, gate        int
	reached, release chan struct{}
	once             bool
}

func (r *gatedReader) Read(p []byte) (int, error) {
	if r.off >= r.gate && !r.once {
		r.once = true
		close(r.reached)
		<-r.release
	}
	if r.off >= len(r.b) {
		return 0, io.EOF
	}
	end := len(r.b)
	if r.off < r.gate {
		end = r.gate
	}
	n := copy(p, r.b[r.off:end])
	r.off += n
	return n, nil
}

// TestApplyChecksAfterTheTarCame: over an exec per batch, a container write
// that lands while the batch's tar is still on the wire is seen by the
// precondition, never overwritten under it. The tar's first member is
// larger than a pipe holds, so by the time the client has sent that much
// the script is reading: before, it had tested its preconditions at its
// start, and the lockfile the container wrote meanwhile was lost.
func TestApplyChecksAfterTheTarCame(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"lock.json": "v1"})
			var b bytes.Buffer
			tw := tar.NewWriter(&b)
			for _, f := range []struct {
				name string
				body []byte
			}{{"filler.bin", bytes.Repeat([]byte{'f'}, 512<<10)}, {"lock.json", []byte("v2 from local")}} {
				must(t, tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: time.Now()}))
				_, err := tw.Write(f.body)
				must(t, err)
			}
			must(t, tw.Close())
			r := &gatedReader{b: b.Bytes(), gate: 256 << 10, reached: make(chan struct{}), release: make(chan struct{})}
			go func() {
				<-r.reached
				writeTree(t, dir, map[string]string{"lock.json": "v1, then the container's own save"})
				close(r.release)
			}()
			h := sha256.Sum256([]byte("v1"))
			_, err := Apply(context.Background(), ex, testTarget, "copying files",
				&ApplyArgs{Root: dir, Expect: []string{ExpectFile("./lock.json", &h, 2, 0)}, Tar: true}, r)
			var ce *ChangedError
			if !errors.As(err, &ce) {
				t.Errorf("apply: %v, want the lockfile's precondition to fail", err)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, "lock.json")); string(got) != "v1, then the container's own save" {
				t.Errorf("lock.json = %q: the container's save was overwritten", got)
			}
			if _, err := os.Stat(filepath.Join(dir, "filler.bin")); err == nil {
				t.Error("filler.bin was extracted from a batch whose precondition failed")
			}
		})
	}
}

// "o" passes when the container holds one of the sums (or nothing, where
// "-" is among them) and names what it holds otherwise; without sha256sum a
// regular file passes.
func TestApplyExpectOneOf(t *testing.T) {
	exs := map[string]Executor{}
	for name, ex := range executors(t) {
		exs[name] = ex
	}
	exs["busybox without sha256sum"] = busybox(t, "sha256sum")
	sum := func(s string) *[32]byte { h := sha256.Sum256([]byte(s)); return &h }
	for name, ex := range exs {
		t.Run(name, func(t *testing.T) {
			noSum := strings.Contains(name, "without")
			for _, tt := range []struct {
				name, there string // "" there: nothing
				sums        []*[32]byte
				pass        bool
			}{
				{"the old content", "v1", []*[32]byte{sum("v1"), sum("v2")}, true},
				{"what was sent", "v2", []*[32]byte{sum("v1"), sum("v2")}, true},
				{"nothing, allowed", "", []*[32]byte{nil, sum("v2")}, true},
				{"nothing, not allowed", "", []*[32]byte{sum("v1"), sum("v2")}, false},
				{"a container write", "theirs", []*[32]byte{sum("v1"), sum("v2")}, noSum},
				{"a file where nothing may be", "theirs", []*[32]byte{nil}, noSum},
			} {
				dir := t.TempDir()
				if tt.there != "" {
					writeTree(t, dir, map[string]string{"f": tt.there})
				}
				_, err := Apply(context.Background(), ex, testTarget, "copying files",
					&ApplyArgs{Root: dir, Expect: []string{ExpectOneOf("./f", tt.sums)}, Deletes: []string{"./f"}}, nil)
				var ce *ChangedError
				switch {
				case tt.pass && err != nil:
					t.Errorf("%s: %v", tt.name, err)
				case !tt.pass && !errors.As(err, &ce):
					t.Errorf("%s: %v, want the precondition to fail", tt.name, err)
				case !tt.pass && tt.there == "" && ce.Changed[0].Now != "-":
					t.Errorf("%s: now %q", tt.name, ce.Changed[0].Now)
				}
			}
		})
	}
}

// WidenExpect adds what unacknowledged tries carried to a check that names
// contents by hash, and leaves alone those that can't (no sum, a
// directory's count).
func TestWidenExpect(t *testing.T) {
	s1, s2 := sha256.Sum256([]byte("1")), sha256.Sum256([]byte("2"))
	for _, tt := range []struct{ check, want string }{
		{ExpectFile("./a b", &s1, 1, 5), ExpectOneOf("./a b", []*[32]byte{&s1, &s2})},
		{ExpectAbsent("./a"), ExpectOneOf("./a", []*[32]byte{nil, &s2})},
		{ExpectOneOf("./a", []*[32]byte{nil, &s1}), ExpectOneOf("./a", []*[32]byte{nil, &s1, &s2})},
		{ExpectOneOf("./a", []*[32]byte{&s2}), ExpectOneOf("./a", []*[32]byte{&s2})},
		{ExpectFile("./a", nil, 1, 5), ExpectFile("./a", nil, 1, 5)},
		{ExpectAtMost("./d", 3), ExpectAtMost("./d", 3)},
	} {
		if got := WidenExpect(tt.check, []*[32]byte{&s2}); got != tt.want {
			t.Errorf("WidenExpect(%q) = %q, want %q", tt.check, got, tt.want)
		}
	}
}
