package filesync

import (
	"context"
	"crypto/rand"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
	clocktesting "k8s.io/utils/clock/testing"
)

// compressibleTree is a tree whose archive is over initialCompressMin, with
// the names that are hardest to carry.
func compressibleTree(t *testing.T, dir string) {
	t.Helper()
	writeTree(t, dir, weirdNames)
	writeTree(t, dir, map[string]string{
		"src/main.go":       strings.Repeat("package main // a line of source\n", 40_000), // 1.3 MB
		"bad-\xff\xfe-name": "non-UTF-8", "empty/": "", "link@src/main.go": "",
	})
}

// A compressed archive arrives whole through both transports, with busybox
// and GNU tools alike, and progress counts its tar bytes, not the smaller
// compressed stream.
func TestApplyCompressed(t *testing.T) {
	for name, ex := range executors(t) {
		transports := map[string]func(t *testing.T) Executor{
			TransportExec:   func(*testing.T) Executor { return ex },
			TransportStream: func(t *testing.T) Executor { s, _ := newTestStreams(t, ex); return s },
		}
		for tr, exOf := range transports {
			t.Run(name+"/"+tr, func(t *testing.T) {
				local, remote := t.TempDir(), filepath.Join(t.TempDir(), "app")
				compressibleTree(t, local)
				m := testMapping(t, local, remote, nil)
				p, err := planner.Changes(m, planner.NewIndex(), nil, true)
				must(t, err)
				pe := &progressExecutor{Executor: exOf(t), clk: clocktesting.NewFakeClock(time.Unix(1000, 0)), report: func(Progress) {}}
				res, err := apply(context.Background(), pe, testTarget, m, &sending{Plan: p}, tarstream.Options{Gzip: true})
				must(t, err)
				assertSameTree(t, local, remote)
				if res.Bytes < planner.PlanBytes(p) || pe.sent.Load() != res.Bytes {
					t.Errorf("result %d bytes, progress %d, want the tar's (at least %d) in both", res.Bytes, pe.sent.Load(), planner.PlanBytes(p))
				}
			})
		}
	}
}

// The listing says whether the container's gzip can decompress.
func TestListingGzip(t *testing.T) {
	for name, tt := range map[string]struct {
		ex   *localExecutor
		want bool
	}{
		"busybox":         {busybox(t), true},
		"busybox no gzip": {busybox(t, "gzip"), false},
		"gnu":             {&localExecutor{}, true},
	} {
		t.Run(name, func(t *testing.T) {
			for _, remote := range []string{t.TempDir(), filepath.Join(t.TempDir(), "missing")} {
				l, err := planner.ListRemote(context.Background(), tt.ex, testTarget, testMapping(t, t.TempDir(), remote, nil), false)
				must(t, err)
				if l.Gzip != tt.want {
					t.Errorf("%s: gzip = %v, want %v", remote, l.Gzip, tt.want)
				}
			}
		})
	}
}

// modeRecorder records the archive mode of every apply ($2 of applyScript).
type modeRecorder struct {
	Executor
	mu    sync.Mutex
	modes []string
}

func (r *modeRecorder) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if isApply(argv) {
		r.mu.Lock()
		r.modes = append(r.modes, argv[5])
		r.mu.Unlock()
	}
	return r.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
}

// An initial sync over initialCompressMin goes compressed where the
// container has gzip and as a plain tar where it has not; a small one, one
// of files that do not compress go plain (later batches: see
// TestEngineCompressesBatches).
func TestInitialSyncCompression(t *testing.T) {
	for name, tt := range map[string]struct {
		ex     *localExecutor
		small  bool
		random bool
		want   string
	}{
		"busybox":               {ex: busybox(t), want: "z"},
		"gnu":                   {ex: &localExecutor{}, want: "z"},
		"busybox without gzip":  {ex: busybox(t, "gzip"), want: "x"},
		"busybox, small tree":   {ex: busybox(t), small: true, want: "x"},
		"busybox, random bytes": {ex: busybox(t), random: true, want: "x"},
	} {
		t.Run(name, func(t *testing.T) {
			local, remote := t.TempDir(), filepath.Join(t.TempDir(), "app")
			switch {
			case tt.small:
				writeTree(t, local, weirdNames)
			case tt.random:
				b := make([]byte, 2<<20)
				_, _ = rand.Read(b)
				writeTree(t, local, map[string]string{"img.png": string(b), "a": "a"})
			default:
				compressibleTree(t, local)
			}
			rec := newRecorder()
			ex := &modeRecorder{Executor: tt.ex}
			e := New(ex, Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(local), Remote: planner.RemotePath(remote)}}, ExecTimeout: time.Minute},
				WithReporter(rec))
			e.AddTarget(podTarget("web-1"))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- e.Run(ctx, make(chan coalesce.Change)) }()
			ev := wait[InitialSync](t, rec)
			cancel()
			<-done
			if ev.Err != nil {
				t.Fatalf("initial sync: %v", ev.Err)
			}
			assertSameTree(t, local, remote)
			ex.mu.Lock()
			defer ex.mu.Unlock()
			if strings.Join(ex.modes, " ") != tt.want {
				t.Errorf("apply modes %q, want [%s]", ex.modes, tt.want)
			}
		})
	}
}
