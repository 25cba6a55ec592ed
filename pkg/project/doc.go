// Package project reads and writes livesync.yaml, the file a team commits to keep its dev loop:
// a list of syncs, each with what the command line takes for one workload (workload or
// selector, namespace, containers, mappings, excludes, --on-sync, --initial, --follow-tag, pull
// policy). It is Kubernetes-style (apiVersion, kind) so it can evolve, decoded strictly (an
// unknown field or a wrong type is an error naming the line and the field), and described by a
// JSON Schema generated from these types (Schema) so editors complete and validate it.
//
// The name follows skaffold.yaml and devspace.yaml: the tool's name at the repository root,
// found from the current directory or a parent, the way git finds .git.
package project
