package watch

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"

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
// of a tree shows (notify #109). It adds a watch to an inotify instance of
// its own, kept for the process, and removes it at once: closing an inotify
// instance waits for the kernel's RCU grace period (13 ms measured here), so
// an instance per probe made a burst of 500 new directories wait 6.5 s for
// their watches. When it can't get an instance (EMFILE), it can't tell and
// reports nil.
func probeWatch(dir string) error {
	probe.Lock()
	defer probe.Unlock()
	if probe.fd <= 0 {
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
		if err != nil {
			return nil // tried again next time
		}
		probe.fd = fd
	}
	wd, err := unix.InotifyAddWatch(probe.fd, dir, unix.IN_CREATE)
	if errors.Is(err, unix.ENOSPC) {
		return err
	}
	if err == nil {
		_, _ = unix.InotifyRmWatch(probe.fd, uint32(wd))
	}
	return nil
}

// probe is probeWatch's inotify instance (0 until the first probe).
var probe struct {
	sync.Mutex
	fd int
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
