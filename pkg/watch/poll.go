package watch

import (
	"io/fs"
	"os"

	"k8s.io/utils/clock"
)

// fileState is what polling compares. Directories keep only mode and
// inode: their size and mtime change with every entry added or removed,
// which the entries' own states already report.
type fileState struct {
	size  int64
	mtime int64
	mode  fs.FileMode
	ino   uint64
}

func stateOf(fi fs.FileInfo) fileState {
	if fi.IsDir() {
		return fileState{mode: fi.Mode(), ino: inode(fi)}
	}
	return fileState{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: fi.Mode(), ino: inode(fi)}
}

// poller finds changes under one root by walking it and comparing states.
type poller struct {
	w    *watcher
	r    *watchRoot
	prev map[string]fileState

	// The directory root itself: whether it exists, and its inode.
	rootOK  bool
	rootIno uint64
}

// startPolling takes the first snapshot of r, so that any later change is
// reported, and then polls it every PollInterval until Close.
func (w *watcher) startPolling(r *watchRoot) {
	p := &poller{w: w, r: r}
	p.rootIno, p.rootOK = dirState(r.path)
	p.prev = p.scan()
	t := w.be.clock.NewTicker(w.opts.PollInterval) // before the goroutine: a fake clock may be stepped right away
	w.wg.Add(1)
	go p.run(t)
}

func (p *poller) run(t clock.Ticker) {
	defer p.w.wg.Done()
	defer t.Stop()
	for {
		select {
		case <-t.C():
			p.poll()
		case <-p.w.done:
			return
		}
	}
}

func (p *poller) poll() {
	if !p.r.file {
		switch ino, ok := dirState(p.r.path); {
		case !ok:
			// One hint for the root, not a deletion per entry: the
			// consumer finds the root gone, and syncs no deletes.
			if p.rootOK {
				p.w.q.push(item{root: p.r.idx, path: p.r.path, checked: true})
			}
			p.rootOK = false
			return
		case !p.rootOK || ino != p.rootIno:
			// Back, or another directory now: compare all of it.
			p.rootOK, p.rootIno = true, ino
			p.prev = p.scan()
			p.w.q.push(item{kind: kindRescan, root: p.r.idx})
			return
		}
	}
	cur := p.scan()
	changed := len(cur) != len(p.prev)
	for path, st := range cur {
		if old, ok := p.prev[path]; !ok || old != st {
			changed = true
			break
		}
	}
	p.prev = cur
	if changed {
		// A Rescan, not a hint per changed path. The consumer acts on a
		// hint later than this walk ran, and a hint for a new directory
		// makes it copy what the directory holds then, which this snapshot
		// may not have: an entry created after the walk, copied, and
		// deleted before the next walk is in neither snapshot, so no hint
		// would ever delete it in the container. Only a compare of the
		// whole tree with what was sent finds it; it costs the consumer
		// about what this walk cost.
		p.w.q.push(item{kind: kindRescan, root: p.r.idx})
	}
}

// scan walks the root, not descending into skipped directories. Entries
// that vanish or can't be read are left out: they show up as deleted, and
// the consumer finds out the rest with its own Lstat.
func (p *poller) scan() map[string]fileState {
	states := make(map[string]fileState, len(p.prev))
	if p.r.file {
		if fi, err := os.Lstat(p.r.path); err == nil {
			states[p.r.path] = stateOf(fi)
		}
		return states
	}
	var walk func(dir string)
	walk = func(dir string) {
		entries, _ := os.ReadDir(dir) // what it could read, even on error
		for _, e := range entries {
			path := join(dir, e.Name())
			isDir := e.IsDir()
			if p.w.skip(p.r, path, isDir) {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue
			}
			states[path] = stateOf(fi)
			if isDir {
				walk(path)
			}
		}
	}
	walk(p.r.path)
	return states
}

// join is filepath.Join without the Clean, for the walk's already clean
// paths.
func join(dir, name string) string {
	if os.IsPathSeparator(dir[len(dir)-1]) {
		return dir + name
	}
	return dir + string(os.PathSeparator) + name
}
