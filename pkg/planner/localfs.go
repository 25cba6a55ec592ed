package planner

import "github.com/livesync-dev/kubectl-livesync/pkg/localtree"

// localSide is what plans consult about a directory mapping's local side
// besides its path: how to read it, what it was like when the mapping was
// created, and whether mass deletes are allowed.
type localSide struct {
	fsys localtree.FS // nil: the os package
	// foldCase: names under the root compare case-insensitively (macOS and
	// Windows defaults), so a path that Lstat finds may exist under another
	// case only; the planner then confirms names by listing their parent.
	foldCase bool
	// dev is the root's device (st_dev) when the mapping was created, if
	// devKnown: a different one later means something was mounted or
	// unmounted there.
	dev      uint64
	devKnown bool
	// allowMassDelete lifts the guards that hold deletes of an emptied root
	// and mass deletes (Config.AllowMassDelete).
	AllowMassDelete bool
}

// FS is how the local side is read: localtree.OS unless a test set one.
func (l *localSide) FS() localtree.FS {
	if l.fsys == nil {
		return localtree.OS{}
	}
	return l.fsys
}

// probeRoot fills in what is known about m's local root now: its device,
// and whether its file system folds case.
func (m *Resolved) probeRoot() {
	if m.File {
		return // a single file's own name never changes under the mapping
	}
	fi, err := m.FS().Stat(m.Root)
	if err != nil || !fi.IsDir() {
		m.foldCase = true // see localtree.FoldsCase: unsure means yes
		return
	}
	m.dev, m.devKnown = localtree.DeviceOf(fi)
	m.foldCase = localtree.FoldsCase(m.FS(), m.Root, fi)
}
