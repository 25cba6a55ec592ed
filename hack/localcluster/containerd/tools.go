//go:build tools

// Package containerd pins the local cluster's container runtime: containerd 2 (daemon, runc
// shim, ctr). It is a module of its own so that its dependencies never move Kubernetes'
// (../go.mod), and its binaries are cached apart from Kubernetes' (build.sh keys them by this
// directory's files). runc is in runc/, a module of its own again, so that it does not move
// containerd's dependencies either.
package containerd

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
