package remote

import (
	"context"
	"fmt"
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

// Owned is an Executor that writes as root on behalf of a target running as
// another user (a helper container, see pkg/workload): Owner says whose the
// extracted files must be. Archives for t then carry that uid:gid in every
// header, and the Executor has apply.sh restore it (LIVESYNC_OWNER).
type Owned interface {
	Owner(t Target) *Owner
}

// Owner is a numeric uid:gid.
type Owner struct{ UID, GID int }

// ExitError is an Executor error that carries the remote command's exit code
// (client-go's exec.CodeExitError satisfies it). Any other Executor error is
// treated as a transport failure.
type ExitError interface {
	error
	ExitStatus() int
}

// StreamCapable is implemented by executors whose execs may stay open for
// the life of a target (pods/exec can, with stdin as a pipe). A stream per
// target (see Streams) is kept only through such an executor, and only when
// PersistentStreams returns true.
type StreamCapable interface {
	PersistentStreams() bool
}

// EntryType is the kind of an entry, in a listing or a sync.
type EntryType uint8

// Entry types. Anything else (sockets, devices, fifos) is never synced.
const (
	TypeFile EntryType = iota + 1
	TypeDir
	TypeSymlink
)

// String returns "file", "dir" or "symlink".
func (t EntryType) String() string {
	switch t {
	case TypeFile:
		return "file"
	case TypeDir:
		return "dir"
	case TypeSymlink:
		return "symlink"
	}
	return fmt.Sprintf("EntryType(%d)", t)
}
