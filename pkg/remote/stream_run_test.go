package remote

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/fakeproc"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testwait"
)

// withStreams returns executors(t) and, for each, Streams over it
// ("NAME/stream"), whose loop runs sync-back's scripts in run frames.
func withStreams(t *testing.T) map[string]Executor {
	t.Helper()
	out := map[string]Executor{}
	for name, ex := range executors(t) {
		out[name] = ex
		s, _ := newTestStreams(t, ex)
		out[name+"/stream"] = s
	}
	return out
}

// Scans and downloads through a stream cost no exec of their own: one loop
// runs them all, the directory of its markers is made once and removed when
// the loop ends, and what they print arrives as the exec's would, link targets that
// look like the loop's own tokens and an archive full of NULs included.
func TestStreamRunFrames(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			tmp := ex.Tmp // the loop's TMPDIR
			s, c := newTestStreams(t, ex)
			ctx := context.Background()
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"gen/a.go": "a", "bin.dat": "x\x00\x00y\x00"})
			// Links whose targets look like the loop's own tokens.
			for name, l := range map[string]string{"lZ": "Z", "lK": "K1 0", "le": "e", "lY": "Y", "lR": "R./x"} {
				must(t, os.Symlink(l, filepath.Join(dir, "gen", name)))
			}

			byExec, err := Scan(ctx, ex, testTarget, dir, 0, []string{"."}, nil)
			must(t, err)
			full, err := Scan(ctx, s, testTarget, dir, 0, []string{"."}, nil)
			must(t, err)
			if !full.Complete || full.Since || full.Incarnation != byExec.Incarnation || !slices.Equal(scanNames(full), scanNames(byExec)) {
				t.Fatalf("scan through the stream %+v, names %q\nby exec %+v, names %q", full, scanNames(full), byExec, scanNames(byExec))
			}
			for n, e := range byExec.Names {
				if g := full.Names[n]; g.Type != e.Type || g.Mode != e.Mode || g.Size != e.Size || g.Link != e.Link || !bytes.Equal(g.Sum, e.Sum) {
					t.Errorf("%s: through the stream %+v, by exec %+v", n, full.Names[n], e)
				}
			}
			if got := full.Names["./gen/lK"]; got.Type != TypeSymlink || got.Link != "K1 0" {
				t.Errorf("a link to %q: %+v", "K1 0", got)
			}

			// Two incremental scans: one directory of markers, kept between them.
			since := full.Now - 2
			must(t, os.WriteFile(filepath.Join(dir, "gen", "b.go"), []byte("b"), 0o644))
			for range 2 {
				inc, err := Scan(ctx, s, testTarget, dir, since, []string{"./gen"}, nil)
				must(t, err)
				if !inc.Since || !inc.Complete || !slices.Contains(scanNames(inc), "./gen/b.go") {
					t.Fatalf("incremental scan through the stream: %+v %q", inc, scanNames(inc))
				}
			}
			markers, _ := filepath.Glob(filepath.Join(tmp, "livesync-scan.*"))
			if len(markers) != 1 {
				t.Errorf("markers in TMPDIR: %q, want one", markers)
			}

			got := map[string]string{}
			must(t, Download(ctx, s, testTarget, dir, []string{"./bin.dat", "./gen/a.go"}, func(e ArchiveEntry) error {
				b, _ := io.ReadAll(e.Body)
				got[e.Rel] = string(b)
				return nil
			}))
			if got["bin.dat"] != "x\x00\x00y\x00" || got["gen/a.go"] != "a" || len(got) != 2 {
				t.Fatalf("download through the stream: %q", got)
			}
			// A download that fails acks its status and stderr; the stream goes on.
			err = Download(ctx, s, testTarget, dir, []string{"./gone"}, func(ArchiveEntry) error { return nil })
			if err == nil || !strings.Contains(err.Error(), "tar") {
				t.Errorf("a download of a missing name: %v, want tar's failure", err)
			}
			if _, err := Scan(ctx, s, testTarget, dir, 0, []string{"./gen"}, nil); err != nil {
				t.Fatalf("a scan after a failed download: %v", err)
			}

			loops, others := c.counts()
			if loops != 1 || others != 0 {
				t.Errorf("%d stream execs and %d others, want 1 and 0", loops, others)
			}
			st, err := s.get(ctx, testTarget)
			must(t, err)
			s.Close(testTarget)
			select {
			case <-st.ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the loop did not end on EOF")
			}
			if markers, _ := filepath.Glob(filepath.Join(tmp, "livesync-scan.*")); len(markers) != 0 {
				t.Errorf("markers left when the loop ended: %q", markers)
			}
		})
	}
}

// readRun hands on a run frame's output byte for byte up to the loop's NUL
// before the frame's token, wherever the reader's buffer cuts it; an output
// cut short stays cut short (its parser refuses it), and a stream that ends
// before the token is an error.
func TestReadRun(t *testing.T) {
	const nonce = "Zabc"
	for _, tc := range []struct {
		name, out string
	}{
		{"tokens", "SB1\x00OK\x00"},
		{"cut short", "SB1\x00OK\x00LS"},
		{"empty", ""},
		{"the token inside a longer one", "xZabc\x00"},
		{"a buffer's worth, then the token", strings.Repeat("x", 16) + "Zabc\x00"},
		{"long runs without NUL", strings.Repeat("y", 40) + "\x00" + strings.Repeat("z", 33)},
		{"NULs only", "\x00\x00\x00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			st := &stream{stdout: &out, nonce: []byte(nonce)}
			br := bufio.NewReaderSize(strings.NewReader(tc.out+"\x00"+nonce+"\x00K1 0\x00"), 16)
			must(t, st.readRun(br))
			if out.String() != tc.out {
				t.Fatalf("got %q, want %q", out.String(), tc.out)
			}
			if rest, _ := io.ReadAll(br); string(rest) != "K1 0\x00" {
				t.Fatalf("left after the output: %q", rest)
			}
		})
	}
	st := &stream{stdout: io.Discard, nonce: []byte(nonce)}
	if err := st.readRun(bufio.NewReader(strings.NewReader("SB1\x00OK\x00"))); err == nil {
		t.Fatal("a stream that ended before the token: no error")
	}
	if _, err := ParseScan([]byte("SB1\x00100\x00mnt:[1]\x00\x00LS2\x00sha256sum\x00\x00dir\x00END\x00")); err == nil {
		t.Fatal("a scan without its final token parsed")
	}
}

// The loop's own variables that a script run in its subshell reads or
// could change go by names no script sets: apply.sh once set n, which the
// loop's tar function read for its frame's length.
func TestStreamLoopNamesUnset(t *testing.T) {
	loopVars := regexp.MustCompile(`\b(livesync_[a-z_]+)=`)
	own := map[string]bool{}
	for _, m := range loopVars.FindAllStringSubmatch(script("stream.sh")+marksScript, -1) {
		own[m[1]] = true
	}
	for _, name := range []string{"livesync_stage", "livesync_rec", "livesync_fam", "livesync_ns", "livesync_dir", "livesync_t", "livesync_m", "livesync_z"} {
		if !own[name] {
			t.Errorf("stream.sh and marks.sh set no %s: update this test", name)
		}
	}
	for _, name := range []string{"apply.sh", "scan.sh", "download.sh", "list-chunk.sh", "helper.sh"} {
		for _, m := range loopVars.FindAllStringSubmatch(script(name), -1) {
			if own[m[1]] {
				t.Errorf("%s sets %s, which the stream's loop keeps", name, m[1])
			}
		}
	}
}

// helperRoute runs every argv as a helper does for target process 7 that
// started at 1000, in the fake /proc at proc.
type helperRoute struct {
	*localExecutor
	proc string
}

func (h helperRoute) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return h.localExecutor.Exec(ctx, t, helperArgvIn(h.proc, argv, 7, 1000, nil), stdin, stdout, stderr)
}

// Through a helper, a scan in a run frame reaches the target's root; once
// the target's process is another, the next scan is an error (the loop ends
// with status 75, and the caller probes again), never a listing of the
// other process's root.
func TestStreamRunFramesHelperMoved(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			rootfs, other := t.TempDir(), t.TempDir()
			writeTree(t, rootfs, map[string]string{"app/gen/a.go": "a"})
			writeTree(t, other, map[string]string{"app/gen/secret.go": "s"})
			proc := fakeproc.Write(t, fakeproc.Process{PID: 7, Start: 1000, Root: rootfs})
			s, c := newTestStreams(t, helperRoute{ex, proc})
			r, err := Scan(context.Background(), s, testTarget, "/app", 0, []string{"./gen"}, nil)
			must(t, err)
			if got := scanNames(r); !slices.Equal(got, []string{"./gen", "./gen/a.go"}) {
				t.Fatalf("scan through the helper: %q", got)
			}
			moved := fakeproc.Write(t, fakeproc.Process{PID: 7, Start: 1001, Root: other})
			b, err := os.ReadFile(filepath.Join(moved, "7", "stat"))
			must(t, err)
			must(t, os.WriteFile(filepath.Join(proc, "7", "stat"), b, 0o644))
			must(t, os.Remove(filepath.Join(proc, "7", "root")))
			must(t, os.Symlink(other, filepath.Join(proc, "7", "root")))
			r, err = Scan(context.Background(), s, testTarget, "/app", 0, []string{"./gen"}, nil)
			if err == nil {
				t.Fatalf("a scan after the target moved: %q", scanNames(r))
			}
			if !strings.Contains(err.Error(), "75") {
				t.Errorf("a scan after the target moved: %v; want the loop ended with status 75", err)
			}
			// The dead stream is forgotten once its reader sees the end,
			// which may come after the frame's error reached the caller.
			testwait.Until(t, func() bool { return s.Len() == 0 }, "the stream whose loop ended is still open")
			if loops, others := c.counts(); loops != 1 || others != 0 {
				t.Errorf("%d stream execs and %d others, want 1 and 0", loops, others)
			}
		})
	}
}

// A container without dd has no stream: its scans and downloads are execs
// of their own, as before.
func TestStreamRunFramesWithoutDD(t *testing.T) {
	s, c := newTestStreams(t, busybox(t, "dd"))
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"gen/a.go": "a"})
	r, err := Scan(context.Background(), s, testTarget, dir, 0, []string{"./gen"}, nil)
	must(t, err)
	if got := scanNames(r); !slices.Equal(got, []string{"./gen", "./gen/a.go"}) {
		t.Fatalf("scan without dd: %q", got)
	}
	must(t, Download(context.Background(), s, testTarget, dir, []string{"./gen/a.go"}, func(ArchiveEntry) error { return nil }))
	if loops, others := c.counts(); loops != 1 || others != 2 {
		t.Errorf("%d stream execs and %d others, want 1 (the probe) and 2", loops, others)
	}
}

// A scan run as an exec takes the loop's marker, time and namespace from no
// environment: a variable named like the loop's never makes it use or touch
// a file.
func TestScanExecIgnoresLoopNames(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			bait := filepath.Join(t.TempDir(), "bait")
			must(t, os.WriteFile(bait, []byte("x"), 0o644))
			old := time.Now().Add(-time.Hour).Truncate(time.Second)
			must(t, os.Chtimes(bait, old, old))
			t.Setenv("livesync_m", bait)
			t.Setenv("livesync_dir", filepath.Dir(bait))
			t.Setenv("livesync_t", "1")
			t.Setenv("livesync_ns", "mnt:[forged]")
			r, err := Scan(context.Background(), ex, testTarget, t.TempDir(), time.Now().Unix()-5, []string{"."}, nil)
			must(t, err)
			if fi, err := os.Stat(bait); err != nil || !fi.ModTime().Equal(old) {
				t.Errorf("the scan touched %s: %v %v", bait, fi.ModTime(), err)
			}
			if r.Incarnation == "mnt:[forged]" || r.Now == 1 || !r.Since {
				t.Errorf("scan header %+v: took the environment's names", r)
			}
		})
	}
}
