package filesync

import (
	"sync"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// Reporter receives what the engine does. The engine serializes calls, so
// implementations need no locking; they must not call back into the Engine.
type Reporter interface {
	Report(Event)
}

// ReporterFunc adapts a function to Reporter.
type ReporterFunc func(Event)

// Report calls f(ev).
func (f ReporterFunc) Report(ev Event) { f(ev) }

// Event is one of InitialSync, Batch, TargetAdded, TargetRemoved, Error,
// DryRun, Held, Progress, OnSync, Waiting, Restarting, HelperUsed.
type Event interface{ event() }

// InitialSync reports a target's initial sync (also the re-sync of a new
// container of the same pod).
type InitialSync struct {
	Target   Target
	Files    int   // entries sent
	Deleted  int   // remote entries deleted (mirror, type changes)
	Bytes    int64 // tar bytes sent
	Duration time.Duration
	Err      error // nil when the target converged
	// Transport is how its batches go: TransportStream or TransportExec.
	Transport string
	// Node and Reason name the pod's node and why it failed there (e.g.
	// "node-not-ready") when Err is the node's doing (see pkg/session).
	Node, Reason string
}

// Batch reports one coalesced batch once every target that was ready when it
// was cut has applied it (or failed).
//
// A target that applied several batches in one pass (they came while it
// was busy) counts what it did in the first one's report only.
type Batch struct {
	Changed int           // entries copied, the most in any one target
	Deleted int           // entries deleted, the most in any one target
	Names   []string      // a few of the remote paths involved
	Targets int           // targets the batch went to
	Failed  int           // targets where it failed
	Bytes   int64         // tar bytes sent, all targets together
	Latency time.Duration // first change seen → applied on all targets
}

// TargetAdded reports a new target; its initial sync follows. Transport is
// the transport its batches will try (TransportStream falls back to
// TransportExec where the container lacks the tools; InitialSync says which
// one they use).
type TargetAdded struct {
	Target    Target
	Transport string
}

// HelperUsed reports that a target is synced through a helper container
// (see remote.HelperArgv): an ephemeral container of its pod that shares its
// process namespace. Executors that add helpers (pkg/workload) report it.
type HelperUsed struct {
	Target Target
	Name   string // the helper's container name
	Image  string
	// Profile is how the helper reaches the target's files: "root+SYS_PTRACE"
	// or "same-user"; Level the namespace's PodSecurity level that chose it.
	Profile, Level string
	Reused         bool   // a live helper from an earlier run
	DryRun         bool   // not added: the apiserver accepted it in a dry run
	Why            string // "no sh or tar", or "--helper ephemeral"
	// UID and GID are the target's user; Owner: a root helper makes the
	// files that user's.
	UID, GID int
	Owner    bool
}

// TargetRemoved reports a target that is no longer synced.
type TargetRemoved struct{ Target Target }

// Error reports a failure in one target. Deterministic failures are reported
// once per target until the target succeeds again. Hint repeats the advice
// part of Err for UIs that show it separately.
type Error struct {
	Target Target
	Err    error
	Hint   string
	// Node and Reason name the pod's node and why it failed there (e.g.
	// "node-not-ready") when Err is the node's doing (see pkg/session).
	Node, Reason string
}

// Recovered reports that a target whose syncs failed is in sync again: Failures
// failed tries, the first of them Duration ago.
type Recovered struct {
	Target   Target
	Failures int
	Duration time.Duration
	// Node names the pod's node when the failures were that node's (see
	// Error.Node): it is back.
	Node string
}

// DryRun reports what a plan would do in a target, with remote paths. The
// initial sync reports one per mapping, also when it would change nothing,
// with the Preflight of that mapping; a batch's has none.
type DryRun struct {
	Target Target
	// Remote is the mapping's remote directory (a file mapping's parent).
	Remote    planner.RemotePath
	Copy      []string
	Delete    []string
	Preflight *Preflight
}

// Held reports deletes held back in a target instead of run: the local root
// of Mapping is missing, emptied or replaced by another file system, or they
// would delete more than the mass-delete threshold. Nothing was deleted;
// copies went ahead. A root problem's paths are decided again by the next
// batch or rescan; a mass delete's only by a local change at or under them,
// or by Engine.Release(ID). It is reported once per distinct held set and
// target.
type Held struct {
	Target   Target
	Mapping  planner.Mapping
	Reason   string   // why, one line
	Deleted  int      // remote entries that would have been deleted
	Examples []string // a few of the remote paths held
	Hint     string   // what to do, e.g. how to allow it
	// ID names a mass delete, the same in every target that holds the same
	// set, for Engine.Release; empty for a root problem, which only the root
	// lifts.
	ID string
	// Under is, for a mass delete, the local path every held delete is at or
	// under.
	Under string
}

func (InitialSync) event()   {}
func (Batch) event()         {}
func (TargetAdded) event()   {}
func (TargetRemoved) event() {}
func (Error) event()         {}
func (DryRun) event()        {}
func (Held) event()          {}
func (Recovered) event()     {}
func (HelperUsed) event()    {}

// lockedReporter serializes Report calls.
type lockedReporter struct {
	mu sync.Mutex
	r  Reporter
}

func (l *lockedReporter) Report(ev Event) {
	if l.r == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.r.Report(ev)
}

// Waiting reports why there is no container to sync into, once and again whenever the reason
// changes. Reason is a stable word for scripts (e.g. ImagePull); Message says what to do.
type Waiting struct {
	Workload string // e.g. deployment/web
	Pod      string // the pod the reason is about, if one
	Reason   string
	Message  string
}

// Restarting reports a synced container that keeps restarting: each restart starts from the
// image, without the synced files, so livesync syncs it again; the app is probably crashing.
type Restarting struct {
	Target   Target
	Restarts int // in Window
	Window   time.Duration
	ExitCode *int32 // of the last run, when the kubelet reported it
}

func (Waiting) event()    {}
func (Restarting) event() {}

// Preflight is what a dry run found out about how a real run would sync one
// mapping into one target: the initial sync's DryRun events carry it.
type Preflight struct {
	// UID and GID are whom the target's execs run as ("unknown" without id).
	UID, GID string
	// Transport is how batches would go: TransportStream where the
	// container's dd reads exactly one block from a pipe and the executor
	// keeps streams (see remote.StreamCapable), else TransportExec.
	Transport string
	// Helper: the execs run in a helper container (see remote.HelperArgv).
	Helper bool
	// Tar: tar was found; without it nothing can be copied.
	Tar bool
	// Root is what the mapping's remote directory is: RootDir, RootMissing
	// or RootNotDir.
	Root string
	// Writable: Root is a directory the user may create entries in, or is
	// missing and its nearest existing ancestor is one (the sync creates it).
	Writable bool
	// Hint says what to do when Writable or Tar is false.
	Hint string
	// Err is why the check could not run, one line (e.g. a helper that only
	// a real run adds); the other fields are then zero.
	Err error
}

// What a mapping's remote directory is (Preflight.Root).
const (
	RootDir     = remote.RootDir
	RootMissing = remote.RootMissing
	RootNotDir  = remote.RootNotDir
)
