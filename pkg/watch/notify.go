package watch

import (
	"time"

	"github.com/rjeczalik/notify"
	"k8s.io/utils/clock"
)

type eventInfo = notify.EventInfo

// eventFlags is what an event says about its path besides the path.
type eventFlags struct {
	isDir     bool // the path is a directory (only meaningful with dirKnown)
	dirKnown  bool // the platform told whether it is a directory
	created   bool // the path appeared: created or moved in
	movedAway bool // a directory was renamed away from the path
	gone      bool // the watched directory itself was deleted or renamed away
	removed   bool // the path was deleted (or, where that can't be told apart, renamed)
	progress  Progress
}

// selfGone reports whether an event for a watched directory itself says
// that it was deleted or renamed away: its watch now watches nothing.
func selfGone(ei eventInfo) bool {
	return ei.Event()&(notify.Remove|notify.Rename) != 0
}

func notifyBackend() backend {
	return backend{
		watch: func(path string, c chan<- eventInfo) error {
			return notify.Watch(path, c, watchEvents...)
		},
		stop:         notify.Stop,
		perDirectory: perDirectory,
		probe:        probeWatch,
		clock:        clock.RealClock{},
		burstLimit:   burstLimit(),
		burstWindow:  time.Second,
		settle:       time.Second,
	}
}
