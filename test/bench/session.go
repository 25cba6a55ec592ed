//go:build bench

package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// phase is the sessiontest.TB of one benchmark phase, the way *testing.T is a test's: Fatalf
// ends the phase with that error, Errorf fails it at its end, Cleanup runs when it ends.
type phase struct {
	errs     []error
	cleanups []func()
}

// phaseFatal is the panic of phase.Fatalf, recovered by runPhase.
type phaseFatal struct{ err error }

func (p *phase) Helper()                           {}
func (p *phase) Fatalf(format string, args ...any) { panic(phaseFatal{fmt.Errorf(format, args...)}) }
func (p *phase) Errorf(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}
func (p *phase) Cleanup(fn func()) { p.cleanups = append(p.cleanups, fn) }

// runPhase runs fn as one phase: the sessions it starts report to the phase and are killed
// when it ends, if fn did not stop them.
func (b *bench) runPhase(ctx context.Context, fn func(context.Context) error) (err error) {
	p := &phase{}
	b.t = p
	defer func() {
		for i := len(p.cleanups) - 1; i >= 0; i-- {
			p.cleanups[i]()
		}
		if r := recover(); r != nil {
			f, ok := r.(phaseFatal)
			if !ok {
				panic(r)
			}
			err = f.err
		}
		err = errors.Join(append([]error{err}, p.errs...)...)
	}()
	return fn(ctx)
}

// newSession is a session of the binary under test in the benchmark's namespace, as a user
// runs it; the caller adds the workload, the mapping and flags, and starts it.
func (b *bench) newSession() *sessiontest.Session {
	return sessiontest.NewSession(b.t, b.c.binary).Kubeconfig(b.c.kubeconfig).Namespace(b.c.ns)
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
