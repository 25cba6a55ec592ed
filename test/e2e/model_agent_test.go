//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// An agent is the model's one long-lived `kubectl exec -i … -- sh` into the container: it runs
// the commands it is given one at a time, each as a process of its own with the argv given and
// no stdin, as kexec runs one. A kexec starts a kubectl and an exec through the apiserver,
// kubelet and containerd: 0.2 s to over 1 s of wall time and CPU on a busy 2-core VM, and the
// model made several in every round (its container operations, the polls of its quiescent
// points, the reads of the container's tree), most of a round's time. Through the agent a
// command costs its fork in the container and a round trip on an open stream.
//
// Every command is bounded by a timeout; a command whose agent broke (the container
// restarted, the pod was replaced, the stream failed) or that ran out of time fails, as a
// kexec whose stream broke does, and the next command makes a new agent. A command is never
// sent twice: one may have run although its agent broke before it said so.
type agent struct {
	ns, pod string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	out     *agentStream // the commands' stdout, with the agent's marks
	errs    *agentStream // their stderr, with its end marks
	exited  chan struct{}
}

// agentTimeout bounds a command that has no deadline of its own: the longest the model runs
// (80 files removed 40 ms apart) takes seconds; a kexec had 5 minutes.
const agentTimeout = 2 * time.Minute

// agentStream is what an agent printed on one of its streams and nobody has read yet.
type agentStream struct {
	mu   sync.Mutex
	buf  []byte
	eof  bool
	more chan struct{} // closed and replaced on every write, closed at EOF
}

func newAgentStream() *agentStream { return &agentStream{more: make(chan struct{})} }

func (s *agentStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	close(s.more)
	s.more = make(chan struct{})
	return len(p), nil
}

// rest is the last of what nobody read, for an error message.
func (s *agentStream) rest() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.buf[max(0, len(s.buf)-500):])
}

func (s *agentStream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.eof {
		s.eof = true
		close(s.more)
	}
}

// take waits until find finds what it looks for in what is unread, and consumes it up to the
// end find returns (n > 0).
func (s *agentStream) take(ctx context.Context, find func([]byte) (v []byte, n int)) ([]byte, error) {
	for {
		s.mu.Lock()
		if v, n := find(s.buf); n > 0 {
			v = bytes.Clone(v)
			s.buf = s.buf[n:]
			s.mu.Unlock()
			return v, nil
		}
		if s.eof {
			s.mu.Unlock()
			return nil, io.ErrUnexpectedEOF
		}
		more := s.more
		s.mu.Unlock()
		select {
		case <-more:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// startAgent starts an agent into the app container of pod.
func startAgent(ns, pod string) (*agent, error) {
	a := &agent{ns: ns, pod: pod, out: newAgentStream(), errs: newAgentStream(), exited: make(chan struct{})}
	a.cmd = exec.Command(e.kubectl, "--kubeconfig", e.kubeconfig, "-n", ns, "exec", "-i", pod, "-c", "app", "--", "sh")
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.errs
	a.cmd.WaitDelay = 5 * time.Second // the copies of its output end that long after it exits
	stdin, err := a.cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("starting an agent in pod %q: %w", pod, err)
	}
	a.stdin = stdin
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting an agent in pod %q: %w", pod, err)
	}
	// The shell's own words (dash and busybox print "Killed" for a command killed by a
	// signal) are not the commands': their stderr is fd 3, the shell's goes nowhere.
	if _, err := io.WriteString(stdin, "exec 3>&2 2>/dev/null\n"); err != nil {
		_ = a.cmd.Process.Kill()
		return nil, fmt.Errorf("starting an agent in pod %q: %w", pod, err)
	}
	go func() {
		_ = a.cmd.Wait()
		a.out.close()
		a.errs.close()
		close(a.exited)
	}()
	return a, nil
}

// alive says whether the agent's kubectl still runs.
func (a *agent) alive() bool {
	select {
	case <-a.exited:
		return false
	default:
		return true
	}
}

// stop ends the agent: its shell exits at the end of its input; a kubectl that does not exit
// by then is killed.
func (a *agent) stop() {
	_ = a.stdin.Close()
	select {
	case <-a.exited:
	case <-time.After(5 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
}

// shQuote quotes s as one word of sh.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// run runs argv in the container and returns what a kexec of it returns. The agent's shell
// prints a start mark before it and an end mark with the exit code after it, each with a
// token of this command's own that no output can hold; the command's own output is what lies
// between. An error says the agent broke or the command ran out of time: whether it ran is
// not known, and the agent is stopped.
func (a *agent) run(ctx context.Context, argv ...string) (result, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, agentTimeout)
		defer cancel()
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	tok := "agent-" + hex.EncodeToString(raw[:])
	words := make([]string, len(argv))
	for i, w := range argv {
		words[i] = shQuote(w)
	}
	// The command's stdin is /dev/null, as a kexec's without -i: the agent's own is its
	// next commands. Its stderr is the agent's (see startAgent). It runs in a subshell that
	// execs it: a redirection of a plain command holds in the shell too until it was waited
	// for, when dash and busybox say "Killed"; a subshell's holds only in the subshell.
	line := fmt.Sprintf("printf '%%s\\n' '%s start'\n(exec %s) </dev/null 2>&3 3>&-\nprintf '\\n%%s %%s\\n' '%s' \"$?\"\nprintf '\\n%%s\\n' '%s' >&3\n",
		tok, strings.Join(words, " "), tok, tok)
	fail := func(err error) (result, error) {
		a.stop()
		return result{}, fmt.Errorf("running %q through the agent in pod %q: %w (kubectl's stderr: %q)", strings.Join(argv, " "), a.pod, err, a.errs.rest())
	}
	if _, err := io.WriteString(a.stdin, line); err != nil {
		return fail(err)
	}
	start := []byte(tok + " start\n")
	if _, err := a.out.take(ctx, func(b []byte) ([]byte, int) {
		if i := bytes.Index(b, start); i >= 0 {
			return nil, i + len(start)
		}
		return nil, 0
	}); err != nil {
		return fail(fmt.Errorf("waiting for it to start: %w", err))
	}
	end := []byte("\n" + tok + " ")
	var code int
	stdout, err := a.out.take(ctx, func(b []byte) ([]byte, int) {
		i := bytes.Index(b, end)
		if i < 0 {
			return nil, 0
		}
		nl := bytes.IndexByte(b[i+len(end):], '\n')
		if nl < 0 {
			return nil, 0
		}
		c, err := strconv.Atoi(string(b[i+len(end) : i+len(end)+nl]))
		if err != nil {
			c = -1
		}
		code = c
		return b[:i], i + len(end) + nl + 1
	})
	if err != nil {
		return fail(fmt.Errorf("waiting for its end: %w", err))
	}
	errEnd := []byte("\n" + tok + "\n")
	stderr, err := a.errs.take(ctx, func(b []byte) ([]byte, int) {
		if i := bytes.Index(b, errEnd); i >= 0 {
			return b[:i], i + len(errEnd)
		}
		return nil, 0
	})
	if err != nil {
		return fail(fmt.Errorf("waiting for the end of its stderr: %w", err))
	}
	if code < 0 {
		return fail(errors.New("its end mark holds no exit code"))
	}
	return result{stdout: string(stdout), stderr: string(stderr), code: code}, nil
}

// agentFor returns the model's agent into its pod, a new one where the last broke or was of
// another pod (a pod replaced) or of a container restarted since (see restartContainer).
func (m *model) agentFor() (*agent, error) {
	if m.agent != nil && (m.agent.pod != m.pod || m.agent.ns != m.ns || !m.agent.alive()) {
		m.agent.stop()
		m.agent = nil
	}
	if m.agent == nil {
		a, err := startAgent(m.ns, m.pod)
		if err != nil {
			return nil, err
		}
		m.agent = a
		m.t.Cleanup(a.stop)
	}
	return m.agent, nil
}

// exec runs argv in the container through the agent, as kexec does: a command that could not
// be run or did not end returns exit code -1 and why in its stderr (the caller fails on it, or
// polls again on a new agent).
func (m *model) exec(ctx context.Context, argv ...string) result {
	a, err := m.agentFor()
	if err == nil {
		var r result
		if r, err = a.run(ctx, argv...); err == nil {
			return r
		}
	}
	m.agent = nil
	return result{code: -1, stderr: err.Error()}
}

// hashTree is remoteHashTree through the agent.
func (m *model) hashTree(ctx context.Context) (tree, error) {
	r := m.exec(ctx, "sh", "-c", hashScript, "sh", "/app")
	if r.code != 0 {
		return nil, fmt.Errorf("hashing /app in pod %q: exit %d: %s", m.pod, r.code, strings.TrimSpace(r.stderr))
	}
	tr, err := parseHashTree(r.stdout)
	if err != nil {
		return nil, fmt.Errorf("hashing /app in pod %q: %w", m.pod, err)
	}
	return tr, nil
}

// dropAgent stops the agent of a container that is going: the next command makes a new one in
// the container that replaces it.
func (m *model) dropAgent() {
	if m.agent != nil {
		m.agent.stop()
		m.agent = nil
	}
}

// timed adds the wall time until the function it returns is called to phase: the summary says
// where a run's time went (the rest is the operations'), so that a slower round can be told
// from a slower product.
func (m *model) timed(phase string) func() {
	t0 := time.Now()
	return func() { m.spent[phase] += time.Since(t0) }
}

func (m *model) spentString(wall time.Duration) string {
	var parts []string
	rest := wall
	for _, phase := range slices.Sorted(maps.Keys(m.spent)) {
		parts = append(parts, fmt.Sprintf("%s %.0f s", phase, m.spent[phase].Seconds()))
		rest -= m.spent[phase]
	}
	return strings.Join(append(parts, fmt.Sprintf("operations and the rest %.0f s", rest.Seconds())), ", ")
}

// TestModelAgent holds the model's agent to what kexec does: the same stdout, stderr and exit
// code for the same argv (words that need quoting, output without a newline or with NULs, no
// stdin, a death by signal), on both shells the model runs on; and a broken or stuck agent
// is given up on in its time and replaced, never waited on for good.
func TestModelAgent(t *testing.T) {
	for _, kind := range syncBackImages {
		t.Run(kind, func(t *testing.T) {
			ns, pod := webOf(t, kind)
			m := &model{t: t, ns: ns, pod: pod}
			ctx := context.Background()
			for _, argv := range [][]string{
				{"sh", "-c", `printf '%s|' "$@"`, "sh", "it's", "two\nlines", `$HOME "x" \n`, "", "-e"},
				{"sh", "-c", "cd /app || exit 1\n" + `[ -f "$1" ] || exit 3; echo never`, "sh", "no such file"},
				{"sh", "-c", `printf 'no newline'; printf 'on stderr' >&2; exit 1`},
				{"sh", "-c", `printf 'a\0b\0'; printf '\0' >&2`},
				{"sh", "-c", `cat; echo "stdin ended: $?"`},
				{"sh", "-c", `kill -9 $$`},
				{"sh", "-c", hashScript, "sh", "/etc"},
				{"cat", "/no/such/file"},
			} {
				want := kexec(t, ns, pod, argv...)
				if want.code != 0 { // kubectl's own line; the command's stderr is before it
					want.stderr = strings.TrimSuffix(want.stderr, fmt.Sprintf("command terminated with exit code %d\n", want.code))
				}
				if got := m.exec(ctx, argv...); got != want {
					t.Errorf("%q: through the agent:\n%s\nthrough kexec:\n%s", argv, got, want)
				}
			}

			// The agent's shell killed: the next command runs in a new one.
			shell := strings.TrimSpace(m.exec(ctx, "sh", "-c", "echo $PPID").stdout)
			if r := kexec(t, ns, pod, "sh", "-c", `kill -9 "$1"`, "sh", shell); r.code != 0 {
				t.Fatalf("killing the agent's shell %s: %s", shell, r)
			}
			waitFor(t, "the agent to end with its shell", time.Minute, func() (bool, error) { return !m.agent.alive(), nil })
			if now := strings.TrimSpace(m.exec(ctx, "sh", "-c", "echo $PPID").stdout); now == "" || now == shell {
				t.Errorf("after its shell %s was killed, the agent's shell is %q: want a new one", shell, now)
			}

			// A command that outlives its deadline fails in its time; the next runs.
			short, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			t0 := time.Now()
			if r := m.exec(short, "sleep", "30"); r.code != -1 || time.Since(t0) > 15*time.Second {
				t.Errorf("a command past its deadline: %s after %s; want exit -1 in its time", r, time.Since(t0))
			}
			if r := m.exec(ctx, "sh", "-c", "echo after"); r != (result{stdout: "after\n"}) {
				t.Errorf("the command after a stuck one: %s", r)
			}
		})
	}
}
