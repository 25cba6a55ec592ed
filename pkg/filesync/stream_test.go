package filesync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// streamCounter counts the execs a streams opens, by kind.
type streamCounter struct {
	Executor
	mu            sync.Mutex
	loops, others int
}

func (c *streamCounter) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c.mu.Lock()
	if isStreamLoop(argv) {
		c.loops++
	} else {
		c.others++
	}
	c.mu.Unlock()
	return c.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
}

func (c *streamCounter) counts() (loops, others int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loops, c.others
}

// newTestStreams returns streams over ex on the real clock, closed with the test.
func newTestStreams(t *testing.T, ex Executor) (*remote.Streams, *streamCounter) {
	t.Helper()
	c := &streamCounter{Executor: ex}
	s := remote.NewStreams(c, clock.RealClock{}, 30*time.Second)
	t.Cleanup(func() { s.CloseAll(10 * time.Second) })
	return s, c
}

func TestStreamApply(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			s, c := newTestStreams(t, ex)
			applyRoundTrip(t, s)

			if loops, others := c.counts(); loops != 1 || others != 0 {
				t.Errorf("%d stream execs and %d other execs, want 1 and 0", loops, others)
			}
			if got := s.Transport(context.Background(), testTarget); got != TransportStream {
				t.Errorf("transport %q, want %q", got, TransportStream)
			}
		})
	}
}

// A symlink the container has where the local side has a directory is
// replaced, reported through the stream like through an exec, and nothing
// is written through it.
func TestStreamReplacedSymlink(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			s, _ := newTestStreams(t, ex)
			local, rdir, outside := t.TempDir(), t.TempDir(), t.TempDir()
			writeTree(t, local, map[string]string{"etc/passwd": "mine"})
			must(t, os.Symlink(outside, filepath.Join(rdir, "etc")))
			m := testMapping(t, local, rdir, nil)
			p, err := planner.Changes(m, planner.NewIndex(), nil, true)
			must(t, err)
			res, err := apply(context.Background(), s, testTarget, m, &sending{Plan: p}, tarstream.Options{})
			must(t, err)
			if fmt.Sprint(res.replaced) != "[etc]" {
				t.Errorf("replaced %q, want [etc]", res.replaced)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Errorf("wrote through the symlink: %v", entries)
			}
			assertSameTree(t, local, rdir)
		})
	}
}

// A batch that fails acks its status and stderr, and the stream goes on.
func TestStreamFailingBatch(t *testing.T) {
	// One file is a frame of one length; 3 MiB go in chunks, of which the
	// failing batch reads none, so the loop must drain them.
	sizes := map[string]int{"one frame": 1, "chunks": 3 << 20}
	for name, ex := range executors(t) {
		for frame, size := range sizes {
			t.Run(name+"/"+frame, func(t *testing.T) { failingBatch(t, ex, size) })
		}
	}
}

func failingBatch(t *testing.T, ex Executor, size int) {
	s, c := newTestStreams(t, ex)
	local, parent := t.TempDir(), t.TempDir()
	writeTree(t, local, map[string]string{"a": strings.Repeat("a", size)})
	root := filepath.Join(parent, "app")
	must(t, os.WriteFile(root, []byte("a file where the root goes"), 0o600))
	m := testMapping(t, local, root, nil)
	p, err := planner.Changes(m, planner.NewIndex(), nil, true)
	must(t, err)
	_, err = apply(context.Background(), s, testTarget, m, &sending{Plan: p}, tarstream.Options{})
	if !errors.Is(err, remote.ErrTypeConflict) {
		t.Fatalf("apply over a file: %v, want a type conflict", err)
	}
	must(t, os.Remove(root))
	idx := planner.NewIndex()
	syncOnce(t, s, m, idx)
	assertSameTree(t, local, root)
	if loops, _ := c.counts(); loops != 1 {
		t.Errorf("%d stream execs, want 1: the failure must not end the stream", loops)
	}
}

// Without dd, a target falls back to an exec per batch, once probed.
func TestStreamFallback(t *testing.T) {
	s, c := newTestStreams(t, busybox(t, "dd"))
	local := t.TempDir()
	writeTree(t, local, map[string]string{"a": "a"})
	rdir := t.TempDir()
	m := testMapping(t, local, rdir, nil)
	idx := planner.NewIndex()
	syncOnce(t, s, m, idx)
	writeTree(t, local, map[string]string{"b": "b"})
	syncOnce(t, s, m, idx)
	assertSameTree(t, local, rdir)
	if loops, others := c.counts(); loops != 1 || others != 2 {
		t.Errorf("%d stream execs and %d other execs, want 1 probe and 2 execs", loops, others)
	}
	if got := s.Transport(context.Background(), testTarget); got != TransportExec {
		t.Errorf("transport %q, want %q", got, TransportExec)
	}
}

// A batch whose context ends mid-frame shuts the stream down rather than
// leave it out of step; the next batch gets a new one.
func TestStreamCancelledBatch(t *testing.T) {
	s, c := newTestStreams(t, busybox(t))
	local, rdir := t.TempDir(), t.TempDir()
	m := testMapping(t, local, rdir, nil)
	writeTree(t, local, map[string]string{"a": "a"})
	idx := planner.NewIndex()
	syncOnce(t, s, m, idx)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- s.Exec(ctx, testTarget, (&remote.ApplyArgs{Root: string(m.RemoteDir()), Tar: true}).Argv(), pr, io.Discard, io.Discard)
	}()
	_, _ = pw.Write(bytes.Repeat([]byte{0}, 100)) // half a tar header, then silence
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled batch: %v", err)
	}
	_ = pw.Close()
	writeTree(t, local, map[string]string{"b": "b"})
	syncOnce(t, s, m, idx)
	assertSameTree(t, local, rdir)
	if loops, _ := c.counts(); loops != 2 {
		t.Errorf("%d stream execs, want 2", loops)
	}
}

// killableLoops is a local executor that can keep streams, and can cut the
// next stream frame off before the loop reads any of it, the way a dropped
// connection or a killed loop would.
type killableLoops struct {
	*localExecutor
	armed atomic.Bool
	mu    sync.Mutex
	loops int
}

func (k *killableLoops) PersistentStreams() bool { return true }

func (k *killableLoops) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if isStreamLoop(argv) {
		k.mu.Lock()
		k.loops++
		k.mu.Unlock()
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		in := stdin
		// Checked again once a read returns: armed while the loop's reader waited in Read, the
		// next frame would otherwise go through whole (a small batch is one write) and the
		// stream die only after its batch was applied.
		stdin = readerFunc(func(p []byte) (int, error) {
			if k.armed.CompareAndSwap(true, false) {
				cancel()
				return 0, io.ErrClosedPipe
			}
			n, err := in.Read(p)
			if n > 0 && k.armed.CompareAndSwap(true, false) {
				cancel()
				return 0, io.ErrClosedPipe
			}
			return n, err
		})
	}
	return k.localExecutor.Exec(ctx, t, argv, stdin, stdout, stderr)
}

func (k *killableLoops) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.loops
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// The engine sends batches through one stream per target, says so, re-applies
// a batch whose stream died under it on a new one, and closes the streams when
// it stops.
func TestEngineStream(t *testing.T) {
	ex := &killableLoops{localExecutor: busybox(t)}
	local, rdir := t.TempDir(), filepath.Join(t.TempDir(), "app")
	writeTree(t, local, map[string]string{"a": "a", "with space/ü": "u"})
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	rec := newRecorder()
	// The clock is stepped blindly below, while batches run: deadlines far
	// beyond those steps keep them from timing out.
	e := New(ex, Config{Mappings: []planner.Mapping{{Local: planner.LocalPath(local), Remote: planner.RemotePath(rdir)}}, ExecTimeout: 24 * time.Hour},
		WithClock(fc), WithReporter(rec))
	tg := podTarget("web-1")
	e.AddTarget(tg)
	if ev := wait[TargetAdded](t, rec); ev.Transport != TransportStream {
		t.Errorf("target-added transport %q, want %q", ev.Transport, TransportStream)
	}
	ctx, cancel := context.WithCancel(context.Background())
	changes := make(chan coalesce.Change)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, changes) }()
	if ev := wait[InitialSync](t, rec); ev.Err != nil || ev.Transport != TransportStream {
		t.Fatalf("initial sync = %+v, want success via the stream", ev)
	}
	assertSameTree(t, local, rdir)

	// step releases a change through the quiet window, and the retry's
	// backoff if the batch fails once, until its Batch event comes.
	step := func(c coalesce.Change) Batch {
		t.Helper()
		changes <- c
		deadline := time.Now().Add(20 * time.Second)
		for {
			select {
			case ev := <-rec.ch:
				if b, ok := ev.(Batch); ok {
					return b
				}
			default:
				if time.Now().After(deadline) {
					t.Fatal("no batch")
				}
				fc.Step(coalesce.DefaultQuiet)
				runtime.Gosched()
			}
		}
	}
	writeTree(t, local, map[string]string{"a": "edited"})
	if b := step(coalesce.Change{Path: filepath.Join(local, "a")}); b.Failed != 0 || b.Changed != 1 {
		t.Errorf("batch = %+v", b)
	}
	assertSameTree(t, local, rdir)
	if n := ex.count(); n != 1 {
		t.Errorf("%d streams after a batch, want 1", n)
	}

	ex.armed.Store(true) // the stream dies as the next frame goes out
	writeTree(t, local, map[string]string{"b": "new"})
	if b := step(coalesce.Change{Path: filepath.Join(local, "b")}); b.Failed != 0 || b.Changed != 1 {
		t.Errorf("batch re-applied on a new stream = %+v; errors %v", b, rec.errors())
	}
	assertSameTree(t, local, rdir)
	if n := ex.count(); n != 2 {
		t.Errorf("%d streams, want 2 (one replaced)", n)
	}

	close(changes)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cancel()
	if left := e.streams.Len(); left != 0 {
		t.Errorf("%d streams open after Run returned", left)
	}
}

// writeCounter counts the reads of each stream loop's stdin: an io.Pipe read
// never spans two writes, so with a buffer larger than any write, a read is
// one write of the client's, which every hop to the container (apiserver,
// kubelet, shim) relays as a message of its own.
type writeCounter struct {
	Executor
	reads atomic.Int64
}

func (c *writeCounter) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if isStreamLoop(argv) {
		in := stdin
		stdin = readerFunc(func(p []byte) (int, error) {
			n, err := in.Read(p)
			if n > 0 {
				c.reads.Add(1)
			}
			return n, err
		})
	}
	return c.Executor.Exec(ctx, t, argv, stdin, stdout, stderr)
}

// A small batch (one edited file) is one write on the stream, its end
// included.
func TestStreamSmallBatchOneWrite(t *testing.T) {
	c := &writeCounter{Executor: &localExecutor{}}
	s, _ := newTestStreams(t, c)
	local, rdir := t.TempDir(), t.TempDir()
	writeTree(t, local, map[string]string{"a.txt": "one", "d/b.txt": "two"})
	m := testMapping(t, local, rdir, nil)
	idx := planner.NewIndex()
	syncOnce(t, s, m, idx)
	for i := range 3 {
		writeTree(t, local, map[string]string{"a.txt": fmt.Sprintf("edit %d", i)})
		before := c.reads.Load()
		syncOnce(t, s, m, idx)
		if n := c.reads.Load() - before; n != 1 {
			t.Errorf("edit %d: %d writes on the stream, want 1", i, n)
		}
		assertSameTree(t, local, rdir)
	}
}
