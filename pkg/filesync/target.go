package filesync

import "github.com/livesync-dev/kubectl-livesync/pkg/remote"

// Target is one container that receives the synced files (see remote.Target).
type Target = remote.Target

// Executor runs argv in a target container (see remote.Executor).
type Executor = remote.Executor

// Transports a target can use, as reported in TargetAdded and InitialSync
// (see remote.Streams).
const (
	TransportStream = remote.TransportStream
	TransportExec   = remote.TransportExec
)
