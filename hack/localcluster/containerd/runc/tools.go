//go:build tools

// Package runc pins the local cluster's OCI runtime. It needs cgo and libseccomp (Debian's
// libseccomp-dev), unlike everything else the local cluster builds.
package runc

import _ "github.com/opencontainers/runc"
