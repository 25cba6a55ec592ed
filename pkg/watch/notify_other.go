//go:build !linux

package watch

import (
	"errors"
	"os"
	"syscall"

	"github.com/rjeczalik/notify"
)

var watchEvents = []notify.Event{notify.All}

// describe can't tell directories from files here: a created or renamed
// path is marked created, and the watcher Lstats it to see whether it is a
// directory to walk; a removed or renamed one is marked removed, so that a
// directory created again under that name is watched again.
func describe(ei eventInfo) eventFlags {
	return eventFlags{
		created: ei.Event()&(notify.Create|notify.Rename) != 0,
		removed: ei.Event()&(notify.Remove|notify.Rename) != 0,
	}
}

// probeWatch reports EMFILE or ENFILE when no further file descriptor can
// be opened. kqueue (macOS without cgo, the BSDs) holds one per watched
// file and directory, and notify drops the error of each one it could not
// open below the root (its recursive watch ignores them), so the root
// would silently be watched in part.
func probeWatch(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			return err
		}
		return nil // gone or unreadable: the watch and the walks say so
	}
	_ = f.Close() // read-only: nothing to lose
	return nil
}

func burstLimit() int { return 8192 }

// writerCheck keeps what the events said: they say Unknown here.
func writerCheck(_ string, p Progress) Progress { return p }
