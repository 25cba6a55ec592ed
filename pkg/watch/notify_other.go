//go:build !linux

package watch

import "github.com/rjeczalik/notify"

var watchEvents = []notify.Event{notify.All}

// describe can't tell directories from files here: a created or renamed
// path is marked created, and the watcher Lstats it to see whether it is a
// directory to walk.
func describe(ei eventInfo) eventFlags {
	return eventFlags{created: ei.Event()&(notify.Create|notify.Rename) != 0}
}

// probeWatch has nothing to probe: the silent ENOSPC it looks for is an
// inotify limit.
func probeWatch(string) error { return nil }

func burstLimit() int { return 8192 }
