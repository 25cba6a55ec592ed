// Package planner decides what to send into a container and what to delete
// there, from the local tree and what the container confirmed.
//
// It holds a mapping resolved against the local disk (Resolve), the
// confirmed Index of one target, a batch's Plan by Lstat at planning time
// (Changes), the guards that hold deletes that could lose files (a missing
// or emptied root, a mass delete, a delete burst cut into batches), an
// initial sync's plan against a container listing (Initial) and a start's
// three-way pass against a saved ancestor (ThreeWay; the decision at each
// path is pkg/threeway's).
//
// It sends nothing and keeps no target: pkg/filesync's engine runs its plans
// (ScriptArgs and TarFiles say what they mean for apply.sh and the tar
// stream) and tells the Index what the container confirmed (Index.Apply,
// Index.Unconfirm, Index.Reconcile). The only exec it makes is the read-only
// listing of a container (ListRemote, HashUnsure).
//
// The files form layers; each uses only its own and those above it:
//
//	paths.go localfs.go            mappings and what a plan reads of the local
//	                               side (through pkg/localtree)
//	index.go                       Entry, Index: what a target confirmed
//	conflict.go listing.go         root type conflicts; a remote.Listing as rels
//	plan.go guard.go moves.go      a batch's plan and the guards it runs on it;
//	                               copies the container already holds
//	initial.go start.go            an initial plan against a listing; a start
//	                               against a saved ancestor
//	args.go confirm.go             a plan as apply.sh's arguments and tar files;
//	                               what the index learns from an apply or a
//	                               listing
package planner
