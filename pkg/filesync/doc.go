// Package filesync decides what to send into running containers and when: changes
// arrive cut into batches (pkg/coalesce), each batch is planned against what the target confirmed it holds
// (by Lstat at batch time, never by event type), guarded against mass deletes, and turned
// into one tar stream (pkg/tarstream) plus the paths to check, delete and chmod, which pkg/remote applies with
// apply.sh in the container, over a kept-open stream or an exec per batch.
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
//	pkg/filesync  plans each batch per target against the index, guards deletes, builds the tar
//	pkg/remote    turns the plan's arguments and the tar into apply.sh over a stream or an exec
//	pkg/workload  runs that exec over pods/exec (or through a helper container)
//	container     apply.sh checks, deletes, extracts with tar and acks
//
// Inside the package the files form layers; each uses only its own and those above it:
//
//	target.go paths.go localfs.go                    the local side: mappings and what a plan
//	                                                 reads of them (through pkg/localtree)
//	index.go                                         Entry, Index: what a target confirmed
//	conflict.go listing.go                           root type conflicts; a remote.Listing as rels
//	plan.go guard.go moves.go                        the planner and the guards it runs on a plan
//	start.go                                         a start against a saved ancestor (the
//	                                                 decision at each path is pkg/threeway's)
//	initial.go apply.go confirm.go                   an initial plan against a listing; a plan as
//	                                                 remote.ApplyArgs and a tarstream, and its
//	                                                 apply; what the index learns from an apply
//	                                                 or a listing
//	report.go progress.go                            events
//	engine.go worker.go batch.go held.go onsync.go   the engine: targets, workers, batches, held
//	  preflight.go visit.go delta.go batchgzip.go    deletes, on-sync and after-sync runs, a dry
//	                                                 run's checks, visits of a target's worker
//	                                                 and the upload guard (pkg/syncback); which
//	                                                 files go as patches (the rolling match is
//	                                                 pkg/delta's) and which batches gzipped
package filesync
