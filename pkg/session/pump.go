package session

import (
	"context"
	"os"
	"path/filepath"

	"github.com/livesync-dev/kubectl-livesync/pkg/coalesce"
	"github.com/livesync-dev/kubectl-livesync/pkg/ignore"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/watch"
)

// newMatchers returns the mappings' local roots and, for each root that is a directory, what
// to ignore under it.
func newMatchers(cfg Config) ([]string, []planner.Matcher, error) {
	matchers := make([]planner.Matcher, len(cfg.Sync.Mappings))
	var roots []string
	for i, m := range cfg.Sync.Mappings {
		roots = append(roots, string(m.Local))
		if isDir(string(m.Local)) {
			mt, err := ignore.New(string(m.Local), ignore.Options{Excludes: cfg.Excludes, GitIgnore: cfg.GitIgnore})
			if err != nil {
				return nil, nil, err
			}
			matchers[i] = mt
		}
	}
	return roots, matchers, nil
}

// skipper adapts the per-root matchers to the watcher's Skip hook.
func skipper(roots []string, matchers []planner.Matcher) func(root, rel string, isDir bool) bool {
	byRoot := map[string]planner.Matcher{}
	for i, r := range roots {
		if matchers[i] != nil {
			byRoot[r] = matchers[i]
		}
	}
	return func(root, rel string, isDir bool) bool {
		m := byRoot[root]
		return m != nil && rel != "" && m.Match(filepath.ToSlash(rel), isDir)
	}
}

// pump turns watcher events into engine changes. An edit of a .livesyncignore (or .gitignore
// with --gitignore) reloads the root's matcher and refreshes the root's watches, which ends in
// a Rescan of the root. Watcher errors are warnings: the watcher carries on (e.g. polling).
func pump(ctx context.Context, w watch.Watcher, roots []string, matchers []planner.Matcher, out chan<- coalesce.Change, reporter Reporter) {
	defer close(out)
	reload := map[string]*ignore.Matcher{}
	for i, r := range roots {
		if m, ok := matchers[i].(*ignore.Matcher); ok {
			reload[r] = m
		}
	}
	events, errs := w.Events(), w.Errors()
	for events != nil || errs != nil {
		select {
		case <-ctx.Done():
			return
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			reporter.Warn(err)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			c := coalesce.Change{Root: ev.Root, Path: ev.Path, Rescan: ev.Rescan, Progress: progress(ev.Progress)}
			if m := reload[ev.Root]; m != nil && !ev.Rescan {
				if rel, err := filepath.Rel(ev.Root, ev.Path); err == nil && m.IsIgnoreFile(filepath.ToSlash(rel)) {
					if err := m.Reload(); err != nil {
						reporter.Warn(err)
					}
					w.Refresh(ev.Root) // rewatches what the matcher now leaves, then sends a Rescan
					continue
				}
			}
			select {
			case out <- c:
			case <-ctx.Done():
				return
			}
		}
	}
}

// progress maps the watcher's reading of an event to the coalescer's.
func progress(p watch.Progress) coalesce.Progress {
	switch p {
	case watch.Writing:
		return coalesce.Writing
	case watch.Complete:
		return coalesce.Complete
	}
	return coalesce.Unknown
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
