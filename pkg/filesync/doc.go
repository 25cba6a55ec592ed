// Package filesync is the engine that syncs into running containers, each
// target with a worker of its own.
//
// Changes arrive cut into batches (pkg/coalesce), each batch is planned per target by
// pkg/planner against what the target confirmed it holds (by Lstat at batch
// time, never by event type, with the guards against mass deletes), and sent
// as one tar stream (pkg/tarstream) plus the paths to check, delete and chmod,
// which pkg/remote applies with apply.sh in the container, over a kept-open
// stream or an exec per batch. The engine keeps the targets, their workers,
// held deletes, retries and the confirmed index of each.
//
// The rule every decision rests on: a target's Index records only what the
// container confirmed. An apply that did not end in the container's own
// "applied" (a lost ack, a retry budget spent while the apiserver was down, a
// tar error after the deletes ran) leaves every path its plan touched stale,
// sent or deleted again whatever the local tree does meanwhile; a large one is
// settled against a fresh listing first. So "local equals index" means "the
// container holds the local state", and the index is the ancestor later
// decisions compare against.
//
// The package owns neither a Kubernetes client nor the container side: containers are
// reached through remote.Executor (the pods/exec implementation lives in pkg/workload),
// everything that runs in them is pkg/remote's, and file-system events arrive as Change
// values (pkg/session adapts watch.Event).
//
// The path a save takes, one line per package:
//
//	pkg/watch     sees the file change (the pkg/ignore matcher decides what is watched)
//	pkg/session   pumps it into the engine as a coalesce.Change
//	pkg/coalesce  cuts the changes into batches
//	pkg/filesync  plans each batch per target against the index (pkg/planner), builds the tar
//	pkg/remote    turns the plan's arguments and the tar into apply.sh over a stream or an exec
//	pkg/workload  runs that exec over pods/exec (or through a helper container)
//	container     apply.sh checks, deletes, extracts with tar and acks
//
// Inside the package the files form layers; each uses only its own and those above it:
//
//	target.go ancestry.go                            targets; saved ancestors and a start's event
//	apply.go                                         a plan on its way into a target, and its apply
//	report.go progress.go                            events
//	engine.go worker.go batch.go held.go onsync.go   the engine: targets, workers, batches, held
//	  preflight.go visit.go delta.go batchgzip.go    deletes, on-sync and after-sync runs, a dry
//	                                                 run's checks, visits of a target's worker
//	                                                 and the upload guard (pkg/syncback); which
//	                                                 files go as patches (the rolling match is
//	                                                 pkg/delta's) and which batches gzipped
package filesync
