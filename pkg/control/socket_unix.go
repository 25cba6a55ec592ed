//go:build !windows

package control

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
)

// Supported reports whether this platform has the control socket.
const Supported = true

func listen(path string) (net.Listener, error) {
	_ = os.Remove(path) // a leftover of a crashed session with the same name
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	// The directory is 0700 already; the socket is 0600 too, so a wider directory later does
	// not open it.
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

func dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

// owned refuses a directory another user owns: its owner could read every request.
func owned(dir string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("the session directory %q belongs to user %d, not to you (%d): remove it or set XDG_STATE_HOME", dir, st.Uid, os.Getuid())
	}
	return nil
}
