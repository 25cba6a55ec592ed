package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SupervisorName is $0 of the supervisor's `sh -c`: what marks a container
// command as one SupervisorCommand built.
const SupervisorName = "livesync-supervisor"

// SupervisorCommand returns the container command that runs argv, the
// container's own command (entrypoint and arguments together), under the
// supervisor of scripts/supervisor.sh: `/bin/sh -c SCRIPT
// livesync-supervisor ARGV...`. It needs nothing in the image but /bin/sh,
// and nothing built: the script travels in the pod template.
func SupervisorCommand(argv []string) []string {
	return append([]string{"/bin/sh", "-c", supervisorScript, SupervisorName}, argv...)
}

// Supervised returns the argv a command built by SupervisorCommand runs,
// and whether cmd is such a command (of any livesync release: the script
// itself is not compared).
func Supervised(cmd []string) ([]string, bool) {
	if len(cmd) < 4 || cmd[0] != "/bin/sh" || cmd[1] != "-c" || cmd[3] != SupervisorName {
		return nil, false
	}
	return slices.Clone(cmd[4:]), true
}

// ErrNotSupervised means a container runs no supervisor (see RestartProcess):
// its pod predates the rollout that installs it, or someone changed its
// command since.
var ErrNotSupervised = errors.New("the container does not run the livesync supervisor")

// SupervisorState is the supervisor's state line (see scripts/supervisor.sh).
type SupervisorState struct {
	PID int
	// Gen counts the children the supervisor started.
	Gen int
	// Status is how the child before the current one ended: its exit
	// status, 128+N for signal N; -1 when there was none.
	Status int
	// Running reports that a child runs; false when the last one ended on
	// its own and the supervisor waits for the next ask.
	Running bool
	// Crashed reports that the child before the current one had ended on
	// its own (Status is its exit status) before livesync asked.
	Crashed bool
}

// Restarted is what RestartProcess saw: the supervisor before the ask and
// after it started the new child.
type Restarted struct {
	Before, After SupervisorState
}

// restartPoll is how often restart.sh reads the supervisor's state.
const restartPoll = 100 * time.Millisecond

// RestartProcess asks the supervisor in t to restart its child and waits
// until it started the new one, at most wait. A container without a
// supervisor is ErrNotSupervised.
func RestartProcess(ctx context.Context, ex Executor, t Target, wait time.Duration) (Restarted, error) {
	var out, errOut bytes.Buffer
	tenths := max(int(wait/restartPoll), 1)
	argv := []string{"sh", "-c", restartScript, "livesync-restart", strconv.Itoa(tenths)}
	err := ex.Exec(ctx, t, argv, nil, &out, &errOut)
	var ee ExitError
	if errors.As(err, &ee) {
		switch ee.ExitStatus() {
		case 3:
			return Restarted{}, ErrNotSupervised
		case 4:
			return Restarted{}, fmt.Errorf("the supervisor did not start the process again within %s", wait)
		}
	}
	if err != nil {
		return Restarted{}, withStderr(err, errOut.String())
	}
	return parseRestarted(out.String())
}

func parseRestarted(out string) (Restarted, error) {
	var r Restarted
	seen := 0
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) != 6 || (f[0] != "B" && f[0] != "A") {
			continue
		}
		s, err := parseSupervisorState(f[1:])
		if err != nil {
			return Restarted{}, fmt.Errorf("reading the supervisor's state %q: %w", strings.TrimSpace(line), err)
		}
		if f[0] == "B" {
			r.Before = s
		} else {
			r.After = s
		}
		seen++
	}
	if seen != 2 {
		return Restarted{}, fmt.Errorf("reading the supervisor's state: unexpected output %q", out)
	}
	return r, nil
}

func parseSupervisorState(f []string) (SupervisorState, error) {
	var s SupervisorState
	var err error
	if s.PID, err = strconv.Atoi(f[0]); err != nil {
		return s, err
	}
	if s.Gen, err = strconv.Atoi(f[1]); err != nil {
		return s, err
	}
	s.Status = -1
	if f[2] != "-" {
		if s.Status, err = strconv.Atoi(f[2]); err != nil {
			return s, err
		}
	}
	for i, b := range []*bool{&s.Running, &s.Crashed} {
		switch f[3+i] {
		case "1":
			*b = true
		case "0":
		default:
			return s, fmt.Errorf("field %d is %q, not 0 or 1", 4+i, f[3+i])
		}
	}
	return s, nil
}

// ProcStatus is what a process's /proc/PID/status says about its signals.
type ProcStatus struct {
	Name string
	PID  int
	// Caught and Ignored are SigCgt and SigIgn: bit N-1 is signal N.
	Caught, Ignored uint64
}

// Catches reports whether the process has a handler for signal sig.
func (p ProcStatus) Catches(sig int) bool {
	return sig > 0 && sig <= 64 && p.Caught&(1<<(sig-1)) != 0
}

// ParseProcStatus reads the Name, Pid, SigCgt and SigIgn lines of a
// /proc/PID/status; SigCgt is required.
func ParseProcStatus(s string) (ProcStatus, error) {
	var p ProcStatus
	haveCgt := false
	for line := range strings.Lines(s) {
		k, v, ok := strings.Cut(strings.TrimRight(line, "\n"), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		var err error
		switch k {
		case "Name":
			p.Name = v
		case "Pid":
			p.PID, err = strconv.Atoi(v)
		case "SigCgt":
			p.Caught, err = strconv.ParseUint(v, 16, 64)
			haveCgt = err == nil
		case "SigIgn":
			p.Ignored, err = strconv.ParseUint(v, 16, 64)
		}
		if err != nil {
			return ProcStatus{}, fmt.Errorf("reading %s %q: %w", k, v, err)
		}
	}
	if !haveCgt {
		return ProcStatus{}, fmt.Errorf("no SigCgt in the process status %q", s)
	}
	return p, nil
}

// CheckSignal reads the signal dispositions of t's main process: PID 1, or
// the process a helper pins.
func CheckSignal(ctx context.Context, ex Executor, t Target) (ProcStatus, error) {
	var out, errOut bytes.Buffer
	if err := ex.Exec(ctx, t, []string{"sh", "-c", signalScript, "livesync-signal", "check"}, nil, &out, &errOut); err != nil {
		return ProcStatus{}, withStderr(err, errOut.String())
	}
	return ParseProcStatus(out.String())
}

// SendSignal sends signal sig (a name such as HUP) to t's main process.
func SendSignal(ctx context.Context, ex Executor, t Target, sig string) error {
	var errOut bytes.Buffer
	err := ex.Exec(ctx, t, []string{"sh", "-c", signalScript, "livesync-signal", "send", sig}, nil, io.Discard, &errOut)
	return withStderr(err, errOut.String())
}

// withStderr adds the first line of stderr to err, if both are there.
func withStderr(err error, stderr string) error {
	if err == nil {
		return nil
	}
	if line, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n"); line != "" {
		return fmt.Errorf("%w: %s", err, line)
	}
	return err
}

// ErrNoShell means a container has no /bin/sh to run the supervisor with.
var ErrNoShell = errors.New("no /bin/sh in the container")

// CheckShell runs `/bin/sh -c true` in t, straight through ex (not through a
// helper, which brings its own sh): ErrNoShell when the image has none.
func CheckShell(ctx context.Context, ex Executor, t Target) error {
	var errOut bytes.Buffer
	err := ex.Exec(ctx, t, []string{"/bin/sh", "-c", "true"}, nil, io.Discard, &errOut)
	var ee ExitError
	switch {
	case err == nil:
		return nil
	case strings.Contains(err.Error(), "executable file not found") || strings.Contains(err.Error(), "no such file or directory"),
		errors.As(err, &ee) && (ee.ExitStatus() == 127 || ee.ExitStatus() == 126):
		return ErrNoShell
	}
	return withStderr(err, errOut.String())
}
