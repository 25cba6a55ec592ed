package remote

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/localexec"
	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testwait"
)

// partedArchive is an archive that marks its parts as tarstream does
// (see Parted): PartEnd is the last end of a part at or before what was
// read.
type partedArchive struct {
	r    *bytes.Reader
	ends []int64
	off  int64
}

func (p *partedArchive) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.off += int64(n)
	return n, err
}

func (p *partedArchive) PartEnd() int64 {
	var e int64
	for _, x := range p.ends {
		if x <= p.off {
			e = x
		}
	}
	return e
}

// newParted makes the archive of parts, each a list of files (name,
// content), marked at the end of each part but the last.
func newParted(t *testing.T, parts ...[][2]string) *partedArchive {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	var ends []int64
	for i, files := range parts {
		for _, f := range files {
			must(t, tw.WriteHeader(&tar.Header{Name: "./" + f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}))
			_, err := tw.Write([]byte(f[1]))
			must(t, err)
		}
		must(t, tw.Flush())
		if i < len(parts)-1 {
			ends = append(ends, int64(b.Len()))
		}
	}
	must(t, tw.Close())
	return &partedArchive{r: bytes.NewReader(b.Bytes()), ends: ends}
}

func TestParted(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{(&ApplyArgs{Root: "/r", Tar: true}).Argv()[4:], true},
		{(&ApplyArgs{Root: "/r", Tar: true, Checks: []string{"p./d", "k./e", "w./f"}, Chmods: []string{"555./d"}}).Argv()[4:], true},
		{(&ApplyArgs{Root: "/r", File: "./f", Tar: true}).Argv()[4:], true},
		{(&ApplyArgs{Root: "/r", Tar: true, Gz: true}).Argv()[4:], false},
		{(&ApplyArgs{Root: "/r", Tar: true, Deletes: []string{"./gone"}}).Argv()[4:], false},
		{(&ApplyArgs{Root: "/r", Tar: true, Rmdirs: []string{"./gone"}}).Argv()[4:], false},
		{(&ApplyArgs{Root: "/r", Tar: true, Takes: []string{TakeArgs("h:1:2./a")}}).Argv()[4:], false},
		{(&ApplyArgs{Root: "/r", Tar: true, Expect: []string{ExpectAbsent("./a")}}).Argv()[4:], false},
		{(&ApplyArgs{Root: "/r", Tar: true, Unswap: []string{UnswapArgs("a./a")}}).Argv()[4:], false},
		{(&ApplyArgs{Root: "/r", Tar: true, Places: []string{PlaceArgs("a./a")}}).Argv()[4:], false},
		{(&ApplyArgs{Root: "/r", Tar: true, Moves: [][2]string{{"m00./a", "t644./b"}}}).Argv()[4:], false},
		{(&ApplyArgs{Root: "/r", Deletes: []string{"./gone"}}).Argv()[4:], false},
	} {
		if got := parted(tt.args); got != tt.want {
			t.Errorf("parted(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

// A frame of copies alone is extracted part by part as it comes: cut
// short after its first part and a piece of the second, it leaves the
// first part's files whole, and nothing of the second, never a truncated
// file; the batch is not acked, and the next one finds one loop.
func TestStreamPartedFrameCut(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			l, s, root := linkedStreams(t, ex)
			a, b := string(bytes.Repeat([]byte("a"), 3<<19)), string(bytes.Repeat([]byte("b"), 1<<20))
			c, d := string(bytes.Repeat([]byte("c"), 2<<20)), string(bytes.Repeat([]byte("d"), 1<<20))
			arch := newParted(t, [][2]string{{"p1/a", a}, {"p1/b", b}}, [][2]string{{"p2/c", c}, {"p2/d", d}})
			must(t, os.MkdirAll(filepath.Join(root, "p1"), 0o755))
			must(t, os.MkdirAll(filepath.Join(root, "p2"), 0o755))

			l.v.set(func(v *valve) { v.cuts, v.cut = true, arch.ends[0]+1<<20 })
			_, err := Apply(context.Background(), s, testTarget, "copying files", &ApplyArgs{Root: root, Tar: true}, arch)
			if err == nil {
				t.Fatal("a batch whose frame was cut short was acked")
			}
			l.waitEnded(t)
			got := readTree(t, root)
			want := map[string]string{"p1/a": "file -rw-r--r-- " + a, "p1/b": "file -rw-r--r-- " + b}
			for n, w := range want {
				if got[n] != w {
					t.Errorf("%s: %d bytes, want %d (the first part whole)", n, len(got[n]), len(w))
				}
			}
			for n := range got {
				if _, ok := want[n]; !ok && n != "p1" && n != "p2" {
					t.Errorf("%s: %d bytes; nothing of the second part may land", n, len(got[n]))
				}
			}
			sendFile(t, s, root, "e", "e")
			oneLoopLeft(t, ex.Tmp)
		})
	}
}

// A parted frame that comes whole lands whole and is acked, its parts' files
// gone from TMPDIR.
func TestStreamPartedFrame(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			s, _ := newTestStreams(t, ex)
			root := t.TempDir()
			var parts [][][2]string
			want := map[string]string{}
			for i := range 5 {
				var files [][2]string
				for j := range 3 {
					n := string(rune('a'+i)) + string(rune('0'+j))
					files = append(files, [2]string{n, string(bytes.Repeat([]byte(n), 300<<10+i*1000+j))})
					want[n] = "file -rw-r--r-- " + files[len(files)-1][1]
				}
				parts = append(parts, files)
			}
			_, err := Apply(context.Background(), s, testTarget, "copying files", &ApplyArgs{Root: root, Tar: true}, newParted(t, parts...))
			must(t, err)
			got := readTree(t, root)
			if len(got) != len(want) {
				t.Errorf("%d entries, want %d", len(got), len(want))
			}
			for n, w := range want {
				if got[n] != w {
					t.Errorf("%s: %d bytes, want %d", n, len(got[n]), len(w))
				}
			}
			sendFile(t, s, root, "e", "e")
			// Its FIFO taken (a cleaner of TMPDIR), a parted frame is
			// staged whole, and lands as well.
			fifos, _ := filepath.Glob(filepath.Join(ex.Tmp, "livesync-frame.*.p"))
			if len(fifos) != 1 {
				t.Fatalf("FIFOs in TMPDIR: %q, want one", fifos)
			}
			must(t, os.Remove(fifos[0]))
			must(t, os.WriteFile(fifos[0], []byte("stale"), 0o600))
			root2 := t.TempDir()
			_, err = Apply(context.Background(), s, testTarget, "copying files", &ApplyArgs{Root: root2, Tar: true}, newParted(t, parts...))
			must(t, err)
			got = readTree(t, root2)
			if len(got) != len(want) {
				t.Errorf("without a FIFO: %d entries, want %d", len(got), len(want))
			}
			for n, w := range want {
				if got[n] != w {
					t.Errorf("without a FIFO: %s: %d bytes, want %d", n, len(got[n]), len(w))
				}
			}
			for _, suf := range []string{".0", ".1", ".x"} {
				m, _ := filepath.Glob(filepath.Join(ex.Tmp, "livesync-frame.*"+suf))
				for _, f := range m {
					if st, err := os.Stat(f); err == nil && st.Size() > 0 {
						t.Errorf("%s holds %d bytes after the frame", f, st.Size())
					}
				}
			}
		})
	}
}

// A parted archive's chunks end where its parts end, a chunk that ends a
// part saying so (one that holds two ends ends at the later); the chunks
// hold the archive, none past chunkSize.
func TestReadAheadParts(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (5*chunkSize)/16)
	ends := []int64{3<<20 + 512, 5<<20 + 1024, 12<<20 + 4096, 17 << 20}
	ra := newReadAhead(&partedArchive{r: bytes.NewReader(data), ends: ends})
	defer ra.close()
	var (
		got   []byte
		ended []int64
	)
	for {
		chunk, end, err := ra.nextPart(true)
		if len(chunk) > chunkSize {
			t.Fatalf("chunk of %d bytes, want at most %d", len(chunk), chunkSize)
		}
		got = append(got, chunk...)
		if end {
			ended = append(ended, int64(len(got)))
		}
		if err != nil {
			break
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, want %d, or they differ", len(got), len(data))
	}
	if len(ended) < 2 {
		t.Errorf("chunks ended parts at %v, of %v", ended, ends)
	}
	for _, e := range ended {
		if !slices.Contains(ends, e) {
			t.Errorf("a chunk ended a part at %d, where none ends (%v)", e, ends)
		}
	}
}

// slowTar is an executor of the host's tools whose tar starts a second
// late: a container's tar held up (starved, or frozen and thawed).
func slowTar(t *testing.T) *localExecutor {
	t.Helper()
	bin := t.TempDir()
	for _, d := range []string{"/bin", "/usr/bin"} {
		des, _ := os.ReadDir(d)
		for _, de := range des {
			if de.Name() != "tar" {
				_ = os.Symlink(filepath.Join(d, de.Name()), filepath.Join(bin, de.Name())) // one of each name
			}
		}
	}
	must(t, os.WriteFile(filepath.Join(bin, "tar"), []byte("#!/bin/sh\nsleep 1\nexec /bin/tar \"$@\"\n"), 0o755))
	return &localExecutor{Runner: localexec.Runner{Bin: bin, Tmp: t.TempDir()}}
}

// A parted frame cut short ends its loop only once its apply ended: the
// loop's record (what a later stream's fence kills by) outlives every
// process of it, so a tar held up past the cut is found and killed by the
// next stream rather than write after its batches (it outlived the loop:
// the loop exited at the cut and removed its record, the tar went on).
func TestStreamPartedCutWaitsForItsApply(t *testing.T) {
	ex := slowTar(t)
	l, s, root := linkedStreams(t, ex)
	sendFile(t, s, root, "first", "x") // the loop is up: its tar's second is paid
	a := string(bytes.Repeat([]byte("a"), 3<<20))
	arch := newParted(t, [][2]string{{"p1/a", a}}, [][2]string{{"p2/c", string(bytes.Repeat([]byte("c"), 3<<20))}})
	recs, _ := filepath.Glob(filepath.Join(ex.Tmp, "livesync-stream.*"))
	if len(recs) != 1 {
		t.Fatalf("loop records: %q, want one", recs)
	}
	l.v.set(func(v *valve) { v.cuts, v.cut = true, arch.ends[0]+1<<20 })
	applied := make(chan error, 1)
	go func() {
		_, err := Apply(context.Background(), s, testTarget, "copying files", &ApplyArgs{Root: root, Tar: true}, arch)
		applied <- err
	}()
	// The record goes when the loop ends: by then its tar is done.
	testwait.Until(t, func() bool {
		_, err := os.Stat(recs[0])
		return errors.Is(err, fs.ErrNotExist)
	}, "the cut loop's record to go")
	if got, err := os.ReadFile(filepath.Join(root, "p1", "a")); err != nil || string(got) != a {
		t.Errorf("when the loop ended, p1/a held %d bytes (%v); want its tar done, all %d", len(got), err, len(a))
	}
	if err := testwait.Result(t, applied, "the cut batch"); err == nil {
		t.Fatal("a batch whose frame was cut short was acked")
	}
	l.waitEnded(t)
}
