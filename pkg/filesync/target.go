package filesync

import (
	"context"
	"io"
)

// Target is one container that receives the synced files. A new ContainerID
// for the same Namespace/Pod/Container is a fresh writable layer and is synced
// from scratch.
type Target struct {
	Namespace, Pod, Container, ContainerID string
}

// String returns "namespace/pod/container".
func (t Target) String() string { return t.Namespace + "/" + t.Pod + "/" + t.Container }

// Executor runs argv in a target container, streaming stdin (which may be nil)
// to it. The pods/exec implementation lives in pkg/workload; tests use
// pkg/internal/fakeexec (recorded calls) or pkg/internal/localexec (the real
// scripts on this machine).
type Executor interface {
	Exec(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error
}

// ExitError is an Executor error that carries the remote command's exit code
// (client-go's exec.CodeExitError satisfies it). Any other Executor error is
// treated as a transport failure.
type ExitError interface {
	error
	ExitStatus() int
}

// Matcher says which paths not to sync. rel is slash-separated and relative to
// the mapping's local root; pkg/ignore implements it.
type Matcher interface {
	Match(rel string, isDir bool) bool
}
