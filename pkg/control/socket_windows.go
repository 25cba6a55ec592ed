//go:build windows

package control

import (
	"context"
	"errors"
	"io/fs"
	"net"
)

// Supported reports whether this platform has the control socket: not on Windows yet, where it
// would be a named pipe.
const Supported = false

// ErrUnsupported is what listening and dialing return on Windows.
var ErrUnsupported = errors.New("the session's control socket is not supported on Windows yet")

func listen(string) (net.Listener, error) { return nil, ErrUnsupported }

func dial(context.Context, string) (net.Conn, error) { return nil, ErrUnsupported }

func owned(string, fs.FileInfo) error { return nil }
