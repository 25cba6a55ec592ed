//go:build tools

// Package tools pins crictl, used by the local cluster's teardown to remove pod sandboxes.
package tools

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
