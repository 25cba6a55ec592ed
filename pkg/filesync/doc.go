// Package filesync copies local directories into running containers and keeps them
// in sync: changes are coalesced into batches, each batch is planned against
// what was last sent to a target (by Lstat at batch time, never by event type),
// turned into one tar stream plus a list of deletes, and applied with a single
// `sh -c` exec per batch, mapping and target.
//
// The package owns no Kubernetes client: containers are reached through the
// Executor interface (the pods/exec implementation lives in pkg/workload), and
// file-system events arrive as Change values (pkg/cmd adapts watch.Event).
package filesync
