package fakeexec

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

func TestExecutor(t *testing.T) {
	boom := errors.New("boom")
	f := &Executor{Responses: []Response{{Stdout: "out", Stderr: "err", Err: boom}}}
	tg := remote.Target{Namespace: "ns", Pod: "web-1", Container: "app"}
	ctx := context.Background()
	var out, errOut bytes.Buffer
	if err := f.Exec(ctx, tg, []string{"scripted"}, nil, &out, &errOut); !errors.Is(err, boom) || out.String() != "out" || errOut.String() != "err" {
		t.Errorf("scripted call = %v, %q, %q", err, out.String(), errOut.String())
	}
	if err := f.Exec(ctx, tg, []string{"default"}, strings.NewReader("tar"), io.Discard, io.Discard); err != nil {
		t.Errorf("call past the responses = %v, want success", err)
	}
	f.Respond = func(c Call) Response { return Response{Stdout: c.Argv[0]} }
	out.Reset()
	if err := f.Exec(ctx, tg, []string{"echo"}, nil, &out, io.Discard); err != nil || out.String() != "echo" {
		t.Errorf("Respond call = %v, %q", err, out.String())
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := f.Exec(cancelled, tg, []string{"late"}, nil, io.Discard, io.Discard); !errors.Is(err, context.Canceled) {
		t.Errorf("call with a cancelled context = %v", err)
	}
	calls := f.Calls()
	var argvs []string
	for _, c := range calls {
		argvs = append(argvs, c.Argv[0])
	}
	if strings.Join(argvs, ",") != "scripted,default,echo,late" || calls[0].Target != tg || string(calls[1].Stdin) != "tar" {
		t.Errorf("calls = %+v", calls)
	}
}
