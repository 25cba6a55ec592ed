// Package sessiontest runs the built kubectl-livesync binary as a user runs it, with -o json, and
// reads its NDJSON events: the one harness of the e2e suite (test/e2e) and of the benchmarks
// (test/bench), in the style of krew's integration-test ITest.
//
//	s := sessiontest.NewSession(t, binary).Kubeconfig(kc).Namespace(ns).
//		Args("deploy/web").Map(local, "/app").Start().WaitSynced()
//	s.Edit("index.html", "v2").WaitFor("batch")
//	sum := s.Stop() // Ctrl-C; a clean exit and well-formed events, or t.Errorf
//
// Methods that take no error return report through the TB: Fatalf when the test can't go on,
// Errorf when it can. Next and Settle return errors instead, for callers (the benchmarks) that
// pass them up. A Session is used by one goroutine, the one of its TB.
package sessiontest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// TB is the part of testing.TB a Session needs. *testing.T is one; the benchmark program
// passes its own, whose Fatalf ends the phase that runs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Cleanup(func())
}

// DefaultTimeout bounds WaitFor, WaitMatch and WaitSynced until Timeout sets another bound.
const DefaultTimeout = 2 * time.Minute

// stopTimeout is how long Stop and Kill wait for the process to exit.
const stopTimeout = 30 * time.Second

// Session is one run of `kubectl-livesync … -o json`: built with the fluent setters, then
// started; the events it prints are kept in order.
type Session struct {
	t       TB
	binary  string
	global  []string // --kubeconfig, -n
	args    []string
	maps    []string // LOCAL:REMOTE
	locals  []string
	dir     string // working directory; "" is the test's
	timeout time.Duration
	cred    *syscall.Credential // nil: this process's user
	env     []string            // added to this process's environment
	via     []string            // a program the binary runs under (wine), before it on the command line
	state   string              // XDG_STATE_HOME; "": a fresh directory of the session's own

	cmd     *exec.Cmd
	stderr  LockedBuffer
	exited  chan struct{} // closed once the process exited and every line was read
	exitErr error
	stopped bool

	mu      sync.Mutex
	events  []Event
	changed chan struct{} // closed and replaced on every new event
	cursor  int           // the first event Next, Settle and Drain have not consumed
}

// NewSession returns a session of binary that reports to t; nothing runs before Start.
func NewSession(t TB, binary string) *Session {
	return &Session{t: t, binary: binary, timeout: DefaultTimeout, changed: make(chan struct{})}
}

// Kubeconfig runs the session with --kubeconfig path.
func (s *Session) Kubeconfig(path string) *Session {
	s.global = append(s.global, "--kubeconfig", path)
	return s
}

// Namespace runs the session with -n ns.
func (s *Session) Namespace(ns string) *Session {
	s.global = append(s.global, "-n", ns)
	return s
}

// Map syncs the local directory into remote, the LOCAL:REMOTE argument; Edit writes under the
// first one mapped.
func (s *Session) Map(local, remote string) *Session {
	s.maps = append(s.maps, local+":"+remote)
	s.locals = append(s.locals, local)
	return s
}

// Args adds arguments: the workload (deploy/web, or -l SELECTOR) and flags. They come before
// the mappings on the command line.
func (s *Session) Args(args ...string) *Session {
	s.args = append(s.args, args...)
	return s
}

// Dir runs the session in dir (a livesync.yaml there or above is what it runs without a
// workload).
func (s *Session) Dir(dir string) *Session {
	s.dir = dir
	return s
}

// User runs the session as uid:gid with HOME set to home (which that user must own): a user
// who is not root, for whom a root-owned 0600 file cannot be read. The binary and the
// kubeconfig must be readable by that user.
func (s *Session) User(uid, gid uint32, home string) *Session {
	s.cred = &syscall.Credential{Uid: uid, Gid: gid}
	s.env = append(s.env, "HOME="+home)
	return s
}

// Env adds name=value pairs to the binary's environment.
func (s *Session) Env(kv ...string) *Session {
	s.env = append(s.env, kv...)
	return s
}

// Via runs the binary under a program, argv before the binary on the command line: the Windows
// binary under wine is Via("hack/wine.sh", "exec"). Paths given to the session are then the
// program's to translate (Z:\... under wine).
func (s *Session) Via(argv ...string) *Session {
	s.via = argv
	return s
}

// StateDir runs the session with XDG_STATE_HOME=dir, where it keeps the ancestor it saves for
// the next session of the same sync (see docs/state.md). Without it every session gets an empty
// directory of its own, so it starts as a first session does: pass the same dir to sessions
// that should start from what an earlier one saved.
func (s *Session) StateDir(dir string) *Session {
	s.state = dir
	return s
}

// Timeout sets the bound of WaitFor, WaitMatch and WaitSynced (DefaultTimeout until set).
func (s *Session) Timeout(d time.Duration) *Session {
	s.timeout = d
	return s
}

// Start starts the binary; the TB's Cleanup kills it if the test did not Stop it.
func (s *Session) Start() *Session {
	s.t.Helper()
	argv := append(append(append(append([]string(nil), s.global...), "-o", "json"), s.args...), s.maps...)
	if len(s.via) > 0 {
		s.cmd = exec.Command(s.via[0], append(append(append([]string(nil), s.via[1:]...), s.binary), argv...)...)
	} else {
		s.cmd = exec.Command(s.binary, argv...)
	}
	s.cmd.Dir = s.dir
	s.cmd.Stderr = &s.stderr
	if s.cred != nil {
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	state := s.state
	if state == "" {
		dir, err := os.MkdirTemp("", "livesync-state-")
		if err != nil {
			s.t.Fatalf("making a state directory: %v", err)
		}
		if s.cred != nil {
			_ = os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid))
		}
		s.t.Cleanup(func() { _ = os.RemoveAll(dir) })
		state = dir
	}
	s.cmd.Env = append(os.Environ(), append(s.env, "XDG_STATE_HOME="+state)...)
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		s.t.Fatalf("starting %s: %v", s.binary, err)
	}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting %s: %v", s.binary, err)
	}
	s.exited = make(chan struct{})
	go s.read(out)
	s.t.Cleanup(func() { s.kill() })
	return s
}

func (s *Session) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		ev := decode(sc.Bytes())
		s.mu.Lock()
		s.events = append(s.events, ev)
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}
	s.exitErr = s.cmd.Wait()
	// LIVESYNC_SESSION_LOG=DIR keeps each session's events and stderr in DIR once it ends, for a
	// long run whose failure prints only the last events (TestModel).
	if dir := os.Getenv("LIVESYNC_SESSION_LOG"); dir != "" {
		f, err := os.CreateTemp(dir, "session-*.log")
		if err == nil {
			_, _ = io.WriteString(f, s.Dump())
			_ = f.Close()
		}
	}
	close(s.exited)
}

// Pid is the process id of the running binary: the process that holds the watches.
func (s *Session) Pid() int { return s.cmd.Process.Pid }

// Stderr is what the binary printed on stderr so far.
func (s *Session) Stderr() string { return s.stderr.String() }

// Events returns every event printed so far, in order.
func (s *Session) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

// Count returns how many events of a type were printed so far.
func (s *Session) Count(typ string) int {
	n := 0
	for _, ev := range s.Events() {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// Dump is every event as printed, then stderr, for a failure message.
func (s *Session) Dump() string {
	var b strings.Builder
	for _, ev := range s.Events() {
		b.WriteString(ev.Line)
		b.WriteByte('\n')
	}
	return b.String() + "stderr:\n" + s.Stderr()
}

// stuck is Dump for a wait that timed out: a session still running is sent SIGQUIT first, so
// that its stderr ends with every goroutine's stack (the Go runtime's dump) and the failure
// shows where it waits. The session is over after it.
func (s *Session) stuck() string {
	if !s.ended() {
		s.stopped = true
		_ = s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.exited:
		case <-time.After(stopTimeout):
			s.kill()
		}
	}
	return s.Dump()
}

// tail is the end of stderr, for an error.
func (s *Session) tail() string {
	b := s.Stderr()
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(b)
}

// await calls check with the events printed so far (check must not keep the slice) until it
// returns true, the process exits (one last check) or timeout passes. It returns false unless
// check did.
func (s *Session) await(timeout time.Duration, check func([]Event) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok, changed := check(s.events), s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-s.exited:
			s.mu.Lock()
			defer s.mu.Unlock()
			return check(s.events)
		case <-deadline.C:
			return false
		}
	}
}

// Next consumes events up to the next one of type typ and returns it. An event with an error
// on the way, the session's end or timeout fail it.
func (s *Session) Next(typ string, timeout time.Duration) (Event, error) {
	var found Event
	var err error
	ok := s.await(timeout, func(evs []Event) bool {
		for ; s.cursor < len(evs); s.cursor++ {
			ev := evs[s.cursor]
			switch {
			case ev.Error != "":
				s.cursor++
				found, err = ev, fmt.Errorf("session reported %s: %s", ev.Type, ev.Error)
				return true
			case ev.Type == typ:
				s.cursor++
				found = ev
				return true
			}
		}
		return false
	})
	switch {
	case ok:
		return found, err
	case s.ended():
		return Event{}, fmt.Errorf("session ended before a %s event: %s", typ, s.tail())
	}
	return Event{}, fmt.Errorf("no %s event within %s: %s", typ, timeout, s.tail())
}

// Settle consumes events until quiet passes without one and returns how many were batches.
func (s *Session) Settle(quiet time.Duration) (int, error) {
	batches := 0
	for {
		seen := s.cursor
		if !s.await(quiet, func(evs []Event) bool { return len(evs) > seen }) {
			if s.ended() {
				return batches, fmt.Errorf("session ended: %s", s.tail())
			}
			return batches, nil
		}
		evs := s.Events()
		for _, ev := range evs[seen:] {
			if ev.Type == "batch" {
				batches++
			}
		}
		s.cursor = len(evs)
	}
}

// Drain consumes the events printed so far.
func (s *Session) Drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cursor = len(s.events)
}

// WaitFor is Next that fails the test.
func (s *Session) WaitFor(typ string) Event {
	s.t.Helper()
	ev, err := s.Next(typ, s.timeout)
	if err != nil {
		s.t.Fatalf("%v\nsession:\n%s", err, s.stuck())
	}
	return ev
}

// WaitMatch waits until an event printed since the start matches and returns the first that
// does; what names it in the failure.
func (s *Session) WaitMatch(what string, match func(Event) bool) Event {
	s.t.Helper()
	var found Event
	ok := s.await(s.timeout, func(evs []Event) bool {
		for _, ev := range evs {
			if match(ev) {
				found = ev
				return true
			}
		}
		return false
	})
	if !ok {
		s.t.Fatalf("no %s within %s:\n%s", what, s.timeout, s.stuck())
	}
	return found
}

// WaitCount waits until the session printed n events of type typ.
func (s *Session) WaitCount(typ string, n int) *Session {
	s.t.Helper()
	ok := s.await(s.timeout, func(evs []Event) bool {
		c := 0
		for _, ev := range evs {
			if ev.Type == typ {
				c++
			}
		}
		return c >= n
	})
	if !ok {
		s.t.Fatalf("%d %s events within %s, want %d:\n%s", s.Count(typ), typ, s.timeout, n, s.stuck())
	}
	return s
}

// WaitSynced waits until every container the session added had its initial sync, and at least
// one did. A failed initial sync fails the test.
func (s *Session) WaitSynced() *Session {
	s.t.Helper()
	var failed *Event
	ok := s.await(s.timeout, func(evs []Event) bool {
		pending := map[string]bool{}
		synced := 0
		for _, ev := range evs {
			switch ev.Type {
			case "target-added", "target-removed":
				pending[ev.Target.key()] = ev.Type == "target-added"
			case "initial-sync":
				if ev.Error != "" {
					failed = &ev
					return true
				}
				pending[ev.Target.key()] = false
				synced++
			}
		}
		for _, p := range pending {
			if p {
				return false
			}
		}
		return synced > 0
	})
	switch {
	case failed != nil:
		s.t.Fatalf("initial sync failed: %s\nsession:\n%s", failed.Error, s.Dump())
	case !ok:
		s.t.Fatalf("no complete initial sync within %s:\n%s", s.timeout, s.stuck())
	}
	return s
}

// Edit writes content to rel (slash-separated) under the first mapped local directory, as an
// editor saves, making its parents.
func (s *Session) Edit(rel, content string) *Session {
	s.t.Helper()
	if len(s.locals) == 0 {
		s.t.Fatalf("Edit %q: the session maps no local directory", rel)
	}
	p := filepath.Join(s.locals[0], filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatalf("editing %q: %v", rel, err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		s.t.Fatalf("editing %q: %v", rel, err)
	}
	return s
}

func (s *Session) ended() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// Stop interrupts the session like Ctrl-C and returns what it did. A session that does not
// exit 0 within 30 s, or printed a line that breaks the NDJSON contract (not JSON; no type; no
// RFC 3339 UTC time), fails the test with Errorf. Stopping twice is stopping once.
func (s *Session) Stop() Summary {
	s.t.Helper()
	if !s.stopped {
		s.stopped = true
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
			if s.exitErr != nil {
				s.t.Errorf("session exit after Ctrl-C: %v\nstderr:\n%s", s.exitErr, s.Stderr())
			}
		case <-time.After(stopTimeout):
			s.t.Errorf("session did not stop within %s of Ctrl-C", stopTimeout)
			s.kill()
		}
		for _, ev := range s.Events() {
			if err := ev.check(); err != nil {
				s.t.Errorf("-o json: %v", err)
			}
		}
	}
	return Summarize(s.Events())
}

// Kill ends the session with SIGKILL, as a crash would, and waits for it to exit.
func (s *Session) Kill() {
	s.t.Helper()
	if !s.kill() {
		s.t.Fatalf("the session did not exit within %s of SIGKILL", stopTimeout)
	}
}

// kill is Kill for Cleanup: it reports whether the process exited.
func (s *Session) kill() bool {
	s.stopped = true
	if !s.ended() {
		_ = s.cmd.Process.Kill()
	}
	select {
	case <-s.exited:
		return true
	case <-time.After(stopTimeout):
		return false
	}
}

// LockedBuffer is a bytes.Buffer a process may write while the test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
