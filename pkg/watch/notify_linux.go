package watch

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"github.com/rjeczalik/notify"
	"golang.org/x/sys/unix"
)

// watchEvents adds IN_ATTRIB to the portable events so that chmod +x and
// touch are seen.
var watchEvents = []notify.Event{notify.All, notify.InAttrib}

// describe reads the inotify mask, which says for free whether the path is
// a directory; that saves an Lstat per event and is the only way to know it
// for a path that is gone.
func describe(ei eventInfo) eventFlags {
	ie, ok := ei.Sys().(*unix.InotifyEvent)
	if !ok {
		return eventFlags{}
	}
	f := eventFlags{dirKnown: true, isDir: ie.Mask&unix.IN_ISDIR != 0}
	f.removed = ie.Mask&unix.IN_DELETE_SELF != 0 || f.isDir && ie.Mask&unix.IN_DELETE != 0
	if f.isDir {
		f.created = ie.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0
		f.movedAway = ie.Mask&unix.IN_MOVED_FROM != 0
	}
	return f
}

// probeWatch reports ENOSPC when the user can't add one more inotify watch,
// which is how a recursive notify.Watch that silently failed to watch part
// of a tree shows (notify #109). It uses its own short-lived inotify
// instance; when it can't get one (EMFILE), it can't tell and reports nil.
func probeWatch(dir string) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE); errors.Is(err, unix.ENOSPC) {
		return err
	}
	return nil
}

// burstLimit is the kernel's inotify queue length; see the package
// documentation.
func burstLimit() int {
	const fallback = 16384
	n := fallback
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 0 {
			n = v
		}
	}
	return n
}
