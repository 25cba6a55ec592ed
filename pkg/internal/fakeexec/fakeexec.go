// Package fakeexec is a remote.Executor that records calls and answers
// them from a script, for the tests of packages that run commands in
// containers. It is test support: nothing outside tests imports it.
package fakeexec

import (
	"context"
	"io"
	"sync"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// Call is one call recorded by Executor.
type Call struct {
	Target remote.Target
	Argv   []string
	Stdin  []byte // everything read from stdin
}

// Response is what Executor answers to one call.
type Response struct {
	Stdout, Stderr string
	Err            error
}

// Executor records calls and answers them from Responses in order, then
// with Respond if set, else with success. Safe for concurrent use.
type Executor struct {
	mu        sync.Mutex
	calls     []Call
	Responses []Response
	Respond   func(Call) Response
}

var _ remote.Executor = (*Executor)(nil)

// Exec records the call (draining stdin) and returns the scripted response.
func (f *Executor) Exec(ctx context.Context, t remote.Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c := Call{Target: t, Argv: append([]string(nil), argv...)}
	if stdin != nil {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return err
		}
		c.Stdin = b
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	var r Response
	switch {
	case len(f.Responses) > 0:
		r, f.Responses = f.Responses[0], f.Responses[1:]
	case f.Respond != nil:
		respond := f.Respond
		f.mu.Unlock()
		r = respond(c)
		f.mu.Lock()
	}
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	_, _ = io.WriteString(stdout, r.Stdout)
	_, _ = io.WriteString(stderr, r.Stderr)
	return r.Err
}

// Calls returns the calls so far.
func (f *Executor) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}
