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
	if len(argv) > 2 && argv[2] == streamLoop {
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
func newTestStreams(t *testing.T, ex Executor) (*streams, *streamCounter) {
	t.Helper()
	c := &streamCounter{Executor: ex}
	s := newStreams(c, clock.RealClock{}, 30*time.Second)
	t.Cleanup(func() { s.closeAll(10 * time.Second) })
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
			if got := s.transport(context.Background(), testTarget); got != TransportStream {
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
			local, remote, outside := t.TempDir(), t.TempDir(), t.TempDir()
			writeTree(t, local, map[string]string{"etc/passwd": "mine"})
			must(t, os.Symlink(outside, filepath.Join(remote, "etc")))
			m := testMapping(t, local, remote, nil)
			p, err := plan(m, NewIndex(), nil, true)
			must(t, err)
			res, err := apply(context.Background(), s, testTarget, m, p, archiveOpts{})
			must(t, err)
			if fmt.Sprint(res.replaced) != "[etc]" {
				t.Errorf("replaced %q, want [etc]", res.replaced)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Errorf("wrote through the symlink: %v", entries)
			}
			assertSameTree(t, local, remote)
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
	remote := filepath.Join(parent, "app")
	must(t, os.WriteFile(remote, []byte("a file where the root goes"), 0o600))
	m := testMapping(t, local, remote, nil)
	p, err := plan(m, NewIndex(), nil, true)
	must(t, err)
	_, err = apply(context.Background(), s, testTarget, m, p, archiveOpts{})
	if !errors.Is(err, ErrTypeConflict) {
		t.Fatalf("apply over a file: %v, want a type conflict", err)
	}
	must(t, os.Remove(remote))
	idx := NewIndex()
	syncOnce(t, s, m, idx)
	assertSameTree(t, local, remote)
	if loops, _ := c.counts(); loops != 1 {
		t.Errorf("%d stream execs, want 1: the failure must not end the stream", loops)
	}
}

// Without dd, a target falls back to an exec per batch, once probed.
func TestStreamFallback(t *testing.T) {
	s, c := newTestStreams(t, busybox(t, "dd"))
	local := t.TempDir()
	writeTree(t, local, map[string]string{"a": "a"})
	remote := t.TempDir()
	m := testMapping(t, local, remote, nil)
	idx := NewIndex()
	syncOnce(t, s, m, idx)
	writeTree(t, local, map[string]string{"b": "b"})
	syncOnce(t, s, m, idx)
	assertSameTree(t, local, remote)
	if loops, others := c.counts(); loops != 1 || others != 2 {
		t.Errorf("%d stream execs and %d other execs, want 1 probe and 2 execs", loops, others)
	}
	if got := s.transport(context.Background(), testTarget); got != TransportExec {
		t.Errorf("transport %q, want %q", got, TransportExec)
	}
}

// The loop ends on stdin EOF; a stream that died is replaced by the next
// batch, which a retry re-applies.
func TestStreamEOFAndReconnect(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			s, c := newTestStreams(t, ex)
			local, remote := t.TempDir(), t.TempDir()
			writeTree(t, local, map[string]string{"a": "a"})
			m := testMapping(t, local, remote, nil)
			idx := NewIndex()
			syncOnce(t, s, m, idx)
			st, err := s.get(context.Background(), testTarget)
			must(t, err)
			s.close(testTarget)
			select {
			case <-st.ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the loop did not end on EOF")
			}
			if err := st.apply(context.Background(), []string{"x"}, nil, io.Discard, io.Discard); !IsTransient(classify(err, testTarget, "copying files", "/x", "")) {
				t.Errorf("a batch on a closed stream: %v, want a transient error", err)
			}
			writeTree(t, local, map[string]string{"b": "b"})
			syncOnce(t, s, m, idx)
			assertSameTree(t, local, remote)
			if loops, _ := c.counts(); loops != 2 {
				t.Errorf("%d stream execs, want 2", loops)
			}
		})
	}
}

// A batch whose context ends mid-frame shuts the stream down rather than
// leave it out of step; the next batch gets a new one.
func TestStreamCancelledBatch(t *testing.T) {
	s, c := newTestStreams(t, busybox(t))
	local, remote := t.TempDir(), t.TempDir()
	m := testMapping(t, local, remote, nil)
	writeTree(t, local, map[string]string{"a": "a"})
	idx := NewIndex()
	syncOnce(t, s, m, idx)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- s.Exec(ctx, testTarget, (&scriptArgs{tar: true}).argv(m), pr, io.Discard, io.Discard)
	}()
	_, _ = pw.Write(bytes.Repeat([]byte{0}, 100)) // half a tar header, then silence
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled batch: %v", err)
	}
	_ = pw.Close()
	writeTree(t, local, map[string]string{"b": "b"})
	syncOnce(t, s, m, idx)
	assertSameTree(t, local, remote)
	if loops, _ := c.counts(); loops != 2 {
		t.Errorf("%d stream execs, want 2", loops)
	}
}

// Idle streams send a heartbeat every heartbeatEvery; one whose ack does not
// come within the ack timeout is shut down.
func TestStreamHeartbeat(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	hung := make(chan struct{})
	var pings sync.WaitGroup
	pings.Add(1)
	ex := &scriptedLoop{onPing: func(seq string) bool {
		if seq == "1" {
			pings.Done()
			return true
		}
		close(hung)
		return false // never ack the second
	}}
	// The clock only moves while the stream waits for its next heartbeat:
	// stepping it while a ping waits for its ack would time the ack out
	// (a slow ack under -race and load did, and the stream then never sent
	// the second ping).
	const ackTimeout = time.Hour
	s := newStreams(ex, fc, ackTimeout)
	defer s.closeAll(0)
	st, err := s.get(context.Background(), testTarget)
	must(t, err)
	waitForNWaiters(t, fc, 1) // the heartbeat's timer
	fc.Step(heartbeatEvery)
	pings.Wait()
	// The first ping's ack is in once st.last moved to now (ping sets it
	// under st.batch); its ack timer is stopped before st.batch is free.
	deadline := time.Now().Add(20 * time.Second)
	for acked := false; !acked; {
		if st.batch.TryLock() {
			acked = st.last.Equal(fc.Now())
			st.batch.Unlock()
		}
		if time.Now().After(deadline) {
			t.Fatal("the first heartbeat was not acked")
		}
		runtime.Gosched()
	}
	waitForNWaiters(t, fc, 1) // the next heartbeat's timer
	fc.Step(heartbeatEvery)
	select {
	case <-hung:
	case <-time.After(20 * time.Second):
		t.Fatal("no second heartbeat")
	}
	select {
	case <-st.dead:
		t.Fatal("shut down before the ack timeout")
	default:
	}
	fc.Step(ackTimeout) // the hung ping's ack timer exists before it is sent
	select {
	case <-st.dead:
	case <-time.After(10 * time.Second):
		t.Fatal("a stream whose heartbeat was not acked stayed open")
	}
}

// scriptedLoop plays streamLoop's part for heartbeats: it answers the probe
// and acks pings onPing approves.
type scriptedLoop struct{ onPing func(seq string) bool }

func (l *scriptedLoop) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	_, _ = io.WriteString(stdout, "Y\x00")
	buf := make([]byte, 64)
	for {
		n, err := stdin.Read(buf)
		if err != nil {
			return nil
		}
		seq := strings.TrimSpace(string(buf[:n]))
		if l.onPing(seq) {
			_, _ = io.WriteString(stdout, "K"+seq+" 0\x00")
		}
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
	if len(argv) > 2 && argv[2] == streamLoop {
		k.mu.Lock()
		k.loops++
		k.mu.Unlock()
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		in := stdin
		stdin = readerFunc(func(p []byte) (int, error) {
			if k.armed.CompareAndSwap(true, false) {
				cancel()
				return 0, io.ErrClosedPipe
			}
			return in.Read(p)
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
	local, remote := t.TempDir(), filepath.Join(t.TempDir(), "app")
	writeTree(t, local, map[string]string{"a": "a", "with space/ü": "u"})
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	rec := newRecorder()
	// The clock is stepped blindly below, while batches run: deadlines far
	// beyond those steps keep them from timing out.
	e := New(ex, Config{Mappings: []Mapping{{Local: LocalPath(local), Remote: RemotePath(remote)}}, ExecTimeout: 24 * time.Hour},
		WithClock(fc), WithReporter(rec))
	tg := podTarget("web-1")
	e.AddTarget(tg)
	if ev := wait[TargetAdded](t, rec); ev.Transport != TransportStream {
		t.Errorf("target-added transport %q, want %q", ev.Transport, TransportStream)
	}
	ctx, cancel := context.WithCancel(context.Background())
	changes := make(chan Change)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, changes) }()
	if ev := wait[InitialSync](t, rec); ev.Err != nil || ev.Transport != TransportStream {
		t.Fatalf("initial sync = %+v, want success via the stream", ev)
	}
	assertSameTree(t, local, remote)

	// step releases a change through the quiet window, and the retry's
	// backoff if the batch fails once, until its Batch event comes.
	step := func(c Change) Batch {
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
				fc.Step(DefaultQuiet)
				runtime.Gosched()
			}
		}
	}
	writeTree(t, local, map[string]string{"a": "edited"})
	if b := step(Change{Path: filepath.Join(local, "a")}); b.Failed != 0 || b.Changed != 1 {
		t.Errorf("batch = %+v", b)
	}
	assertSameTree(t, local, remote)
	if n := ex.count(); n != 1 {
		t.Errorf("%d streams after a batch, want 1", n)
	}

	ex.armed.Store(true) // the stream dies as the next frame goes out
	writeTree(t, local, map[string]string{"b": "new"})
	if b := step(Change{Path: filepath.Join(local, "b")}); b.Failed != 0 || b.Changed != 1 {
		t.Errorf("batch re-applied on a new stream = %+v; errors %v", b, rec.errors())
	}
	assertSameTree(t, local, remote)
	if n := ex.count(); n != 2 {
		t.Errorf("%d streams, want 2 (one replaced)", n)
	}

	close(changes)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cancel()
	e.streams.mu.Lock()
	left := len(e.streams.open)
	e.streams.mu.Unlock()
	if left != 0 {
		t.Errorf("%d streams open after Run returned", left)
	}
}

// shellWords survives the loop's read and eval in busybox sh and dash.
func TestShellWordsRoundTrip(t *testing.T) {
	args := []string{"plain", "with space", "it's", `"$nl" $(echo no) \n`, "new\nline\n", "\xff\xfe", "\ttab ", ""}
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			script := `nl='
'
read -r seq words; eval "set -- $words"; printf '%s\0' "$@"`
			var out, errb bytes.Buffer
			in := strings.NewReader("7 " + shellWords(args) + "\n")
			must(t, ex.Exec(context.Background(), testTarget, []string{"sh", "-c", script}, in, &out, &errb))
			got := strings.Split(strings.TrimSuffix(out.String(), "\x00"), "\x00")
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", args) {
				t.Errorf("got %q, want %q (stderr %q)", got, args, errb.String())
			}
		})
	}
}

// TestReadAhead checks that readAhead hands out what it read in order, in
// chunks of minChunk to chunkSize (the last one shorter), and the error that
// ended the reading after the data before it.
func TestReadAhead(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (3*chunkSize+minChunk/2)/16)
	boom := errors.New("boom")
	for _, tt := range []struct {
		name    string
		r       io.Reader
		want    []byte
		wantErr error
	}{
		{name: "whole archive", r: bytes.NewReader(data), want: data, wantErr: io.EOF},
		{name: "small archive", r: strings.NewReader("tiny"), want: []byte("tiny"), wantErr: io.EOF},
		{name: "empty archive", r: strings.NewReader(""), want: nil, wantErr: io.EOF},
		{name: "read error", r: io.MultiReader(bytes.NewReader(data), &errReader{boom}), want: data, wantErr: boom},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ra := newReadAhead(tt.r)
			defer ra.close()
			var got []byte
			for {
				chunk, err := ra.next()
				if len(chunk) > chunkSize {
					t.Fatalf("chunk of %d bytes, want at most %d", len(chunk), chunkSize)
				}
				got = append(got, chunk...)
				if err != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("ended with %v, want %v", err, tt.wantErr)
					}
					break
				}
				if len(chunk) < minChunk {
					t.Fatalf("chunk of %d bytes before the end, want at least %d", len(chunk), minChunk)
				}
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("got %d bytes, want %d, or they differ", len(got), len(tt.want))
			}
		})
	}
}

// TestReadAheadAhead checks that the archive is read while a chunk is out:
// the reader gets the next chunk's bytes before the consumer asks for it,
// and stops at two chunks ahead.
func TestReadAheadAhead(t *testing.T) {
	pr, pw := io.Pipe()
	ra := newReadAhead(pr)
	defer ra.close()
	written := make(chan int, 1)
	go func() {
		n := 0
		block := make([]byte, 64<<10)
		for n < 4*chunkSize {
			if _, err := pw.Write(block); err != nil {
				break
			}
			n += len(block)
		}
		written <- n
	}()
	if _, err := ra.next(); err != nil {
		t.Fatal(err)
	}
	// Nobody asks for more: the reading goes on up to two chunks ahead,
	// then waits. Closing the pipe under it ends the writer.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ra.mu.Lock()
		n := len(ra.buf)
		ra.mu.Unlock()
		if n >= 2*chunkSize {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read ahead %d bytes, want %d", n, 2*chunkSize)
		}
		runtime.Gosched()
	}
	_ = pr.CloseWithError(io.ErrClosedPipe)
	if n := <-written; n >= 4*chunkSize {
		t.Fatalf("the reader took all %d bytes; want it to stop two chunks ahead", n)
	}
}

type errReader struct{ err error }

func (r *errReader) Read([]byte) (int, error) { return 0, r.err }

// writeCounter counts the reads of each stream loop's stdin: an io.Pipe read
// never spans two writes, so with a buffer larger than any write, a read is
// one write of the client's, which every hop to the container (apiserver,
// kubelet, shim) relays as a message of its own.
type writeCounter struct {
	Executor
	reads atomic.Int64
}

func (c *writeCounter) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(argv) > 2 && argv[2] == streamLoop {
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
	local, remote := t.TempDir(), t.TempDir()
	writeTree(t, local, map[string]string{"a.txt": "one", "d/b.txt": "two"})
	m := testMapping(t, local, remote, nil)
	idx := NewIndex()
	syncOnce(t, s, m, idx)
	for i := range 3 {
		writeTree(t, local, map[string]string{"a.txt": fmt.Sprintf("edit %d", i)})
		before := c.reads.Load()
		syncOnce(t, s, m, idx)
		if n := c.reads.Load() - before; n != 1 {
			t.Errorf("edit %d: %d writes on the stream, want 1", i, n)
		}
		assertSameTree(t, local, remote)
	}
}
