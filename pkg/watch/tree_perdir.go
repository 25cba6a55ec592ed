//go:build !windows && !(darwin && cgo && !kqueue)

package watch

// perDirectory is true where notify's recursive watch is a watch per
// directory anyway (inotify; kqueue on macOS without cgo and the BSDs,
// which also holds a descriptor per file): the Watcher then watches each
// directory Options.Skip leaves on its own, so ignored trees cost nothing.
const perDirectory = true
