package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLinkSlow(t *testing.T) {
	for name, tt := range map[string]struct {
		l    Link
		slow bool
	}{
		"nothing measured":             {Link{}, true},
		"remote profile rate":          {Link{Rate: 50e6 / 8, RTT: time.Millisecond}, true},
		"loopback rate":                {Link{Rate: 40e6, RTT: 30 * time.Millisecond}, false},
		"just below fast":              {Link{Rate: FastLinkRate - 1}, true},
		"no rate, a near round trip":   {Link{RTT: 3 * time.Millisecond}, false},
		"no rate, a remote round trip": {Link{RTT: 25 * time.Millisecond}, true},
	} {
		if got := tt.l.Slow(); got != tt.slow {
			t.Errorf("%s: %+v.Slow() = %v, want %v", name, tt.l, got, tt.slow)
		}
	}
}

// Large frames measure the rate (averaged), small ones the quickest round
// trip; frames in between measure nothing.
func TestLinksObserve(t *testing.T) {
	var ls links
	ls.observe("k", 10<<10, 30*time.Millisecond)
	ls.observe("k", 0, 20*time.Millisecond)
	ls.observe("k", 0, 40*time.Millisecond)
	ls.observe("k", 512<<10, time.Millisecond) // neither
	if got := ls.get("k"); got.RTT != 20*time.Millisecond || got.Rate != 0 {
		t.Fatalf("after small frames: %+v", got)
	}
	// The round trip is taken off a large frame's time.
	ls.observe("k", 4<<20, time.Second+20*time.Millisecond)
	ls.observe("k", 8<<20, time.Second+20*time.Millisecond)
	if got := ls.get("k"); got.Rate != 6<<20 {
		t.Fatalf("rate %v, want %v", got.Rate, 6<<20)
	}
	if got := ls.get("other"); got.Known() {
		t.Fatalf("another target: %+v", got)
	}
}

// A stream measures each target's link from its frames, and a Bounded
// executor over it answers for it.
func TestStreamsMeasureLink(t *testing.T) {
	ex := busybox(t)
	s, _ := newTestStreams(t, ex)
	b := NewBounded(s, 1, nil, Limit{})
	if LinkOf(b, testTarget).Known() {
		t.Fatal("measured before any frame")
	}
	dir := t.TempDir()
	a := &ApplyArgs{Root: dir, Deletes: []string{"./nothing"}}
	must(t, s.Exec(context.Background(), testTarget, a.Argv(), nil, io.Discard, io.Discard))
	if l := LinkOf(b, testTarget); l.RTT <= 0 || l.Rate != 0 {
		t.Fatalf("after a small frame: %+v", l)
	}
	if LinkOf(ex, testTarget).Known() {
		t.Fatal("an executor that measures nothing says it did")
	}
}

// download.sh gzips its tar when asked and gzip is there, and the reader
// takes either; tar's own status (a name that vanished) comes through gzip.
func TestDownloadCompressed(t *testing.T) {
	exs := executors(t)
	exs["busybox-nogzip"] = busybox(t, "gzip")
	for name, ex := range exs {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			body := bytes.Repeat([]byte("a compressible line of text\n"), 4096)
			must(t, os.WriteFile(filepath.Join(dir, "f.txt"), body, 0o644))
			for _, gz := range []bool{false, true} {
				var out bytes.Buffer
				must(t, ex.Exec(context.Background(), testTarget, DownloadArgv(dir, gz, []string{"./f.txt"}), nil, &out, io.Discard))
				zipped := out.Len() > 1 && out.Bytes()[0] == 0x1f && out.Bytes()[1] == 0x8b
				if want := gz && name != "busybox-nogzip"; zipped != want {
					t.Fatalf("gz=%v: compressed %v, want %v", gz, zipped, want)
				}
				var got []byte
				must(t, readMaybeGzip(&out, func(e ArchiveEntry) error {
					got, _ = io.ReadAll(e.Body)
					return nil
				}))
				if !bytes.Equal(got, body) {
					t.Fatalf("gz=%v: got %d bytes, want %d", gz, len(got), len(body))
				}
				var ee ExitError
				err := ex.Exec(context.Background(), testTarget, DownloadArgv(dir, gz, []string{"./f.txt", "./gone"}), nil, io.Discard, io.Discard)
				if !errors.As(err, &ee) || ee.ExitStatus() == 0 {
					t.Fatalf("gz=%v: a vanished name: %v, want tar's non-zero status", gz, err)
				}
			}
		})
	}
}

// linkedExec reports a measured link, and records each exec's argv.
type linkedExec struct {
	Executor
	link  Link
	argvs [][]string
}

func (l *linkedExec) Link(Target) Link { return l.link }

func (l *linkedExec) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	l.argvs = append(l.argvs, argv)
	return l.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
}

// Download asks for a compressed archive over a link measured slow only, and
// reads either.
func TestDownloadByLink(t *testing.T) {
	dir := t.TempDir()
	body := bytes.Repeat([]byte("text that compresses\n"), 1000)
	must(t, os.WriteFile(filepath.Join(dir, "f.txt"), body, 0o644))
	for name, tt := range map[string]struct {
		link Link
		z    string
	}{
		"slow":             {Link{Rate: 1e6}, "z"},
		"fast":             {Link{Rate: 1e9}, ""},
		"nothing measured": {Link{}, ""},
	} {
		ex := &linkedExec{Executor: busybox(t), link: tt.link}
		var got []byte
		must(t, Download(context.Background(), ex, testTarget, dir, []string{"./f.txt"}, func(e ArchiveEntry) error {
			got, _ = io.ReadAll(e.Body)
			return nil
		}))
		if !bytes.Equal(got, body) || len(ex.argvs) != 1 || ex.argvs[0][5] != tt.z {
			t.Errorf("%s: got %d bytes, argv %q, want %d bytes and %q", name, len(got), ex.argvs, len(body), tt.z)
		}
	}
}
