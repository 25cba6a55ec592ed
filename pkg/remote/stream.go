package remote

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Transports a target can use, as reported in TargetAdded and InitialSync.
const (
	// TransportStream is one long-lived exec per target that applies every
	// batch (see streamLoop).
	TransportStream = "stream"
	// TransportExec is an exec per batch: the container lacks dd with
	// iflag=fullblock, or the executor cannot keep streams.
	TransportExec = "exec"
)

// Stream tuning. heartbeatEvery is how long a stream may sit idle before a
// heartbeat frame checks that it is alive. chunkSize bounds each tar chunk
// of a frame, and minChunk is what a chunk waits for before it goes, unless
// the archive ends: each chunk costs the loop a dd (it reads the chunk in
// blockSize blocks, and a second dd for what is left past the last whole
// block), so a chunk is as large as what was read ahead while the last one
// went, but not tiny, and a whole number of blocks but for the last (see
// readAhead). A 5 MB save in 1 MiB chunks of any length cost the container 17
// processes, and 55–75 ms of CPU against 50 in whole 4 MiB chunks. oneFrame is
// the largest archive sent as one frame of one length, which the loop reads
// in a single block: its dd holds all of it.
const (
	heartbeatEvery = 10 * time.Second
	chunkSize      = 4 << 20
	minChunk       = 256 << 10
	blockSize      = 64 << 10
	oneFrame       = 1 << 20
)

// PartMin is the least an archive holds between two marks of its parts
// (see Parted): each part costs the loop a cat, and the extraction runs a
// part behind the transfer.
const PartMin = 2 << 20

// Parted is an archive that says where its whole entries end (a
// tarstream.Reader, and the readers that wrap one), so that a frame of copies
// alone is extracted part by part as it comes, the transfer of each part
// beside the extraction of the one before (see stream.sh's parted frames),
// where a frame staged whole took the two in turn.
type Parted interface {
	// PartEnd is the offset, into what was read so far, up to which the
	// archive holds whole entries; 0 for none yet.
	PartEnd() int64
}

// PartEndOf is r's PartEnd, 0 where r marks no parts.
func PartEndOf(r io.Reader) int64 {
	if p, ok := r.(Parted); ok {
		return p.PartEnd()
	}
	return 0
}

// parted reports whether an apply frame with args (applyScript's, after $0)
// may be extracted part by part as it comes: a plain tar, and before it
// nothing but checks of directories ("p", "k", "w"), after it nothing but
// chmods. No precondition, recovery, move, patch, take, delete or place,
// which a frame cut short must not run, nor run before its tar is whole
// (see apply.sh's 1b). What a cut leaves is whole files, as a fence's kill
// of a tar does.
func parted(args []string) bool {
	if len(args) < 6 || args[1] != "x" {
		return false
	}
	nc, err1 := strconv.Atoi(args[3])
	nd, err2 := strconv.Atoi(args[4])
	nm, err3 := strconv.Atoi(args[5])
	if err1 != nil || err2 != nil || err3 != nil || nc < 0 || nm < 0 || nd != 0 || len(args) != 6+nc+nm {
		return false
	}
	for _, a := range args[6 : 6+nc] {
		if !strings.HasPrefix(a, "p./") && !strings.HasPrefix(a, "k./") && !strings.HasPrefix(a, "w./") {
			return false
		}
	}
	for _, a := range args[6+nc:] {
		if a == "" || a[0] < '0' || a[0] > '7' {
			return false // a place ("S…"), not a chmod ("755./dir")
		}
	}
	return true
}

// errStreamUnavailable means a target cannot keep a stream: use an exec per
// batch.
var errStreamUnavailable = errors.New("stream unavailable")

// streamDeadError is what a batch gets when its stream ended under it; like
// any transport failure it is transient, so the caller retries the batch on a
// new stream. It does not unwrap: the stream's own exec may have ended with
// context.Canceled, which the batch must not take for its own cancellation.
type streamDeadError struct{ err error }

func (e *streamDeadError) Error() string {
	if e.err == nil {
		return "exec stream closed"
	}
	return fmt.Sprintf("exec stream closed: %v", e.err)
}

// Streams is an Executor that runs the apply script of each batch, and
// sync-back's scans and downloads, through a per-target stream and passes
// every other command (listings, on-sync) to the wrapped executor. A stream
// that dies (its exec ended: connection lost, container restarted, loop
// killed) is dropped, and the next batch opens a new one; a target whose
// container lacks the framing tools gets an exec per batch from then on.
type Streams struct {
	base Executor
	clk  clock.Clock
	// ackTimeout bounds the probe and each heartbeat's ack; a batch's ack is
	// bounded by the caller's per-exec limit (see Bounded), which cancels its context.
	ackTimeout time.Duration

	// id makes the family of each target's streams (see family): the
	// streams of one Streams, and of no other client, fence each other.
	id [16]byte

	mu       sync.Mutex
	closed   bool // CloseAll ran: no new streams
	open     map[string]*stream
	fallback map[string]bool // target keys without the framing tools
	// streamed counts the streams opened per target key that no fence exec
	// has stopped since (see fenceBeforeExec).
	streamed map[string]int
	opening  map[string]chan struct{}
	links    links // what each target's frames measured (see Link)
}

// NewStreams returns Streams over base, which must keep execs open (see
// StreamCapable); ackTimeout bounds the probe of a new stream and each
// heartbeat's ack.
func NewStreams(base Executor, clk clock.Clock, ackTimeout time.Duration) *Streams {
	s := &Streams{base: base, clk: clk, ackTimeout: ackTimeout,
		open: map[string]*stream{}, fallback: map[string]bool{}, streamed: map[string]int{}, opening: map[string]chan struct{}{}}
	_, _ = rand.Read(s.id[:])
	return s
}

// family names the streams of target key for its loops' fence (see
// scripts/stream.sh): each new loop kills the loops of its family before it
// reads a frame, so that no frame of a stream given up on (held in flight,
// or behind a frozen tar) is applied after the batches of the stream that
// replaced it. Another client's loops, of another family, are left alone:
// two sessions into one container must not cut each other's frames.
func (s *Streams) family(key string) string {
	h := sha256.Sum256(append(s.id[:], key...))
	return hex.EncodeToString(h[:16])
}

func streamKey(t Target) string { return t.String() + "@" + t.ContainerID }

// isApply says whether argv runs applyScript (as built by ApplyArgs.Argv).
func isApply(argv []string) bool {
	return len(argv) > 4 && argv[0] == "sh" && argv[1] == "-c" && argv[2] == applyScript
}

// streamRun returns the loop's function that runs argv (as built by
// ScanArgv or DownloadArgv) in a run frame, "" for any other argv.
func streamRun(argv []string, stdin io.Reader) string {
	if len(argv) < 4 || argv[0] != "sh" || argv[1] != "-c" || stdin != nil {
		return ""
	}
	return streamRuns[argv[2]]
}

// Exec runs an apply, a scan or a download through t's stream, opening it
// first if needed, and anything else through the wrapped executor.
func (s *Streams) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fn := streamRun(argv, stdin)
	if !isApply(argv) && fn == "" {
		return s.base.Exec(ctx, t, argv, stdin, stdout, stderr)
	}
	st, err := s.get(ctx, t)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// No stream (yet): this batch goes the old way, whose errors say
		// best what is wrong with the container.
		if isApply(argv) {
			if err := s.fenceBeforeExec(ctx, t); err != nil {
				return err
			}
		}
		return s.base.Exec(ctx, t, argv, stdin, stdout, stderr)
	}
	// A compressed frame measures gzip as much as the link (on loopback,
	// mostly gzip): only plain ones measure the rate (see Link).
	var size func() int64
	plain := len(argv) <= 5 || argv[5] != "z"
	if fn != "" {
		out := &countingWriter{w: stdout}
		if plain {
			size = out.n.Load
		}
		return st.run(ctx, fn, argv[4:], out, stderr, size)
	}
	in := &countingReader{}
	if stdin != nil {
		in.r = stdin
		stdin = in
	}
	if plain {
		size = in.n.Load
	}
	return st.apply(ctx, argv[4:], stdin, stdout, stderr, size)
}

// fenceBeforeExec stops the loops of t's streams before a batch goes by an
// exec of its own, where a stream ran before and no new one could be
// opened (its fence is what a new stream's first line does, see dial): a
// loop the client gave up on may still hold a frame in flight, which it
// would apply over this batch. It runs the loop with the fence line alone
// on its stdin, so that the loop fences and ends. Where it fails the batch
// fails, and is tried again, rather than go unfenced. A loop that answers
// "N" (no temp directory or /proc now) could not stage a frame either.
func (s *Streams) fenceBeforeExec(ctx context.Context, t Target) error {
	key := streamKey(t)
	s.mu.Lock()
	n := s.streamed[key]
	s.mu.Unlock()
	if n == 0 {
		return nil
	}
	var out, errb bytes.Buffer
	err := s.base.Exec(ctx, t, []string{"sh", "-c", streamLoop, "livesync-fence"}, strings.NewReader("F"+s.family(key)+"\n"), &out, &errb)
	if err != nil {
		return fmt.Errorf("stopping the stream this batch replaces in %s: %w", t, err)
	}
	s.mu.Lock()
	if s.streamed[key] == n { // no stream opened meanwhile
		delete(s.streamed, key)
	}
	s.mu.Unlock()
	return nil
}

// get returns t's open stream, opening one if there is none.
func (s *Streams) get(ctx context.Context, t Target) (*stream, error) {
	key := streamKey(t)
	for {
		s.mu.Lock()
		if s.fallback[key] || s.closed {
			s.mu.Unlock()
			return nil, errStreamUnavailable
		}
		if st := s.open[key]; st != nil {
			select {
			case <-st.dead: // died before it was registered
				delete(s.open, key)
			default:
				s.mu.Unlock()
				return st, nil
			}
		}
		if wait, ok := s.opening[key]; ok {
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		s.opening[key] = done
		s.mu.Unlock()

		st, err := s.dial(ctx, t)
		s.mu.Lock()
		delete(s.opening, key)
		late := err == nil && s.closed // CloseAll ran while it was dialed
		switch {
		case errors.Is(err, errStreamUnavailable):
			s.fallback[key] = true
		case err == nil && !late:
			s.open[key] = st
			s.streamed[key]++
		}
		s.mu.Unlock()
		close(done)
		if late {
			st.shutdown(nil)
			return nil, errStreamUnavailable
		}
		return st, err
	}
}

// Warm opens t's stream in the background, so the first batch finds it.
func (s *Streams) Warm(ctx context.Context, t Target) {
	if s == nil {
		return
	}
	go func() { _, _ = s.get(ctx, t) }()
}

// Transport says how t's batches go: it waits for a stream being opened.
func (s *Streams) Transport(ctx context.Context, t Target) string {
	if s == nil {
		return TransportExec
	}
	if _, err := s.get(ctx, t); errors.Is(err, errStreamUnavailable) {
		return TransportExec
	}
	return TransportStream
}

// Close ends t's stream: the loop in the container sees EOF and exits.
func (s *Streams) Close(t Target) {
	if s == nil {
		return
	}
	s.mu.Lock()
	st := s.open[streamKey(t)]
	delete(s.open, streamKey(t))
	delete(s.fallback, streamKey(t))
	delete(s.streamed, streamKey(t))
	s.mu.Unlock()
	if st != nil {
		st.shutdown(nil)
	}
}

// CloseAll ends every stream and waits up to grace for their execs to end,
// so that the loops have seen EOF before the process exits.
func (s *Streams) CloseAll(grace time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true
	all := make([]*stream, 0, len(s.open))
	for k, st := range s.open {
		all = append(all, st)
		delete(s.open, k)
	}
	s.mu.Unlock()
	for _, st := range all {
		st.shutdown(nil)
	}
	timer := s.clk.NewTimer(grace)
	defer timer.Stop()
	for _, st := range all {
		select {
		case <-st.ended:
		case <-timer.C():
			return
		}
	}
}

// Len returns how many streams are open.
func (s *Streams) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// forget drops st from the open streams once it died.
func (s *Streams) forget(key string, st *stream) {
	s.mu.Lock()
	if s.open[key] == st {
		delete(s.open, key)
	}
	s.mu.Unlock()
}

// ack is one "K<seq> <status>" from the loop.
type ack struct {
	seq    uint64
	status int
}

// stream is one open exec running streamLoop.
type stream struct {
	s   *Streams
	t   Target
	key string
	in  *io.PipeWriter

	cancel context.CancelFunc
	dead   chan struct{} // closed once the stream is unusable
	ended  chan struct{} // closed once the exec returned
	errMu  sync.Mutex
	err    error

	ready    chan bool     // the probe's answer
	readDone chan struct{} // closed once readStdout returned
	acks     chan ack

	sinkMu sync.Mutex
	stdout io.Writer // the current batch's, while one runs
	stderr io.Writer
	nonce  []byte // the current run frame's "Z<NONCE>", while one runs

	batch sync.Mutex // one frame at a time, heartbeats included
	seq   uint64
	// prefix goes before the next frame: the loop's fence line, before the
	// first.
	prefix string
	last   time.Time // when the last frame was acked
}

// dial starts streamLoop in t and waits for its probe.
func (s *Streams) dial(ctx context.Context, t Target) (*stream, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	pr, pw := io.Pipe()
	st := &stream{s: s, t: t, key: streamKey(t), in: pw, cancel: cancel,
		dead: make(chan struct{}), ended: make(chan struct{}),
		ready: make(chan bool, 1), readDone: make(chan struct{}), acks: make(chan ack, 1), last: s.clk.Now()}
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	go func() {
		err := s.base.Exec(sctx, t, []string{"sh", "-c", streamLoop, "livesync-stream"}, pr, outW, errW)
		_ = outW.Close()
		_ = errW.Close()
		_ = pr.CloseWithError(io.ErrClosedPipe)
		st.shutdown(err)
		close(st.ended)
	}()
	go func() {
		st.readStdout(outR)
		close(st.readDone)
	}()
	go st.readStderr(errR)

	timer := s.clk.NewTimer(s.ackTimeout)
	defer timer.Stop()
	select {
	case ok := <-st.ready:
		if !ok {
			st.shutdown(nil)
			return nil, errStreamUnavailable
		}
	case <-st.dead:
		// A loop that answered "N" exits at once: its exec may end before
		// its answer is taken. That answer still decides.
		<-st.readDone
		select {
		case ok := <-st.ready:
			if !ok {
				return nil, errStreamUnavailable
			}
		default:
		}
		return nil, st.deadErr()
	case <-timer.C():
		st.shutdown(&timeoutError{Limit{D: s.ackTimeout}})
		return nil, st.deadErr()
	case <-ctx.Done():
		st.shutdown(ctx.Err())
		return nil, ctx.Err()
	}
	// One heartbeat at once: its round trip tells a near link from a far
	// one before the first batch (see Link).
	// The fence line goes first, with the ping: once its ack is in, the
	// loops this one replaces are gone.
	st.batch.Lock()
	st.prefix = "F" + s.family(st.key) + "\n"
	st.ping()
	st.batch.Unlock()
	select {
	case <-st.dead:
		return nil, st.deadErr()
	default:
	}
	go st.heartbeat()
	return st, nil
}

// shutdown makes st unusable and closes its stdin, which ends the loop; err
// (nil for a deliberate close) is what batches in flight see. It also
// cancels the exec, in case the remote side no longer reads.
func (st *stream) shutdown(err error) {
	st.errMu.Lock()
	select {
	case <-st.dead:
		st.errMu.Unlock()
		return
	default:
	}
	st.err = err
	close(st.dead)
	st.errMu.Unlock()
	st.s.forget(st.key, st)
	_ = st.in.Close()
	if err != nil {
		st.cancel()
		return
	}
	// A deliberate close lets the loop see EOF; the exec is cancelled once
	// it ends, or after a grace period if the connection hangs.
	go func() {
		timer := st.s.clk.NewTimer(st.s.ackTimeout)
		defer timer.Stop()
		select {
		case <-st.ended:
		case <-timer.C():
		}
		st.cancel()
	}()
}

func (st *stream) deadErr() error {
	st.errMu.Lock()
	defer st.errMu.Unlock()
	return &streamDeadError{err: st.err}
}

// readStdout splits the loop's stdout into NUL-terminated tokens: the probe's
// answer, the batch's "R./dir" reports (handed to the batch's stdout as
// applyScript wrote them), a run frame's output (from "Z" on, see readRun),
// its stderr ("e…", handed to the batch's stderr) and acks. Its end is the
// stream's end.
func (st *stream) readStdout(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	first := true
	for {
		tok, err := br.ReadBytes(0)
		run := err == nil && !first && len(tok) == 2 && tok[0] == 'Z'
		if run {
			err = st.readRun(br)
		}
		if err != nil {
			// The loop is gone. Close its stdin (an executor may wait for
			// that before it returns) and let the exec's own error win.
			_ = st.in.Close()
			<-st.ended
			st.shutdown(err)
			return
		}
		tok = tok[:len(tok)-1]
		switch {
		case run: // handed on whole by readRun
		case first:
			first = false
			st.ready <- bytes.Equal(tok, []byte("Y"))
		case len(tok) > 0 && tok[0] == 'e':
			st.sinkMu.Lock()
			if st.stderr != nil {
				_, _ = st.stderr.Write(tok[1:])
			}
			st.sinkMu.Unlock()
		case len(tok) > 0 && tok[0] == 'K':
			a, ok := parseAck(tok[1:])
			if !ok {
				st.shutdown(fmt.Errorf("malformed ack %q", tok))
				continue
			}
			select {
			case st.acks <- a:
			case <-st.dead:
			}
		default:
			st.sinkMu.Lock()
			if st.stdout != nil {
				_, _ = st.stdout.Write(append(tok, 0))
			}
			st.sinkMu.Unlock()
		}
	}
}

// readRun hands a run frame's output to the batch's stdout as the script
// wrote it: every byte up to the token "Z<NONCE>" of the frame in flight,
// but the NUL the loop writes before that token. The output is written in
// pieces of up to 32 KiB, and never to a batch that has gone (see
// sinkWriter). Only the end of the stream ends it otherwise: an output cut
// short is what the batch gets, up to the loop's NUL, and its parser
// refuses it.
func (st *stream) readRun(br *bufio.Reader) error {
	st.sinkMu.Lock()
	nonce := st.nonce
	st.sinkMu.Unlock()
	if nonce == nil {
		return errors.New("run output without a run frame")
	}
	w := bufio.NewWriterSize(sinkWriter{st}, 32<<10)
	// held: the last byte read is a NUL not yet written, so the last token
	// read was whole, and the loop's NUL may be that byte.
	held := false
	for {
		sl, err := br.ReadSlice(0)
		if errors.Is(err, bufio.ErrBufferFull) {
			if held {
				_ = w.WriteByte(0)
			}
			_, _ = w.Write(sl)
			held = false
			continue
		}
		if err != nil {
			return err
		}
		if held && bytes.Equal(sl[:len(sl)-1], nonce) {
			return w.Flush() // the held NUL was the loop's
		}
		if held {
			_ = w.WriteByte(0)
		}
		_, _ = w.Write(sl[:len(sl)-1])
		held = true
	}
}

// sinkWriter writes to the stdout of st's batch, if one is running.
type sinkWriter struct{ st *stream }

func (s sinkWriter) Write(p []byte) (int, error) {
	s.st.sinkMu.Lock()
	defer s.st.sinkMu.Unlock()
	if s.st.stdout != nil {
		_, _ = s.st.stdout.Write(p)
	}
	return len(p), nil
}

// readStderr hands what the loop itself writes on stderr (a batch's stderr
// comes on stdout, with its ack) to the current batch, if any.
func (st *stream) readStderr(r io.Reader) {
	buf := make([]byte, 16<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			st.sinkMu.Lock()
			if st.stderr != nil {
				_, _ = st.stderr.Write(buf[:n])
			}
			st.sinkMu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func parseAck(b []byte) (ack, bool) {
	seq, status, ok := bytes.Cut(b, []byte(" "))
	if !ok {
		return ack{}, false
	}
	n, err1 := strconv.ParseUint(string(seq), 10, 64)
	c, err2 := strconv.Atoi(string(status))
	return ack{seq: n, status: c}, err1 == nil && err2 == nil
}

// apply sends one batch (applyScript's arguments after $0, and the tar on
// stdin, if any) and waits for its ack (see frame); size counts what it sent.
func (st *stream) apply(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, size func() int64) error {
	words := shellWords(args)
	return st.frame(ctx, stdout, stderr, nil, size, func(w *bufio.Writer, seq uint64) error {
		if stdin == nil {
			_, err := fmt.Fprintf(w, "%d/0 %s\n", seq, words)
			return err
		}
		// The archive is read ahead while chunks go out, so that
		// building it (open, read, hash each file) runs beside the
		// extraction instead of taking turns with it.
		ra := newReadAhead(stdin)
		defer ra.close()
		parts := parted(args)
		chunk, end, err := ra.nextPart(parts)
		if errors.Is(err, io.EOF) && len(chunk) <= oneFrame {
			// All of it in one chunk: one frame of one length, and
			// one write, so a small batch is one message on every hop
			// to the container.
			fmt.Fprintf(w, "%d/%d %s\n", seq, len(chunk), words)
			_, werr := w.Write(chunk)
			return werr
		}
		if parts {
			// A parted frame: a chunk that ends a part says so ("LEN."),
			// and the loop extracts the part while the next one comes.
			fmt.Fprintf(w, "%d~ %s\n", seq, words)
		} else {
			fmt.Fprintf(w, "%d %s\n", seq, words)
		}
		for {
			if len(chunk) > 0 {
				dot := ""
				if end {
					dot = "."
				}
				fmt.Fprintf(w, "%d%s\n", len(chunk), dot)
				if _, werr := w.Write(chunk); werr != nil {
					return werr
				}
				// Each chunk goes at once: the tar extracts it while
				// the next one is read.
				if werr := w.Flush(); werr != nil {
					return werr
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				st.shutdown(fmt.Errorf("reading the archive: %w", err))
				return err
			}
			chunk, end, err = ra.nextPart(parts)
		}
		_, err = io.WriteString(w, "0\n")
		return err
	})
}

// run runs the loop's function fn (see streamRuns) with args in a run frame
// and waits for its ack; its output goes to stdout as the script wrote it
// (see readRun), and a non-zero status is an ExitError, as for apply; size
// counts what it received.
func (st *stream) run(ctx context.Context, fn string, args []string, stdout, stderr io.Writer, size func() int64) error {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("making a frame's nonce: %w", err)
	}
	nonce := hex.EncodeToString(b[:])
	words := shellWords(append([]string{fn}, args...))
	return st.frame(ctx, stdout, stderr, []byte("Z"+nonce), size, func(w *bufio.Writer, seq uint64) error {
		_, err := fmt.Fprintf(w, "%d=%s %s\n", seq, nonce, words)
		return err
	})
}

// frame sends one frame, which write writes with its sequence number, with
// the batch's sinks (and a run frame's nonce) in place, and waits for its
// ack. A non-zero status is returned as an ExitError, as an exec would.
// Anything else that goes wrong (ctx done, the stream dying, a local read
// failing mid-frame) leaves the stream out of step, so it is shut down; the
// next batch opens a new one. A frame that was acked is measured: size
// (nil: nothing) says how many bytes it carried (see Link).
func (st *stream) frame(ctx context.Context, stdout, stderr io.Writer, nonce []byte, size func() int64, write func(w *bufio.Writer, seq uint64) error) error {
	st.batch.Lock()
	defer st.batch.Unlock()
	start := st.s.clk.Now()
	select {
	case <-st.dead:
		return st.deadErr()
	default:
	}
	st.sinkMu.Lock()
	st.stdout, st.stderr, st.nonce = stdout, stderr, nonce
	st.sinkMu.Unlock()
	defer func() {
		st.sinkMu.Lock()
		st.stdout, st.stderr, st.nonce = nil, nil, nil
		st.sinkMu.Unlock()
	}()
	stop := context.AfterFunc(ctx, func() { st.shutdown(context.Cause(ctx)) })
	defer stop()

	st.seq++
	seq := st.seq
	sent := make(chan error, 1)
	// The frame is written on its own goroutine: reading stdin may block
	// (the archive of a file that stalls), and a dead stream or a done ctx
	// must still end the batch at once, as an exec's would.
	go func() { sent <- st.send(func(w *bufio.Writer) error { return write(w, seq) }) }()
	select {
	case err := <-sent:
		if err != nil {
			st.shutdown(err)
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return st.deadErr()
		}
	case <-st.dead:
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return st.deadErr()
	}
	status, err := st.waitAck(ctx, seq)
	if err != nil {
		return err
	}
	st.last = st.s.clk.Now()
	if size != nil {
		st.s.links.observe(st.key, size(), st.last.Sub(start))
	}
	if status != 0 {
		return ackStatus(status)
	}
	return nil
}

// ackStatus is a batch's non-zero status as the loop acked it: an ExitError, as the exit of
// an exec per batch would be, so errors.go explains both alike.
type ackStatus int

func (a ackStatus) Error() string   { return fmt.Sprintf("command terminated with exit code %d", int(a)) }
func (a ackStatus) ExitStatus() int { return int(a) }

// frameWriters are send's buffers: a frame of up to 64 KiB goes out in one
// write, so it is one message on every hop. Pooled, not made per frame: in a
// fan-out every replica's worker sends every batch, and allocating and
// clearing 64 KiB each time was, with the read-ahead's buffer (readBufs), a
// fifth of the client's CPU with 10 replicas.
var frameWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}

// send writes one frame to the loop's stdin.
func (st *stream) send(frame func(w *bufio.Writer) error) error {
	w := frameWriters.Get().(*bufio.Writer)
	w.Reset(st.in)
	defer func() {
		w.Reset(nil) // what a failed frame left buffered is dropped
		frameWriters.Put(w)
	}()
	_, _ = w.WriteString(st.prefix)
	st.prefix = ""
	if err := frame(w); err != nil {
		return err
	}
	return w.Flush()
}

// waitAck waits for seq's ack.
func (st *stream) waitAck(ctx context.Context, seq uint64) (int, error) {
	select {
	case a := <-st.acks:
		if a.seq != seq {
			st.shutdown(fmt.Errorf("ack for frame %d, want %d", a.seq, seq))
			return 0, st.deadErr()
		}
		return a.status, nil
	case <-st.dead:
		if ctx.Err() != nil {
			return 0, context.Cause(ctx)
		}
		return 0, st.deadErr()
	}
}

// heartbeat sends an empty frame after heartbeatEvery without one, and shuts
// the stream down when its ack does not come within ackTimeout: a stream
// whose connection went away silently is replaced before a batch needs it.
func (st *stream) heartbeat() {
	for {
		timer := st.s.clk.NewTimer(heartbeatEvery)
		select {
		case <-st.dead:
			timer.Stop()
			return
		case <-timer.C():
		}
		if !st.batch.TryLock() {
			continue // a batch is its own heartbeat
		}
		if st.s.clk.Since(st.last) < heartbeatEvery {
			st.batch.Unlock()
			continue
		}
		st.ping()
		st.batch.Unlock()
	}
}

// ping sends one heartbeat frame and waits for its ack; st.batch is held.
func (st *stream) ping() {
	st.seq++
	seq := st.seq
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	timer := st.s.clk.NewTimer(st.s.ackTimeout)
	defer timer.Stop()
	go func() {
		select {
		case <-timer.C():
			st.shutdown(&timeoutError{Limit{D: st.s.ackTimeout}})
		case <-ctx.Done():
		}
	}()
	start := st.s.clk.Now()
	// A write that blocks ends when the ack timer shuts the stream down.
	if err := st.send(func(w *bufio.Writer) error {
		_, err := fmt.Fprintf(w, "%d\n", seq)
		return err
	}); err != nil {
		st.shutdown(err)
		return
	}
	if _, err := st.waitAck(ctx, seq); err == nil {
		st.last = st.s.clk.Now()
		st.s.links.observe(st.key, 0, st.last.Sub(start))
	}
}

// StreamCloseGrace is how long a caller waits, when it stops, for the
// loops to see EOF and their execs to end.
const StreamCloseGrace = 2 * time.Second

// Intended is the transport batches will try first.
func (s *Streams) Intended() string {
	if s == nil {
		return TransportExec
	}
	return TransportStream
}

// readAhead reads r on a goroutine of its own into a buffer of up to two
// chunks, and hands out what it holds. Reading the archive and sending it
// then overlap: with a plain read-then-send loop the tar in the container
// waits while a chunk is built, and the archive writer waits while a chunk is
// sent, so a burst of small files paid for both one after the other.
//
// The buffer is a ring, grown to what it held at most (a small batch's
// archive allocates its size), and each chunk is copied out into one
// buffer kept for the next: appended to a slice cut from the front, the
// buffer was moved and grown over and over, a quarter of the client's CPU in
// an initial sync of 100 MB.
type readAhead struct {
	mu     sync.Mutex
	cond   *sync.Cond
	ring   []byte
	head   int   // ring's first byte held
	size   int   // bytes held from head on, wrapping around
	err    error // the read error that ended the reading (io.EOF at the end)
	closed bool  // the consumer is gone: stop reading
	chunk  []byte
	// off is the archive's offset of the first byte held; ends, ascending,
	// are the ends of parts (see Parted) past it, as offsets.
	off  int64
	ends []int64
}

func newReadAhead(r io.Reader) *readAhead {
	ra := &readAhead{}
	ra.cond = sync.NewCond(&ra.mu)
	go ra.fill(r)
	return ra
}

// readBufs are fill's read buffers (see frameWriters).
var readBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// put appends p to the ring, growing it if it is full.
func (ra *readAhead) put(p []byte) {
	if ra.size+len(p) > len(ra.ring) {
		grown := make([]byte, max(ra.size+len(p), min(2*len(ra.ring), 2*chunkSize+blockSize)))
		ra.read(grown[:ra.size])
		ra.ring, ra.head = grown, 0
	}
	tail := (ra.head + ra.size) % max(len(ra.ring), 1)
	n := copy(ra.ring[tail:], p)
	copy(ra.ring, p[n:])
	ra.size += len(p)
}

// read copies the first len(p) bytes held into p, keeping them.
func (ra *readAhead) read(p []byte) {
	n := copy(p, ra.ring[ra.head:min(ra.head+len(p), len(ra.ring))])
	copy(p[n:], ra.ring)
}

func (ra *readAhead) fill(r io.Reader) {
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	tmp := *bp
	pr, _ := r.(Parted)
	for {
		n, err := r.Read(tmp)
		ra.mu.Lock()
		ra.put(tmp[:n])
		if pr != nil {
			if e := pr.PartEnd(); e > ra.off && (len(ra.ends) == 0 || e > ra.ends[len(ra.ends)-1]) {
				ra.ends = append(ra.ends, e)
			}
		}
		if err != nil {
			ra.err = err
		}
		ra.cond.Broadcast()
		for ra.size >= 2*chunkSize && !ra.closed {
			ra.cond.Wait()
		}
		stop := ra.closed || ra.err != nil
		ra.mu.Unlock()
		if stop {
			return
		}
	}
}

// nextPart returns the next chunk: what is buffered, up to chunkSize, once
// that is at least minChunk or the reading ended, in whole blocks
// (blockSize) unless it is the last; and the error that ended it (io.EOF
// for the end) once nothing is left before it. With parts, it ends a chunk
// at the last end of a part it would hold, and says whether it did (end).
// The chunk is good until the next call.
func (ra *readAhead) nextPart(parts bool) (chunk []byte, end bool, err error) {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	for ra.size < minChunk && ra.err == nil {
		ra.cond.Wait()
	}
	n := min(ra.size, chunkSize)
	if n < ra.size || ra.err == nil {
		n -= n % blockSize // more follows: whole blocks
	}
	for i := len(ra.ends) - 1; parts && i >= 0; i-- {
		if e := ra.ends[i] - ra.off; e > 0 && e <= int64(n) {
			n, end = int(e), true
			break
		}
	}
	ra.off += int64(n)
	for len(ra.ends) > 0 && ra.ends[0] <= ra.off {
		ra.ends = ra.ends[1:]
	}
	if cap(ra.chunk) < n {
		ra.chunk = make([]byte, n)
	}
	chunk = ra.chunk[:n]
	ra.read(chunk)
	if n > 0 {
		ra.head = (ra.head + n) % len(ra.ring)
	}
	ra.size -= n
	ra.cond.Broadcast()
	if ra.size > 0 || ra.err == nil {
		return chunk, end, nil
	}
	return chunk, end, ra.err
}

// Close stops the reading once its current read returns.
func (ra *readAhead) close() {
	ra.mu.Lock()
	ra.closed = true
	ra.cond.Broadcast()
	ra.mu.Unlock()
}
