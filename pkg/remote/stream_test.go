package remote

import (
	"archive/tar"
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
	"testing"
	"testing/iotest"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testwait"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

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
		{name: "odd reads", r: iotest.HalfReader(io.MultiReader(strings.NewReader("odd"), bytes.NewReader(data))), want: append([]byte("odd"), data...), wantErr: io.EOF},
		{name: "small archive", r: strings.NewReader("tiny"), want: []byte("tiny"), wantErr: io.EOF},
		{name: "empty archive", r: strings.NewReader(""), want: nil, wantErr: io.EOF},
		{name: "read error", r: io.MultiReader(bytes.NewReader(data), &errReader{boom}), want: data, wantErr: boom},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ra := newReadAhead(tt.r)
			defer ra.close()
			var got []byte
			for {
				chunk, _, err := ra.nextPart(false)
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
				if len(chunk)%blockSize != 0 {
					t.Fatalf("chunk of %d bytes before the end, want whole blocks of %d", len(chunk), blockSize)
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
	if _, _, err := ra.nextPart(false); err != nil {
		t.Fatal(err)
	}
	// Nobody asks for more: the reading goes on up to two chunks ahead,
	// then waits. Closing the pipe under it ends the writer.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ra.mu.Lock()
		n := ra.size
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

// A new stream sends one heartbeat at once; idle streams send one every
// heartbeatEvery; one whose ack does not come within the ack timeout is shut
// down.
func TestStreamHeartbeat(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	hung := make(chan struct{})
	var pings sync.WaitGroup
	pings.Add(1)
	ex := &scriptedLoop{onPing: func(seq string) bool {
		switch seq {
		case "1": // the one a new stream sends at once, to measure its round trip
			return true
		case "2":
			pings.Done()
			return true
		}
		close(hung)
		return false // never ack the second idle one
	}}
	// The clock only moves while the stream waits for its next heartbeat:
	// stepping it while a ping waits for its ack would time the ack out
	// (a slow ack under -race and load did, and the stream then never sent
	// the second ping).
	const ackTimeout = time.Hour
	s := NewStreams(ex, fc, ackTimeout)
	defer s.CloseAll(0)
	st, err := s.get(context.Background(), testTarget)
	must(t, err)
	testwait.Waiters(t, fc, 1) // the heartbeat's timer
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
	testwait.Waiters(t, fc, 1) // the next heartbeat's timer
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
		for _, seq := range strings.Fields(string(buf[:n])) {
			if strings.HasPrefix(seq, "F") {
				continue // the fence line, before the first ping
			}
			if l.onPing(seq) {
				_, _ = io.WriteString(stdout, "K"+seq+" 0\x00")
			}
		}
	}
}

func (r *errReader) Read([]byte) (int, error) { return 0, r.err }

// streamCounter counts the execs a Streams opens, by kind.
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
func newTestStreams(t *testing.T, ex Executor) (*Streams, *streamCounter) {
	t.Helper()
	c := &streamCounter{Executor: ex}
	s := NewStreams(c, clock.RealClock{}, 30*time.Second)
	t.Cleanup(func() { s.CloseAll(10 * time.Second) })
	return s, c
}

// sendFile applies a batch that extracts one file, name with content, in root.
func sendFile(t *testing.T, ex Executor, root, name, content string) {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	must(t, tw.WriteHeader(&tar.Header{Name: "./" + name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}))
	_, err := io.WriteString(tw, content)
	must(t, err)
	must(t, tw.Close())
	replaced, err := Apply(context.Background(), ex, testTarget, "copying files", &ApplyArgs{Root: root, Tar: true}, &b)
	if err != nil || len(replaced) != 0 {
		t.Fatalf("sending %q: %v (replaced %q)", name, err, replaced)
	}
}

// The loop ends on stdin EOF; a stream that died is replaced by the next
// batch, which a retry re-applies.
func TestStreamEOFAndReconnect(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			s, c := newTestStreams(t, ex)
			root := t.TempDir()
			sendFile(t, s, root, "a", "a")
			st, err := s.get(context.Background(), testTarget)
			must(t, err)
			s.Close(testTarget)
			select {
			case <-st.ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the loop did not end on EOF")
			}
			if err := st.apply(context.Background(), []string{"x"}, nil, io.Discard, io.Discard, nil); !IsTransient(Classify(err, testTarget, "copying files", "/x", "")) {
				t.Errorf("a batch on a closed stream: %v, want a transient error", err)
			}
			sendFile(t, s, root, "b", "b")
			for name, want := range map[string]string{"a": "a", "b": "b"} {
				if got, err := os.ReadFile(filepath.Join(root, name)); err != nil || string(got) != want {
					t.Errorf("%s = %q, %v; want %q", name, got, err, want)
				}
			}
			if loops, _ := c.counts(); loops != 2 {
				t.Errorf("%d stream execs, want 2", loops)
			}
		})
	}
}

// A one-frame batch whose tar fails after it read the frame: the loop acks
// the failure with tar's stderr, reads nothing more of stdin for it (the
// next batch's frame follows), and the next batch lands. The other way a
// one-frame batch fails, before its tar ran, is failingBatch in pkg/filesync.
func TestStreamOneFrameTarFails(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			s, c := newTestStreams(t, ex)
			root := t.TempDir()
			garbage := bytes.Repeat([]byte("not a tar archive "), 100)
			var stderr bytes.Buffer
			err := s.Exec(context.Background(), testTarget, (&ApplyArgs{Root: root, Tar: true}).Argv(), bytes.NewReader(garbage), io.Discard, &stderr)
			var st ackStatus
			if !errors.As(err, &st) || st == 0 {
				t.Fatalf("a batch of garbage: %v, want a non-zero ack", err)
			}
			if msg := stderr.String(); !strings.Contains(msg, "livesync: tar failed") || strings.ContainsRune(msg, '\001') {
				t.Errorf("stderr = %q, want tar's failure and no marker", msg)
			}
			sendFile(t, s, root, "a", "after")
			if got, err := os.ReadFile(filepath.Join(root, "a")); err != nil || string(got) != "after" {
				t.Errorf("a = %q, %v; want the next batch's file", got, err)
			}
			if loops, _ := c.counts(); loops != 1 {
				t.Errorf("%d stream execs, want 1: the failure must not end the stream", loops)
			}
		})
	}
}

// A small batch allocates about what it sends, not a frame writer's and a
// read-ahead's 64 KiB buffers each time: in a fan-out every replica's worker
// sends every batch, and clearing and collecting those buffers was a fifth of
// the client's CPU with 10 replicas (test/bench/PERFORMANCE.md, run N).
func TestStreamSmallBatchAllocs(t *testing.T) {
	if raceOn {
		t.Skip("the race detector drops pooled buffers and allocates on its own")
	}
	s, _ := newTestStreams(t, busybox(t))
	root := t.TempDir()
	sendFile(t, s, root, "a", "warm") // the stream's own set-up is not a batch's
	const n = 40
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		sendFile(t, s, root, "a", fmt.Sprintf("edit %d", i))
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d bytes allocated per batch", per)
	if per > 48<<10 {
		t.Errorf("a one-file batch through the stream allocated %d bytes, want under 48 KiB", per)
	}
}
