// Package remote is the container side of a sync: what runs in the container and how it gets
// there. It owns the shell scripts that run there as `sh -c` (scripts/*.sh, embedded, POSIX sh
// and busybox, shellchecked by hack/verify.sh), and running them through an Executor: the
// exec per batch (Apply, with apply.sh's arguments as ApplyArgs and the archive as a reader),
// the kept-open stream per target that carries batch after batch, and sync-back's scans
// and downloads as run frames of their own (Streams: framing, acks, heartbeats, reconnect,
// fallback to an exec per batch), a listing (List), a dry run's
// read-only check (Preflight) and the on-sync command (RunOnSync), each with what it prints
// parsed; the deadline of a remote call (Limit, ExecWithin: an idle deadline that a transfer
// which keeps moving never runs into), the bound on concurrent calls (Bounded) and retries of
// transient failures (RetryPolicy); the classification of a failure into one line that says
// what to do (SyncError, Classify, IsTransient and the Err* sentinels); and the argv of a
// helper container that reaches its target's files through /proc (HelperArgv, HelperProbe).
// For --restart it owns the supervisor that becomes a container's command (SupervisorCommand,
// Supervised), the ask that makes it restart its child (RestartProcess), and the check and send
// of a signal to the main process (CheckSignal, SendSignal, CheckShell).
//
// It speaks in its own terms — a remote root, the script's arguments, an archive reader, the
// executor — and knows nothing of plans, indexes or mappings: hack/verify.sh keeps it from
// importing pkg/filesync, pkg/session, pkg/cmd and pkg/workload, and only it embeds the
// scripts. Its Executor is implemented over pods/exec by pkg/workload; tests run the real
// scripts on this machine with busybox and GNU tools (pkg/internal/localexec).
//
// The path a save takes, one line per package:
//
//	pkg/watch     sees the file change (the pkg/ignore matcher decides what is watched)
//	pkg/session   pumps it into the engine as a coalesce.Change
//	pkg/coalesce  cuts the changes into batches
//	pkg/filesync  plans each batch per target against the index, guards deletes, builds the tar
//	pkg/remote    turns the plan's arguments and the tar into apply.sh over a stream or an exec
//	pkg/workload  runs that exec over pods/exec (or through a helper container)
//	container     apply.sh checks, deletes, extracts with tar and acks
package remote
