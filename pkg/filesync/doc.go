// Package filesync copies local directories into running containers and keeps them
// in sync: changes are coalesced into batches, each batch is planned against
// what the target confirmed it holds (by Lstat at batch time, never by event
// type), turned into one tar stream plus a list of deletes, and applied with a
// single `sh -c` exec per batch, mapping and target (or a frame of a kept-open
// stream).
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
// The package owns no Kubernetes client: containers are reached through the
// Executor interface (the pods/exec implementation lives in pkg/workload), and
// file-system events arrive as Change values (pkg/cmd adapts watch.Event).
package filesync
