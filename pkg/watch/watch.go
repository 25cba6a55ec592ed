// Package watch turns file system changes under a set of roots into a
// stream of hints: "something at this path may have changed". It is the only
// importer of github.com/rjeczalik/notify.
//
// Events are hints, not facts. They carry no operation, may come out of
// order, twice, or for paths that no longer exist; the consumer decides
// what to do by looking at the file system (Lstat) when it handles a batch.
// On Linux they also say whether the change is over (Event.Progress: a
// writer closed the file, or still has it open), which the coalescer uses
// to send a save at once instead of after a quiet window.
// When events may have been lost, the Watcher says so with a Rescan event
// and the consumer must compare the whole root.
//
// # Where events get lost, and what the Watcher does about it
//
// notify drops an event when the channel it delivers to is full, and
// swallows the kernel's IN_Q_OVERFLOW. The Watcher drains notify's channel
// in a goroutine that does nothing else, into an unbounded de-duplicating
// queue, and emits Rescan for a root when either
//
//   - notify's channel was full just before a receive (len(ch) >= cap-1
//     right after it): only a full channel drops, and the drainer is its
//     only reader, so every drop is followed by such a receive. This check
//     has no false negatives; with Options.Buffer of 1 every event trips it.
//   - at least max_queued_events events (16384 by default) from all roots
//     arrive within one second, counted in a sliding window: the kernel
//     queue can only overflow after max_queued_events events pile up
//     unread, and notify delivers such a backlog within well under a
//     second, so all of it falls into one window. notify drops the
//     kernel's IN_Q_OVERFLOW itself (watcher_inotify.go, transform), so
//     this is the only sign of it. A burst below the limit is delivered as
//     hints, no Rescan; a faster writer trips this too; a spurious Rescan
//     costs a walk, a missed one a stale file. Elsewhere the limit is 8192.
//
// A queued Rescan covers the root's other hints, but they are delivered
// too, before and after it (up to 64 Ki queued items; beyond that they are
// dropped), so that the consumer can act on them before it compares the
// whole root.
//
// # What is watched
//
// Where notify's recursive watch is a watch per directory anyway (inotify,
// kqueue), it can't leave out ignored trees: a node_modules of 5,000
// directories cost 5,000 inotify watches, and on macOS without cgo (the
// release build) a descriptor per file. There the Watcher watches each
// directory that Options.Skip leaves with a non-recursive watch of its
// own, adds a watch for each new directory before walking it, and
// Refresh rebuilds the watches after an ignore file changed what Skip
// answers. Where notify watches trees natively (Windows, macOS with cgo:
// one handle for the tree) it keeps the recursive watch, and Skip drops
// ignored trees' events before they become Events.
//
// notify's watches also have races and blind spots, handled here:
//
//   - files created in a new directory before it is watched produce no
//     event, and a directory moved into the tree produces one event for
//     itself only: every new directory is walked and its entries are
//     emitted (notify issue #172). A recursive watch adds the watch in a
//     goroutine of its own, so a file can still slip in between that walk
//     and the watch: the directory is walked again a second later (one
//     walk per new subtree);
//   - a directory renamed away keeps a stale node in notify's tree, so a
//     directory later created under the old name is never watched (notify
//     #227); the same goes for a deleted directory watched on its own: the
//     root's watches are rebuilt a second after the rename, or after the
//     directory came back (once for a burst), followed by a Rescan;
//   - running out of inotify watches is not reported by a recursive watch
//     (notify #109): after setting up a root, and for each new directory,
//     the Watcher probes whether one more watch can be added; when it
//     can't, or a watch of a directory of its own fails with ENOSPC,
//     EMFILE or ENFILE, the root falls back to polling and Errors reports
//     ErrOutOfWatches. kqueue (macOS without cgo, the BSDs) needs a file
//     descriptor per watched file and directory: there the probe opens one
//     more descriptor;
//   - a watch follows the inode, not the name: once the root is deleted or
//     renamed (`rm -rf dist && tsc`), it watches nothing. An event for the
//     watched directory itself makes the Watcher check that it is still the
//     one watched; when it is not, the Watcher waits for the path to exist
//     again (a stat per PollInterval), watches it afresh and sends a Rescan.
//     A polled root is checked the same way on each walk.
//
// Polling, too, doesn't descend into directories Skip leaves out. A walk that
// finds anything changed sends a Rescan of its root rather than a hint per
// path: the consumer acts on hints after the walk, and a hint for a new
// directory makes it copy what the directory holds by then, which may include
// an entry created after the walk and deleted before the next one; no later
// walk would hint that delete, while a compare with what was sent finds it.
package watch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// Event is a hint that something under Root changed at Path.
//
// Root is one of the roots given to New, made absolute but with symlinks
// kept as the caller named them; Path is an absolute path under Root, or
// Root itself. Rescan means events may have been lost: the consumer must
// rescan Root (Path == Root) after receiving it. Hints that the Rescan made
// redundant are not sent. A root that is deleted gets a hint for Root, and
// a Rescan once it exists again.
//
// Progress is what the event says about whether the change at Path is over.
type Event struct {
	Root, Path string
	Rescan     bool
	Progress   Progress
}

// Progress says whether a change is over, as far as the kernel told.
// Events merged for one path keep the highest.
type Progress uint8

const (
	// Unknown: nothing told, or the path went away (deleted or renamed:
	// an editor's atomic save does that just before it writes the file
	// again). Walks, polls, macOS and Windows say Unknown.
	Unknown Progress = iota
	// Writing: a file was created or modified (inotify: IN_CREATE,
	// IN_MODIFY) and, when the event was handed out, some process had it
	// open for writing (see writerCheck in notify_linux.go).
	Writing
	// Complete: a writer closed the file (IN_CLOSE_WRITE) or a file was
	// created, modified or given new attributes (IN_ATTRIB: tar and vim set
	// the mode and mtime after the close) and nobody had it open for
	// writing any more when the event was handed out; a file or directory
	// was moved in (IN_MOVED_TO); a directory was created or its attributes
	// changed.
	Complete
)

// Watcher delivers change hints for a set of roots.
//
// Both channels must be drained; neither blocks the other. Close stops the
// Watcher and then closes both channels.
type Watcher interface {
	Events() <-chan Event
	Errors() <-chan error
	// Refresh says that what Options.Skip answers for root changed (an
	// ignore file was edited): the Watcher watches the directories it
	// leaves now, and only those, then sends a Rescan of root. It doesn't
	// block; a root not given to New is ignored.
	Refresh(root string)
	Close() error
}

// Options configures a Watcher. The zero value is usable.
type Options struct {
	// Skip reports whether a path is ignored: no events are sent for it,
	// a skipped directory gets no watch (see the package documentation),
	// and walks (polling, new directories) don't descend into it. When its
	// answers change, call Watcher.Refresh. rel is slash-separated and relative to root (the root as
	// given in Event.Root); isDir is false when unknown, as for a deleted
	// path on platforms without that information. It may be called from
	// several goroutines at once. Roots that are single files aren't passed
	// to Skip.
	Skip func(root, rel string, isDir bool) bool
	// PollInterval is how often a polling watcher walks its roots: those
	// from NewPolling, and roots that fell back to polling. Default 1s.
	PollInterval time.Duration
	// Buffer is the size of the channel notify delivers to, per root.
	// Default 4096. Smaller buffers trip the overflow check sooner.
	Buffer int
}

const (
	defaultPollInterval = time.Second
	defaultBuffer       = 4096
)

// ErrOutOfWatches is matched (with errors.Is) by the error a Watcher
// reports when a root fell back to polling because the user ran out of
// inotify watches (ENOSPC) or of file descriptors (EMFILE, ENFILE), which
// the watch needs. The error also matches the errno.
var ErrOutOfWatches = errors.New("out of inotify watches or file descriptors")

// outOfResources reports whether a watch or a probe failed for want of
// inotify watches or file descriptors: polling needs neither.
func outOfResources(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// fallbackError is reported on Errors when a root falls back to polling.
type fallbackError struct {
	root     string
	interval time.Duration
	err      error // what the watch or the probe returned: ENOSPC, EMFILE or ENFILE
}

func (e *fallbackError) Error() string {
	why := `out of inotify watches: raise it with "sudo sysctl fs.inotify.max_user_watches=524288"`
	switch {
	case errors.Is(e.err, syscall.EMFILE):
		why = `out of file descriptors (on macOS each watched file needs one): raise the limit, e.g. "ulimit -n 65536", and restart`
	case errors.Is(e.err, syscall.ENFILE):
		why = "the system's open file table is full: close other programs, or raise the system limit (kern.maxfiles on macOS, fs.file-max on Linux)"
	}
	return fmt.Sprintf("watching %q: %s; falling back to polling every %s", e.root, why, e.interval)
}

func (e *fallbackError) Is(target error) bool { return target == ErrOutOfWatches }
func (e *fallbackError) Unwrap() error        { return e.err }

// New watches each root with notify, each directory that Options.Skip
// leaves (see the package documentation), and returns once the watches
// are set up: a change made after New returns produces an event.
// A root may be a directory or a single file, relative or absolute, and may
// be or contain symlinks. A root that runs out of inotify watches is polled
// instead, and Errors reports it.
func New(roots []string, opts Options) (Watcher, error) {
	return newWatcher(roots, opts, notifyBackend())
}

// NewPolling watches roots by walking them every Options.PollInterval and
// comparing size, modification time, mode and inode; it returns once the
// first walk is done. It costs a walk per interval but no inotify watches.
func NewPolling(roots []string, opts Options) (Watcher, error) {
	be := notifyBackend()
	be.watch = nil
	return newWatcher(roots, opts, be)
}

// resolveRoot makes root absolute and finds the real path notify will
// report events under.
func resolveRoot(root string) (*watchRoot, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("watching %q: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("watching %q: %w", root, err)
	}
	r := &watchRoot{path: abs, file: !fi.IsDir()}
	if r.file {
		// Watch the directory entry itself: an editor that saves by
		// renaming over a symlink replaces the link, not its target.
		dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
		if err != nil {
			return nil, fmt.Errorf("watching %q: %w", root, err)
		}
		r.real, r.dir = filepath.Join(dir, filepath.Base(abs)), dir
		return r, nil
	}
	if r.real, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("watching %q: %w", root, err)
	}
	r.dir = r.real
	return r, nil
}

// backend holds what the watcher needs from the outside world, so tests
// can replace notify and the clock.
type backend struct {
	// watch and stop are notify.Watch and notify.Stop, with the events to
	// watch already chosen. A nil watch means: poll every root.
	watch func(path string, c chan<- eventInfo) error
	stop  func(c chan<- eventInfo)
	// probe reports ENOSPC when no further inotify watch can be added,
	// EMFILE or ENFILE when no further descriptor can be opened.
	probe func(dir string) error
	clock clock.WithTickerAndDelayedExecution
	// perDirectory: watch each directory the Skip leaves on its own, not
	// the tree with one recursive watch.
	perDirectory bool
	// settle is how long after a new directory appeared it is walked a
	// second time.
	settle time.Duration
	// burstLimit is the event count per burstWindow that counts as a
	// possible kernel queue overflow.
	burstLimit  int
	burstWindow time.Duration
}
