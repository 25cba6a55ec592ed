//go:build windows || (darwin && cgo && !kqueue)

package watch

// perDirectory is false where notify watches trees natively
// (ReadDirectoryChangesW on Windows, FSEvents on macOS with cgo): a watch
// of a directory there covers its subdirectories' events only when it is
// recursive, and notify folds the watch of a subdirectory into its
// parent's. One recursive watch costs one handle, not one per directory;
// Options.Skip drops the events of ignored trees before they become
// Events.
const perDirectory = false
