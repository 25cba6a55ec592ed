// Package localtree is the local side of a mapping, below the planner: slash
// paths relative to a root (rels) and the checks that keep them under it,
// reads that never follow a symlink and never block on a FIFO, what a file's
// stat says (device, owner, whether the file system folds case), and the set
// of files that could not be read, held until their stat changes.
//
// It knows nothing of containers, plans or indexes: pkg/filesync reads the
// local tree through it.
package localtree
