package remote

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseProcStatus(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     ProcStatus
		err      bool
	}{
		{"gunicorn", "Name:\tgunicorn\nPid:\t1\nSigIgn:\t0000000000001000\nSigCgt:\t0000000180004a07\n",
			ProcStatus{Name: "gunicorn", PID: 1, Caught: 0x180004a07, Ignored: 0x1000}, false},
		{"sh without traps", "Name:\tsh\nSigCgt:\t0000000000000000\n", ProcStatus{Name: "sh"}, false},
		{"no SigCgt", "Name:\tsh\n", ProcStatus{}, true},
		{"bad hex", "SigCgt:\tzz\n", ProcStatus{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProcStatus(tc.in)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("ParseProcStatus = %+v, %v; want %+v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
	p := ProcStatus{Caught: 1<<0 | 1<<14} // HUP (1) and TERM (15): bit N-1
	for sig, want := range map[int]bool{1: true, 15: true, 10: false, 12: false, 0: false, 65: false} {
		if p.Catches(sig) != want {
			t.Errorf("Catches(%d) = %v, want %v", sig, !want, want)
		}
	}
}

func TestSupervisorCommand(t *testing.T) {
	argv := []string{"/app/server", "--port", "8080"}
	cmd := SupervisorCommand(argv)
	if cmd[0] != "/bin/sh" || cmd[1] != "-c" || cmd[3] != SupervisorName || strings.Contains(cmd[2], "\n#") {
		t.Fatalf("SupervisorCommand = %q", cmd[:4])
	}
	got, ok := Supervised(cmd)
	if !ok || strings.Join(got, " ") != strings.Join(argv, " ") {
		t.Fatalf("Supervised(SupervisorCommand(argv)) = %q, %v", got, ok)
	}
	for _, c := range [][]string{nil, {"/app/server"}, {"/bin/sh", "-c", "x", "other", "a"}, {"sh", "-c", "x", SupervisorName}} {
		if _, ok := Supervised(c); ok {
			t.Errorf("Supervised(%q) = true", c)
		}
	}
}

func TestParseRestarted(t *testing.T) {
	r, err := parseRestarted("B 1 2 - 1 0\nA 1 3 143 1 1\n")
	if err != nil || r.Before != (SupervisorState{PID: 1, Gen: 2, Status: -1, Running: true}) || r.After != (SupervisorState{PID: 1, Gen: 3, Status: 143, Running: true, Crashed: true}) {
		t.Fatalf("parseRestarted = %+v, %v", r, err)
	}
	for _, bad := range []string{"", "B 1 2 - 1 0\n", "B 1 x - 1 0\nA 1 3 0 1 0\n", "B 1 2 - 2 0\nA 1 3 0 1 0\n", "B 1 2 - 1\nA 1 3 0 1\n"} {
		if _, err := parseRestarted(bad); err == nil {
			t.Errorf("parseRestarted(%q) = nil error", bad)
		}
	}
}

// lineWaiter hands out the lines written to it, one at a time.
type lineWaiter struct {
	w     *io.PipeWriter
	lines chan string
}

func newLineWaiter() *lineWaiter {
	r, w := io.Pipe()
	l := &lineWaiter{w: w, lines: make(chan string, 64)}
	go func() {
		s := bufio.NewScanner(r)
		for s.Scan() {
			l.lines <- s.Text()
		}
		close(l.lines)
	}()
	return l
}

func (l *lineWaiter) Write(b []byte) (int, error) { return l.w.Write(b) }

// next returns the next line containing want, skipping others. A line
// that never comes fails the test with the lines skipped (a bound for a
// lost line, not a timing assertion: the supervisor answers in milliseconds).
func (l *lineWaiter) next(t *testing.T, want string) string {
	t.Helper()
	var skipped []string
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case line, ok := <-l.lines:
			if !ok {
				t.Fatalf("output ended before a line with %q; skipped %q", want, skipped)
			}
			if strings.Contains(line, want) {
				return line
			}
			skipped = append(skipped, line)
		case <-deadline:
			t.Fatalf("no line with %q in 2m; skipped %q", want, skipped)
		}
	}
}

// TestSupervisor runs scripts/supervisor.sh on this machine around a child
// that reports each start through a FIFO, and restarts it with restart.sh:
// a restart runs the new version, a child that ends on its own after a
// restart leaves the supervisor waiting for the next ask, and TERM ends both
// with the child's status.
func TestSupervisor(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("LIVESYNC_STATE_DIRS", dir)
			fifo, ver := filepath.Join(dir, "started"), filepath.Join(dir, "ver")
			must(t, syscall.Mkfifo(fifo, 0o600))
			must(t, os.WriteFile(ver, []byte("v1"), 0o600))
			child := `v=$(cat "$1"); trap 'exit 7' TERM; echo "started $v" >"$2"; [ "$v" != crash ] || exit 3; while :; do sleep 1 & wait $!; done`
			cmd := SupervisorCommand([]string{"sh", "-c", child, "child", ver, fifo})
			cmd[0] = "sh" // the runner's tools, not the host's /bin/sh
			stderr := newLineWaiter()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ended := make(chan error, 1)
			go func() { ended <- ex.Run(ctx, cmd, nil, io.Discard, stderr) }()
			// The read end stays open for the whole test (O_RDWR: the open never
			// waits for a writer, and the read never sees EOF between children).
			// Reopened after each child's EOF, a new child's line written before
			// the reader's Close was dropped with the pipe's buffer when the Close
			// left the FIFO with neither end open: the test then waited forever.
			f, err := os.OpenFile(fifo, os.O_RDWR, 0)
			must(t, err)
			started := newLineWaiter()
			go func() { _, _ = io.Copy(started, f) }()
			defer f.Close()
			started.next(t, "started v1")

			restart := func(want string) Restarted {
				t.Helper()
				type res struct {
					r   Restarted
					err error
				}
				done := make(chan res, 1)
				go func() {
					r, err := RestartProcess(ctx, ex, testTarget, time.Minute)
					done <- res{r, err}
				}()
				started.next(t, "started "+want)
				got := <-done
				must(t, got.err)
				return got.r
			}
			must(t, os.WriteFile(ver, []byte("v2"), 0o600))
			r := restart("v2")
			if r.Before.Gen != 1 || r.After.Gen != 2 || r.After.Status != 7 || !r.After.Running || r.After.Crashed || r.Before.PID != r.After.PID {
				t.Fatalf("first restart: %+v", r)
			}
			must(t, os.WriteFile(ver, []byte("crash"), 0o600))
			restart("crash")
			stderr.next(t, "ended with status 3; waiting for the next sync")
			must(t, os.WriteFile(ver, []byte("v3"), 0o600))
			r = restart("v3")
			if r.Before.Running || r.Before.Status != 3 || r.After.Gen != 4 || r.After.Status != 3 || !r.After.Crashed {
				t.Fatalf("restart after a crash: %+v", r)
			}
			must(t, syscall.Kill(r.After.PID, syscall.SIGTERM))
			var ee ExitError
			if err := <-ended; !errors.As(err, &ee) || ee.ExitStatus() != 7 {
				t.Fatalf("supervisor after TERM: %v, want exit status 7", err)
			}
		})
	}
}

// TestSupervisorFirstExit: a child that ends on its own before any restart
// ends the supervisor with its status, as the container's own command would.
func TestSupervisorFirstExit(t *testing.T) {
	t.Setenv("LIVESYNC_STATE_DIRS", t.TempDir())
	ex := busybox(t)
	cmd := SupervisorCommand([]string{"sh", "-c", "exit 5"})
	cmd[0] = "sh"
	var ee ExitError
	if err := ex.Run(context.Background(), cmd, nil, io.Discard, io.Discard); !errors.As(err, &ee) || ee.ExitStatus() != 5 {
		t.Fatalf("supervisor = %v, want exit status 5", err)
	}
}

func TestRestartProcessNotSupervised(t *testing.T) {
	t.Setenv("LIVESYNC_STATE_DIRS", t.TempDir())
	if _, err := RestartProcess(context.Background(), busybox(t), testTarget, time.Second); !errors.Is(err, ErrNotSupervised) {
		t.Fatalf("RestartProcess without a supervisor = %v, want ErrNotSupervised", err)
	}
}

// TestSignalScript checks and signals a local process standing in for PID 1.
func TestSignalScript(t *testing.T) {
	ex := busybox(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "hup")
	must(t, syscall.Mkfifo(fifo, 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := newLineWaiter()
	go func() {
		_ = ex.Run(ctx, []string{"sh", "-c", `trap 'echo reloaded >"$1"' HUP; echo ready; while :; do sleep 1 & wait $!; done`, "x", fifo}, nil, ready, io.Discard)
	}()
	ready.next(t, "ready")
	// The runner's shell is the process; find it the way a helper would.
	pid := findShell(t, fifo)
	t.Setenv("LIVESYNC_PID", pid)
	p, err := CheckSignal(ctx, ex, testTarget)
	must(t, err)
	if !p.Catches(1) || p.Catches(12) {
		t.Fatalf("CheckSignal = %+v: want HUP caught, USR2 not", p)
	}
	got := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(fifo)
		got <- string(b)
	}()
	must(t, SendSignal(ctx, ex, testTarget, "HUP"))
	if s := <-got; s != "reloaded\n" {
		t.Fatalf("after SendSignal HUP the process wrote %q", s)
	}
}

// findShell returns the PID of the process whose command line holds arg.
func findShell(t *testing.T, arg string) string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	must(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), "reloaded") && strings.Contains(string(b), arg) {
			return e.Name()
		}
	}
	t.Fatalf("no process with %q", arg)
	return ""
}
