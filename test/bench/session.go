//go:build bench

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
)

// event is one NDJSON line of `kubectl-livesync -o json` (the fields the benchmark reads).
type event struct {
	Type       string    `json:"type"`
	Time       time.Time `json:"time"`
	Files      int       `json:"files"`
	Changed    int       `json:"changed"`
	Targets    int       `json:"targets"`
	Failed     int       `json:"failed"`
	Bytes      int64     `json:"bytes"`
	LatencyMs  float64   `json:"latencyMs"`
	DurationMs float64   `json:"durationMs"`
	Error      string    `json:"error"`
	Target     *struct {
		Pod         string `json:"pod"`
		ContainerID string `json:"containerID"`
	} `json:"target"`
}

// session is a running `kubectl-livesync … -o json`, the product as a user runs it.
type session struct {
	cmd    *exec.Cmd
	events chan event
	done   chan struct{} // closed once the process exited
	mu     sync.Mutex
	stderr bytes.Buffer
	once   sync.Once
}

func (c *cluster) startSession(args ...string) (*session, error) {
	s := &session{events: make(chan event, 4096), done: make(chan struct{})}
	s.cmd = exec.Command(c.binary, append([]string{"--kubeconfig", c.kubeconfig, "-n", c.ns, "-o", "json"}, args...)...)
	s.cmd.Stderr = lockedWriter{&s.mu, &s.stderr}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", c.binary, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				s.events <- ev
			}
		}
		close(s.events)
		_ = s.cmd.Wait() // its exit status says nothing the events did not
		close(s.done)
	}()
	return s, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// next returns the next event of type typ; an error event or the session's end fails it.
func (s *session) next(typ string, timeout time.Duration) (event, error) {
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-s.events:
			switch {
			case !ok:
				return event{}, fmt.Errorf("session ended: %s", s.tail())
			case ev.Error != "":
				return ev, fmt.Errorf("session reported %s: %s", ev.Type, ev.Error)
			case ev.Type == typ:
				return ev, nil
			}
		case <-deadline:
			return event{}, fmt.Errorf("no %s event within %s: %s", typ, timeout, s.tail())
		}
	}
}

// settle reads events until two seconds pass without one and returns how many were batches.
func (s *session) settle() (int, error) {
	batches := 0
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return batches, fmt.Errorf("session ended: %s", s.tail())
			}
			if ev.Type == "batch" {
				batches++
			}
		case <-time.After(2 * time.Second):
			return batches, nil
		}
	}
}

// drain discards the events already printed.
func (s *session) drain() {
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

func (s *session) tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.stderr.String()
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(b)
}

func (s *session) pid() int { return s.cmd.Process.Pid }

// stop interrupts the session like Ctrl-C.
func (s *session) stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		go func() {
			for range s.events { // unblock the reader
			}
		}()
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
			_ = s.cmd.Process.Kill()
		}
	})
}

// expect is a file the probe waits for, by its remote path and content.
type expect struct {
	path string
	data []byte
}

// probe drives /tmp/lsprobe in one container over one long-lived exec.
type probe struct {
	in    io.WriteCloser
	lines chan string
	errc  chan error
}

func (c *cluster) startProbe(ctx context.Context, t filesync.Target) *probe {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &probe{in: inW, lines: make(chan string, 16), errc: make(chan error, 1)}
	go func() {
		err := c.exec.Exec(ctx, t, []string{"/tmp/lsprobe"}, inR, outW, io.Discard)
		outW.CloseWithError(errors.Join(err, io.EOF))
		p.errc <- err
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	return p
}

func (p *probe) close() { _ = p.in.Close() }

func (p *probe) line(timeout time.Duration) (string, error) {
	select {
	case l, ok := <-p.lines:
		if !ok {
			return "", fmt.Errorf("probe ended: %w", <-p.errc)
		}
		if strings.HasPrefix(l, "E ") {
			return "", fmt.Errorf("probe: %s", l[2:])
		}
		return l, nil
	case <-time.After(timeout):
		return "", fmt.Errorf("probe said nothing within %s", timeout)
	}
}

// arm tells the probe what to wait for and returns once it watches.
func (p *probe) arm(files []expect) error {
	var b strings.Builder
	fmt.Fprintf(&b, "W %d\n", len(files))
	for _, f := range files {
		sum := sha256.Sum256(f.data)
		fmt.Fprintf(&b, "%d %s %s\n", len(f.data), hex.EncodeToString(sum[:]), f.path)
	}
	if _, err := io.WriteString(p.in, b.String()); err != nil {
		return err
	}
	l, err := p.line(30 * time.Second)
	if err == nil && l != "A" {
		err = fmt.Errorf("probe answered %q to a request", l)
	}
	return err
}

// arrival waits for the armed files and returns when the last one was in place.
func (p *probe) arrival(timeout time.Duration) (time.Time, error) {
	l, err := p.line(timeout)
	if err != nil {
		return time.Time{}, err
	}
	ns, err := strconv.ParseInt(strings.TrimPrefix(l, "T "), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("probe answered %q", l)
	}
	return time.Unix(0, ns), nil
}
