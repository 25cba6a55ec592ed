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
// touch are seen, and IN_CLOSE_WRITE, which says that a writer is done
// (Event.Progress). notify's Create already asks for IN_MOVED_TO.
var watchEvents = []notify.Event{notify.All, notify.InAttrib, notify.InCloseWrite}

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
	f.progress = progressOf(ie.Mask)
	return f
}

// progressOf reads an inotify mask as Event.Progress before writerCheck
// asks the kernel.
func progressOf(mask uint32) Progress {
	switch {
	case mask&(unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO|unix.IN_ATTRIB) != 0,
		mask&unix.IN_CREATE != 0 && mask&unix.IN_ISDIR != 0:
		return Complete
	case mask&(unix.IN_CREATE|unix.IN_MODIFY) != 0:
		return Writing
	}
	return Unknown
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

// writerCheck tells what the events of a file said (Writing or Complete)
// from the kernel's answer now: does any process have the file open for
// writing? The events can't be trusted for it: notify hands each event to
// its channel from a goroutine of its own, so a writer's IN_MODIFY often
// arrives after its IN_CLOSE_WRITE (82 of 300 saves in a test here), and a
// writer that closed, reopened and wrote again looks like a finished one.
// The kernel refuses a read lease (fcntl F_SETLEASE F_RDLCK) on a file that
// is open for writing anywhere (EAGAIN); we let go of the lease at once.
// The answer is current when the event is handed out: a writer that closes
// later sends an IN_CLOSE_WRITE, handed out after this one. Where the
// kernel can't tell (a file of another user without CAP_LEASE, a file
// system without leases) the events' reading stands. A symlink has no
// writer; a path gone is Unknown.
func writerCheck(path string, p Progress) Progress {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	switch {
	case errors.Is(err, unix.ELOOP):
		return Complete
	case errors.Is(err, unix.ENOENT):
		return Unknown
	case err != nil:
		return p
	}
	defer func() { _ = unix.Close(fd) }() // read-only: nothing to lose
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_RDLCK)
	switch {
	case errors.Is(err, unix.EAGAIN):
		return Writing
	case err != nil:
		return p
	}
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK)
	return Complete
}
