package watch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// watchRoot is one root given to New.
type watchRoot struct {
	idx  int
	path string // absolute, symlinks kept: what events report
	real string // symlinks resolved: what notify reports
	dir  string // the directory notify watches: real, or a file's parent
	file bool   // a single file: its parent directory is watched

	ch chan eventInfo // notify delivers here; nil if never watched with notify

	// Set in New, then owned by the pump goroutine:
	notifying bool   // notify watches the root; false once it is polled or lost
	ino       uint64 // the inode of dir that notify watches
	// watched holds each directory notify watches for the root (real
	// paths), with its inode; 0 once it was deleted, when notify keeps a
	// node for it that makes a new watch of that path a no-op.
	watched map[string]uint64
	lost    bool          // dir vanished or was replaced: waiting for it to be back
	await   chan struct{} // closed to stop awaitRoot's goroutine; nil when none runs
}

// dirState returns the inode of dir, following symlinks, and whether dir
// is a directory.
func dirState(dir string) (uint64, bool) {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return 0, false
	}
	return inode(fi), true
}

// present reports whether the directory the root needs exists. It reads
// only fields fixed in New, so any goroutine may call it.
func (r *watchRoot) present() bool {
	_, ok := dirState(r.dir)
	return ok
}

// rel returns p relative to the root, or "" for the root itself.
func (r *watchRoot) rel(p string) string {
	if len(p) <= len(r.path) {
		return ""
	}
	return strings.TrimPrefix(p[len(r.path):], string(os.PathSeparator))
}

// realPath maps a path under the root as the user named it to the path
// notify watches and reports.
func (r *watchRoot) realPath(p string) string {
	return filepath.Join(r.real, r.rel(p))
}

// userPath maps a path notify reported to the same path under the root as
// the user named it; ok is false for paths outside the root.
func (r *watchRoot) userPath(p string) (string, bool) {
	if r.file {
		return r.path, p == r.real
	}
	if p == r.real {
		return r.path, true
	}
	rest, ok := strings.CutPrefix(p, r.real)
	if !ok {
		return "", false
	}
	if !os.IsPathSeparator(r.real[len(r.real)-1]) { // the root "/" ends in one
		if rest == "" || !os.IsPathSeparator(rest[0]) {
			return "", false
		}
		rest = rest[1:]
	}
	return filepath.Join(r.path, rest), true
}

type watcher struct {
	opts  Options
	be    backend
	roots []*watchRoot
	q     *queue
	burst burst

	events chan Event
	errs   chan error
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once

	laterMu sync.Mutex
	later   map[itemKey]clock.Timer // chores waiting for things to settle
}

func newWatcher(roots []string, opts Options, be backend) (Watcher, error) {
	if opts.PollInterval <= 0 {
		opts.PollInterval = defaultPollInterval
	}
	if opts.Buffer <= 0 {
		opts.Buffer = defaultBuffer
	}
	w := &watcher{
		opts:   opts,
		be:     be,
		q:      newQueue(),
		burst:  burst{limit: be.burstLimit, window: be.burstWindow},
		events: make(chan Event, 128),
		errs:   make(chan error),
		done:   make(chan struct{}),
		later:  map[itemKey]clock.Timer{},
	}
	// All roots first: drain goroutines read w.roots.
	for i, root := range roots {
		r, err := resolveRoot(root)
		if err != nil {
			return nil, err
		}
		r.idx = i
		w.roots = append(w.roots, r)
	}
	for _, r := range w.roots {
		if be.watch == nil {
			w.startPolling(r)
			continue
		}
		if err := w.watchRoot(r); err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("watching %q: %w", r.path, err)
		}
	}
	w.wg.Add(1)
	go w.pump()
	return w, nil
}

func (w *watcher) Events() <-chan Event { return w.events }
func (w *watcher) Errors() <-chan error { return w.errs }

// Close stops notify and every goroutine of the Watcher, then closes the
// Events and Errors channels. It always returns nil.
func (w *watcher) Close() error {
	w.once.Do(func() {
		close(w.done)
		w.wg.Wait() // no goroutine may re-Watch after the Stop below
		w.laterMu.Lock()
		for _, t := range w.later {
			t.Stop()
		}
		w.laterMu.Unlock()
		for _, r := range w.roots {
			if r.notifying {
				w.be.stop(r.ch)
			}
		}
		close(w.events)
		close(w.errs)
	})
	return nil
}

// errReplaced says that the watched directory changed while notify set up
// its watch, which may be on the old one.
var errReplaced = errors.New("replaced while being watched")

// watchRoot starts notify on r. A root out of watches or descriptors falls
// back to polling, and one that is gone waits to be back (see lose); any
// other error is returned, with r neither watched nor polled.
func (w *watcher) watchRoot(r *watchRoot) error {
	err := w.startNotify(r)
	switch {
	case err == nil:
		w.stopAwaiting(r)
	case outOfResources(err):
		w.fallBack(r, err)
	case errors.Is(err, errReplaced) || !r.present():
		w.lose(r)
	default:
		return err
	}
	return nil
}

// startNotify watches r with notify: each directory of the tree that Skip
// leaves with a watch of its own, not recursive, so that ignored trees
// (node_modules) cost no inotify watch or kqueue descriptor, or the tree
// with one recursive watch where that costs one handle (see perDirectory);
// the parent directory for a file.
func (w *watcher) startNotify(r *watchRoot) error {
	if r.ch == nil {
		r.ch = make(chan eventInfo, w.opts.Buffer)
		w.wg.Add(1)
		go w.drain(r, r.ch)
	}
	r.ino, _ = dirState(r.dir) // before the watch: a later replacement is then seen
	r.watched = map[string]uint64{}
	var err error
	switch {
	case r.file:
		err = w.watchDir(r, r.dir)
	case w.be.perDirectory:
		err = w.watchTree(r, r.real)
	default:
		err = w.be.watch(filepath.Join(r.real, "..."), r.ch)
	}
	if err != nil {
		w.be.stop(r.ch) // the tree may have been watched in part
		r.watched = nil
		return err
	}
	r.notifying = true
	if !r.file { // kqueue: one more descriptor must be left for new files
		if err := w.be.probe(r.real); err != nil {
			return err
		}
	}
	if ino, ok := dirState(r.dir); !ok || ino != r.ino {
		return errReplaced
	}
	return nil
}

// watchDir adds a watch on the directory dir (a real path) alone.
func (w *watcher) watchDir(r *watchRoot, dir string) error {
	ino, _ := dirState(dir) // before the watch: a replacement after it is then seen
	if err := w.be.watch(dir, r.ch); err != nil {
		return err
	}
	r.watched[dir] = ino
	return nil
}

// watchTree watches top (a real path) and each directory under it that
// Skip leaves, each before it is read, so that what a walk of it misses
// has an event. Running out of watches or descriptors stops it with the
// error; a directory below top that can't be watched (gone already,
// unreadable) is left out, as a recursive watch would.
func (w *watcher) watchTree(r *watchRoot, top string) error {
	return filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil && p == top:
			return err
		case err != nil || !d.IsDir():
			return nil
		}
		if p != r.real {
			if up, ok := r.userPath(p); ok && w.skip(r, up, true) {
				return filepath.SkipDir
			}
		}
		if err := w.watchDir(r, p); err != nil && (p == top || outOfResources(err)) {
			return err
		}
		return nil
	})
}

// staleDir reports whether notify's node for the directory dir (a real
// path) is stale: dir was watched, then deleted or replaced. notify keeps
// the node after the kernel dropped its watch and treats a new watch of
// the path as a no-op, so only a rebuild of the root's watches watches the
// new directory.
func (r *watchRoot) staleDir(dir string) bool {
	old, ok := r.watched[dir]
	if !ok {
		return false
	}
	ino, _ := dirState(dir)
	return old == 0 || old != ino
}

// fallBack switches r to polling after its notify watch ran out of inotify
// watches or file descriptors, and says so on Errors.
func (w *watcher) fallBack(r *watchRoot, err error) {
	if r.notifying {
		w.be.stop(r.ch)
		r.notifying = false
	}
	w.stopAwaiting(r)
	w.q.pushErr(&fallbackError{root: r.path, interval: w.opts.PollInterval, err: err})
	w.startPolling(r)
}

// lose stops notify on r, whose watched directory is gone or is another
// one now: a watch stays on the inode it was set on, so it would report
// nothing more. A hint for the root tells the consumer; once the directory
// exists again, rewatch watches it afresh and sends a Rescan.
func (w *watcher) lose(r *watchRoot) {
	if r.notifying {
		w.be.stop(r.ch)
		r.notifying = false
	}
	r.lost = true
	w.q.push(item{root: r.idx, path: r.path, checked: true})
	if r.present() { // replaced, not removed: no need to wait
		w.q.push(item{kind: kindRewatch, root: r.idx})
		return
	}
	w.awaitRoot(r)
}

// awaitRoot asks for a rewatch of r each PollInterval once its directory
// exists, until stopAwaiting. A stat per interval costs less than watching
// the ancestors, which may themselves go and come back.
func (w *watcher) awaitRoot(r *watchRoot) {
	if r.await != nil {
		return
	}
	stop := make(chan struct{})
	r.await = stop
	t := w.be.clock.NewTicker(w.opts.PollInterval) // before the goroutine: a fake clock may be stepped right away
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer t.Stop()
		for {
			select {
			case <-t.C():
				if r.present() {
					w.q.push(item{kind: kindRewatch, root: r.idx})
				}
			case <-stop:
				return
			case <-w.done:
				return
			}
		}
	}()
}

// stopAwaiting ends r's wait for its directory, if any.
func (w *watcher) stopAwaiting(r *watchRoot) {
	r.lost = false
	if r.await != nil {
		close(r.await)
		r.await = nil
	}
}

// drain moves events from notify's channel into the queue and does nothing
// slow, because notify drops what doesn't fit in ch.
func (w *watcher) drain(r *watchRoot, ch <-chan eventInfo) {
	defer w.wg.Done()
	for {
		select {
		case ei := <-ch:
			// Only a full channel drops events, and this goroutine is its
			// only reader: full before this receive means maybe dropped.
			if len(ch) >= cap(ch)-1 {
				w.q.push(item{kind: kindRescan, root: r.idx})
			}
			if w.burst.add(w.be.clock.Now()) {
				for _, r := range w.roots {
					w.q.push(item{kind: kindRescan, root: r.idx})
				}
			}
			if ei.Path() == r.dir {
				// Deleted or renamed away (IN_DELETE_SELF, IN_MOVE_SELF), or
				// touched, when only a stat can tell. Queued before the
				// hint, so the consumer gets the hint after the check.
				w.q.push(item{kind: kindCheckRoot, root: r.idx, eventFlags: eventFlags{gone: selfGone(ei)}})
			}
			p, ok := r.userPath(ei.Path())
			if !ok {
				continue
			}
			it := item{root: r.idx, path: p, eventFlags: describe(ei)}
			if p == r.path {
				it.eventFlags = eventFlags{progress: it.progress} // never walk or rewatch the root for its own events
			}
			w.q.push(it)
		case <-w.done:
			return
		}
	}
}

// pump hands queued hints and errors to the consumer.
func (w *watcher) pump() {
	defer w.wg.Done()
	var next Event
	var have bool
	for {
		if !have {
			next, have = w.nextEvent()
		}
		var events chan<- Event
		if have {
			events = w.events
		}
		var errs chan<- error
		err, haveErr := w.q.peekErr()
		if haveErr {
			errs = w.errs
		}
		select {
		case events <- next:
			have = false
		case errs <- err:
			w.q.dropErr()
		case <-w.q.ready:
		case <-w.done:
			return
		}
	}
}

// nextEvent pops items until one becomes an Event, doing on the way what
// items ask for: filtering, walking new directories, repairing watches.
func (w *watcher) nextEvent() (Event, bool) {
	for {
		it, ok := w.q.pop()
		if !ok {
			return Event{}, false
		}
		r := w.roots[it.root]
		switch it.kind {
		case kindRescan:
			return Event{Root: r.path, Path: r.path, Rescan: true}, true
		case kindRewalk:
			w.walkNew(r, it.path)
			continue
		case kindRewatch:
			if r.notifying || r.lost {
				w.rewatch(r)
			}
			continue
		case kindCheckRoot:
			// Only the event can tell a directory deleted and created
			// again at once: the new one may get the same inode.
			if ino, ok := dirState(r.dir); r.notifying && (it.gone || !ok || ino != r.ino) {
				w.lose(r)
			}
			continue
		}
		if it.created && !it.dirKnown {
			fi, err := os.Lstat(it.path)
			it.isDir = err == nil && fi.IsDir()
		}
		if !it.checked && w.skip(r, it.path, it.isDir) {
			continue
		}
		if it.movedAway && r.notifying {
			// Rebuilding costs a walk of the whole tree: once per burst of
			// renames (npm renames thousands of directories) is enough.
			w.afterSettling(item{kind: kindRewatch, root: r.idx})
		}
		if it.removed && r.notifying {
			if _, ok := r.watched[r.realPath(it.path)]; ok {
				r.watched[r.realPath(it.path)] = 0
			}
		}
		if it.created && it.isDir && r.notifying {
			if err := w.watchNew(r, it.path); err != nil {
				w.fallBack(r, err)
				w.q.push(item{kind: kindRescan, root: r.idx})
			} else {
				w.walkNew(r, it.path)
				w.rewalkLater(r, it.path)
			}
		}
		if it.progress != Unknown && !it.isDir {
			if it.progress = writerCheck(it.path, it.progress); it.progress == Writing {
				w.recheckLater(it)
			}
		}
		return Event{Root: r.path, Path: it.path, Progress: it.progress}, true
	}
}

// watchNew watches a directory that appeared under r, and the directories
// in it, and returns an error only when r must fall back to polling.
func (w *watcher) watchNew(r *watchRoot, dir string) error {
	if err := w.be.probe(dir); outOfResources(err) {
		return err
	}
	if !w.be.perDirectory {
		return nil // notify's recursive watch covers it
	}
	real := r.realPath(dir)
	if r.staleDir(real) {
		w.afterSettling(item{kind: kindRewatch, root: r.idx})
	}
	if err := w.watchTree(r, real); outOfResources(err) {
		return err
	}
	return nil // gone already, or unreadable: its own event or the walk says so
}

// Refresh makes the Watcher ask Options.Skip again which directories under
// root to watch, after its answers changed (an ignore file was edited),
// and then send a Rescan of root. It doesn't wait for either; a root that
// wasn't given to New is ignored.
func (w *watcher) Refresh(root string) {
	for _, r := range w.roots {
		if r.path == root {
			if !r.file && w.be.perDirectory {
				w.q.push(item{kind: kindRewatch, root: r.idx}) // it sends the Rescan; queued first, so the Rescan below waits for it
			}
			w.q.push(item{kind: kindRescan, root: r.idx})
		}
	}
}

func (w *watcher) skip(r *watchRoot, p string, isDir bool) bool {
	if w.opts.Skip == nil || r.file || p == r.path {
		return false
	}
	return w.opts.Skip(r.path, filepath.ToSlash(r.rel(p)), isDir)
}

// walkNew queues everything inside a directory that just appeared. Files
// created in it before notify added its watch have no event of their own,
// nor has anything inside a directory moved into the tree.
func (w *watcher) walkNew(r *watchRoot, dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil && p == dir:
			return err // gone already: its own event says so
		case err != nil || p == dir:
			return nil
		}
		isDir := d.IsDir()
		if w.skip(r, p, isDir) {
			if isDir {
				return filepath.SkipDir
			}
			return nil
		}
		w.q.push(item{root: r.idx, path: p, eventFlags: eventFlags{isDir: isDir, dirKnown: true}, checked: true})
		return nil
	})
}

// rewalkLater queues a second walk of a new directory for when notify has
// surely added its watch, unless one is due for an ancestor already.
func (w *watcher) rewalkLater(r *watchRoot, dir string) {
	w.laterMu.Lock()
	for p := dir; len(p) > len(r.path); p = filepath.Dir(p) {
		if _, ok := w.later[itemKey{kindRewalk, r.idx, p}]; ok {
			w.laterMu.Unlock()
			return
		}
	}
	w.laterMu.Unlock()
	w.afterSettling(item{kind: kindRewalk, root: r.idx, path: dir, checked: true})
}

// recheckDelays are when a path whose writer check said Writing is checked
// again, each after the one before, while no event of it came meanwhile.
var recheckDelays = []time.Duration{time.Millisecond, 5 * time.Millisecond, 25 * time.Millisecond}

// recheckLater checks the writer of it's path again soon, and hands the
// path out once more with the answer. The kernel queues a writer's
// IN_CLOSE_WRITE before it drops the file's count of writers, so a check
// made as the event arrives can still find the writer there: no event
// follows, and the path would wait as Writing for the coalescer's cap (1 s;
// one or two files of every 50-file burst did). A writer that is really
// still there says Writing to each check, and its close sends an event of
// its own.
func (w *watcher) recheckLater(it item) {
	if int(it.recheck) >= len(recheckDelays) {
		return
	}
	w.laterMu.Lock()
	defer w.laterMu.Unlock()
	k := itemKey{kindRecheck, it.root, it.path}
	if _, ok := w.later[k]; ok {
		return
	}
	again := item{kind: kindPath, root: it.root, path: it.path, checked: true, recheck: it.recheck + 1,
		eventFlags: eventFlags{dirKnown: true, progress: Writing}}
	w.later[k] = w.be.clock.AfterFunc(recheckDelays[it.recheck], func() {
		w.laterMu.Lock()
		delete(w.later, k)
		w.laterMu.Unlock()
		w.q.push(again)
	})
}

// afterSettling queues it once the settle time has passed, unless the same
// chore is waiting already.
func (w *watcher) afterSettling(it item) {
	w.laterMu.Lock()
	defer w.laterMu.Unlock()
	k := it.key()
	if _, ok := w.later[k]; ok {
		return
	}
	w.later[k] = w.be.clock.AfterFunc(w.be.settle, func() {
		w.laterMu.Lock()
		delete(w.later, k)
		w.laterMu.Unlock()
		w.q.push(it)
	})
}

// rewatch rebuilds r's notify watch after a directory was renamed away, or
// watches r's directory again once it is back after it was lost. notify
// keeps a renamed directory's old name in its tree, so a directory created
// there later would get no watch (notify #227); a fresh watch walks what is
// on disk now. Events are lost while the watch is rebuilt or was lost, and
// until then for such a directory, hence the Rescan.
func (w *watcher) rewatch(r *watchRoot) {
	if r.lost && !r.present() {
		return // gone again: awaitRoot asks once more when it is back
	}
	if r.notifying {
		w.be.stop(r.ch)
		r.notifying = false
	}
	if err := w.watchRoot(r); err != nil {
		w.stopAwaiting(r)
		w.q.pushErr(fmt.Errorf("watching %q again: %w; falling back to polling every %s",
			r.path, err, w.opts.PollInterval))
		w.startPolling(r)
	}
	w.q.push(item{kind: kindRescan, root: r.idx})
}
