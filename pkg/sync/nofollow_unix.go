//go:build unix

package sync

import "syscall"

// oNoFollow makes opening a file that was replaced by a symlink fail instead of
// reading whatever the link points at.
const oNoFollow = syscall.O_NOFOLLOW
