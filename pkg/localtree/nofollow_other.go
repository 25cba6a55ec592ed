//go:build !unix

package localtree

import "os"

// openFlags: without O_NOFOLLOW and O_NONBLOCK, the type check after open is
// what protects the archive writer.
const openFlags = os.O_RDONLY

func setBlocking(*os.File) error { return nil }
