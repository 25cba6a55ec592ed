package filesync

import (
	"context"
	"io"
	"sync"
)

// FakeCall is one call recorded by FakeExecutor.
type FakeCall struct {
	Target Target
	Argv   []string
	Stdin  []byte // everything read from stdin
}

// FakeResponse is what FakeExecutor answers to one call.
type FakeResponse struct {
	Stdout, Stderr string
	Err            error
}

// FakeExecutor records calls and answers them from Responses in order, then
// with Respond if set, else with success. Safe for concurrent use.
type FakeExecutor struct {
	mu        sync.Mutex
	calls     []FakeCall
	Responses []FakeResponse
	Respond   func(FakeCall) FakeResponse
}

var _ Executor = (*FakeExecutor)(nil)

// Exec records the call (draining stdin) and returns the scripted response.
func (f *FakeExecutor) Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c := FakeCall{Target: t, Argv: append([]string(nil), argv...)}
	if stdin != nil {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return err
		}
		c.Stdin = b
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	var r FakeResponse
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
	io.WriteString(stdout, r.Stdout)
	io.WriteString(stderr, r.Stderr)
	return r.Err
}

// Calls returns the calls so far.
func (f *FakeExecutor) Calls() []FakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FakeCall(nil), f.calls...)
}
