package remote

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// valve stands for the link to a container's exec: what the client writes
// on the exec's stdin passes on to the process unless it is held (a stalled
// link, a frozen reader) or the link was cut after a number of bytes.
type valve struct {
	mu     sync.Mutex
	cond   *sync.Cond
	q      []byte // written by the client, not yet passed on
	eof    bool   // the client closed its side
	held   bool
	cut    int64 // with cutting, how many more bytes pass before the link is cut
	cuts   bool
	gone   bool // the process's side is closed
	queued chan struct{}
}

func newValve() *valve {
	v := &valve{queued: make(chan struct{}, 1)}
	v.cond = sync.NewCond(&v.mu)
	return v
}

// run passes in on to out (the process's stdin) as the valve allows.
func (v *valve) run(in io.Reader, out *io.PipeWriter) {
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := in.Read(buf)
			v.mu.Lock()
			v.q = append(v.q, buf[:n]...)
			if err != nil {
				v.eof = true
			}
			v.cond.Broadcast()
			v.mu.Unlock()
			if n > 0 {
				select {
				case v.queued <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	v.mu.Lock()
	defer v.mu.Unlock()
	for {
		for !v.gone && (v.held || len(v.q) == 0 && !v.eof) {
			v.cond.Wait()
		}
		if v.gone {
			return
		}
		if len(v.q) == 0 && v.eof {
			_ = out.Close()
			return
		}
		p := v.q
		if v.cuts && int64(len(p)) > v.cut {
			p = p[:v.cut]
		}
		v.q = v.q[len(p):]
		v.cut -= int64(len(p))
		v.mu.Unlock()
		_, err := out.Write(p)
		v.mu.Lock()
		if err != nil {
			return
		}
		if v.cuts && v.cut <= 0 {
			v.gone = true
			_ = out.Close() // the link is cut: the process sees its stdin end
			return
		}
	}
}

func (v *valve) set(f func(v *valve)) {
	v.mu.Lock()
	f(v)
	v.cond.Broadcast()
	v.mu.Unlock()
}

// detached is a writer a client may stop reading: it drops what comes after.
type detached struct {
	mu   sync.Mutex
	w    io.Writer
	gone bool
}

func (d *detached) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.gone {
		_, _ = d.w.Write(p)
	}
	return len(p), nil
}

func (d *detached) detach() {
	d.mu.Lock()
	d.gone = true
	d.mu.Unlock()
}

// linkedLoops runs the first stream loop behind a valve, as a container
// runs an exec: the process outlives the client's end of it (a cancelled
// exec only drops the connection), and reads what the link still delivers.
// Every other exec runs as ex runs it.
type linkedLoops struct {
	ex    *localExecutor
	v     *valve
	once  sync.Once
	ended chan struct{} // the first loop's process ended
}

func (l *linkedLoops) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	first := false
	if len(argv) > 2 && argv[2] == streamLoop {
		l.once.Do(func() { first = true })
	}
	if !first {
		return l.ex.Exec(ctx, t, argv, stdin, stdout, stderr)
	}
	pr, pw := io.Pipe()
	go l.v.run(stdin, pw)
	out, errw := &detached{w: stdout}, &detached{w: stderr}
	done := make(chan error, 1)
	go func() {
		err := l.ex.Run(context.Background(), argv, pr, out, errw)
		_ = pr.CloseWithError(io.ErrClosedPipe)
		l.v.set(func(v *valve) { v.gone = true })
		close(l.ended)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		out.detach()
		errw.detach()
		return ctx.Err()
	}
}

func newLinkedLoops(ex *localExecutor) *linkedLoops {
	return &linkedLoops{ex: ex, v: newValve(), ended: make(chan struct{})}
}

// linkedStreams is Streams over linkedLoops of ex, and a root to sync into.
func linkedStreams(t *testing.T, ex *localExecutor) (*linkedLoops, *Streams, string) {
	t.Helper()
	l := newLinkedLoops(ex)
	s, _ := newTestStreams(t, l)
	return l, s, t.TempDir()
}

// waitEnded waits for the first loop's process to end, releasing whatever
// the valve still holds first: nothing may stay running after a test.
func (l *linkedLoops) waitEnded(t *testing.T) {
	t.Helper()
	l.v.set(func(v *valve) { v.held = false })
	select {
	case <-l.ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the first loop did not end")
	}
}

// oneLoopLeft fails unless what the loops keep in tmp, their TMPDIR (stage
// files and records) is one loop's: the replaced loop's went with it.
func oneLoopLeft(t *testing.T, tmp string) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(tmp, "livesync-*"))
	pids := map[string]bool{}
	for _, f := range left {
		base := filepath.Base(f)
		for _, suf := range []string{".e", ".0", ".1", ".x", ".p"} {
			base = strings.TrimSuffix(base, suf)
		}
		pids[base[strings.LastIndexByte(base, '.')+1:]] = true
	}
	if len(pids) != 1 {
		t.Errorf("in TMPDIR: %q; want one loop's files", left)
	}
}

func archiveOf(t *testing.T, name string, content []byte) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	must(t, tw.WriteHeader(&tar.Header{Name: "./" + name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}))
	_, err := tw.Write(content)
	must(t, err)
	must(t, tw.Close())
	return &b
}

// A frame of a stream the client gave up on, held in flight until after the
// batch that replaced it was acked, is never applied: v1 does not come back
// over v2 (it did: the old loop read the late frame and applied it).
func TestStreamFenceLateFrame(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			l, s, root := linkedStreams(t, ex)
			sendFile(t, s, root, "a", "v0")

			l.v.set(func(v *valve) { v.held = true })
			ctx, cancel := context.WithCancel(context.Background())
			applied := make(chan error, 1)
			go func() {
				_, err := Apply(ctx, s, testTarget, "copying files", &ApplyArgs{Root: root, Tar: true}, archiveOf(t, "a", []byte("v1")))
				applied <- err
			}()
			select {
			case <-l.v.queued: // the frame is in flight, held
			case <-time.After(20 * time.Second):
				t.Fatal("the v1 frame was never written")
			}
			cancel() // the batch's deadline: the client gives up on the stream
			if err := <-applied; err == nil {
				t.Fatal("the held batch was acked")
			}

			sendFile(t, s, root, "a", "v2") // the retry, on a new stream
			l.waitEnded(t)                  // the held frame is delivered now
			if got, err := os.ReadFile(filepath.Join(root, "a")); err != nil || string(got) != "v2" {
				t.Fatalf("a = %q, %v; want v2: a late frame of the replaced stream was applied", got, err)
			}
			sendFile(t, s, root, "b", "b") // the new stream goes on
			oneLoopLeft(t, ex.Tmp)
		})
	}
}

// refusing fails every later stream's exec (a proxy that cuts long-lived
// connections, a probe that times out), so batches go by an exec each.
type refusing struct {
	*linkedLoops
	streams *atomic.Int32
}

func (r refusing) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(argv) > 3 && argv[2] == streamLoop && argv[3] == "livesync-stream" && r.streams.Add(1) > 1 {
		return errors.New("the stream was refused")
	}
	return r.linkedLoops.Exec(ctx, t, argv, stdin, stdout, stderr)
}

// A frame held in flight on a stream given up on is not applied over the
// batch that goes by an exec of its own because no new stream could be
// opened: the exec first fences the old loop (it did not: v1 came back
// over v2).
func TestStreamFenceBeforeExecFallback(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			l := newLinkedLoops(ex)
			dials := new(atomic.Int32)
			s, _ := newTestStreams(t, refusing{l, dials})
			root := t.TempDir()
			sendFile(t, s, root, "a", "v0")

			l.v.set(func(v *valve) { v.held = true })
			ctx, cancel := context.WithCancel(context.Background())
			applied := make(chan error, 1)
			go func() {
				_, err := Apply(ctx, s, testTarget, "copying files", &ApplyArgs{Root: root, Tar: true}, archiveOf(t, "a", []byte("v1")))
				applied <- err
			}()
			select {
			case <-l.v.queued:
			case <-time.After(20 * time.Second):
				t.Fatal("the v1 frame was never written")
			}
			cancel()
			if err := <-applied; err == nil {
				t.Fatal("the held batch was acked")
			}

			sendFile(t, s, root, "a", "v2") // the retry, by an exec of its own
			if n := dials.Load(); n < 2 {
				t.Fatalf("%d streams dialed: the retry was to find its stream refused", n)
			}
			l.waitEnded(t) // the held frame is delivered now
			if got, err := os.ReadFile(filepath.Join(root, "a")); err != nil || string(got) != "v2" {
				t.Fatalf("a = %q, %v; want v2: a late frame of the replaced stream was applied", got, err)
			}
		})
	}
}

// A chunked frame cut short (the link dropped after 1 MiB of a 2 MiB file)
// applies nothing: the file keeps its old content, never the part that came
// (it became 1 MiB of the new content under its real name).
func TestStreamCutFrameAppliesNothing(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			l, s, root := linkedStreams(t, ex)
			old := bytes.Repeat([]byte("o"), 2<<20)
			_, err := Apply(context.Background(), s, testTarget, "copying files", &ApplyArgs{Root: root, Tar: true}, archiveOf(t, "big", old))
			must(t, err)

			l.v.set(func(v *valve) { v.cuts, v.cut = true, 1<<20+4096 })
			_, err = Apply(context.Background(), s, testTarget, "copying files", &ApplyArgs{Root: root, Tar: true, Deletes: []string{"./gone"}},
				archiveOf(t, "big", bytes.Repeat([]byte("n"), 2<<20)))
			if err == nil {
				t.Fatal("a batch whose frame was cut short was acked")
			}
			l.waitEnded(t)
			got, err := os.ReadFile(filepath.Join(root, "big"))
			must(t, err)
			if !bytes.Equal(got, old) {
				t.Fatalf("big holds %d bytes, %d of them new; want the old 2 MiB whole", len(got), bytes.Count(got, []byte("n")))
			}
			// The loop's stage file went with it: its replacement removes it.
			sendFile(t, s, root, "b", "b")
			oneLoopLeft(t, ex.Tmp)
		})
	}
}
