package remote

import (
	"errors"
	"fmt"
	"testing"
)

func TestNodeTrouble(t *testing.T) {
	tg := Target{Namespace: "ns", Pod: "web-1", Container: "app"}
	for _, tc := range []struct {
		name string
		err  error
		want NodeCause
	}{
		{"kubelet refused", errors.New(`error dialing backend: dial tcp 10.244.1.1:10250: connect: connection refused`), CauseKubelet},
		{"proxy", errors.New(`proxy error from 127.0.0.1:6443 while dialing 10.244.1.1:10250, code 502: 502 Bad Gateway`), CauseKubelet},
		{"no route", errors.New(`dial tcp 10.244.1.1:10250: connect: no route to host`), CauseKubelet},
		{"runtime down", errors.New(`error executing command in container: container runtime is down`), CauseRuntime},
		{"cri unavailable", errors.New(`rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial unix /x/n2/containerd.sock: connect: connection refused"`), CauseRuntime},
		{"timeout", fmt.Errorf("applying: %w", ErrTimeout), CauseTimeout},
		{"exit code", exitCode(2), CauseNone},
		{"gone", errors.New(`container not found ("app")`), CauseNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Classify(tc.err, tg, "applying changes", "/app", "")
			if got := NodeTrouble(err); got != tc.want {
				t.Fatalf("NodeTrouble(%v) = %v, want %v", err, got, tc.want)
			}
		})
	}
}

type exitCode int

func (c exitCode) Error() string   { return fmt.Sprintf("command terminated with exit code %d", int(c)) }
func (c exitCode) ExitStatus() int { return int(c) }
