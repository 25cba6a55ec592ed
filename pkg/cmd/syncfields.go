package cmd

import (
	"github.com/livesync-dev/kubectl-livesync/pkg/forward"
	"github.com/livesync-dev/kubectl-livesync/pkg/project"
	"github.com/livesync-dev/kubectl-livesync/pkg/restart"
	"github.com/livesync-dev/kubectl-livesync/pkg/session"
)

// entryFields pairs each flag an entry can carry with its field. fromFile puts the entry's
// value into a session's config unless the flag was given (flags override the file); toFile
// records a given flag in an entry (init).
var entryFields = []struct {
	flag     string
	fromFile func(s *project.Sync, c *session.Config, initial *string)
	toFile   func(s *project.Sync, c *session.Config, initial string)
}{
	{"container",
		func(s *project.Sync, c *session.Config, _ *string) { c.Containers = s.Containers },
		func(s *project.Sync, c *session.Config, _ string) { s.Containers = c.Containers }},
	{"exclude",
		func(s *project.Sync, c *session.Config, _ *string) { c.Excludes = s.Exclude },
		func(s *project.Sync, c *session.Config, _ string) { s.Exclude = c.Excludes }},
	{"sync-back",
		func(s *project.Sync, c *session.Config, _ *string) { c.SyncBack.Globs = s.SyncBack },
		func(s *project.Sync, c *session.Config, _ string) { s.SyncBack = c.SyncBack.Globs }},
	{"gitignore",
		func(s *project.Sync, c *session.Config, _ *string) { c.GitIgnore = s.GitIgnore },
		func(s *project.Sync, c *session.Config, _ string) { s.GitIgnore = c.GitIgnore }},
	{"initial",
		func(s *project.Sync, _ *session.Config, initial *string) {
			if s.Initial != "" {
				*initial = s.Initial
			}
		},
		func(s *project.Sync, _ *session.Config, initial string) { s.Initial = initial }},
	{"on-sync",
		func(s *project.Sync, c *session.Config, _ *string) { c.Sync.OnSync = s.OnSync },
		func(s *project.Sync, c *session.Config, _ string) { s.OnSync = c.Sync.OnSync }},
	{"on-sync-timeout",
		func(s *project.Sync, c *session.Config, _ *string) {
			if s.OnSyncTimeout != nil {
				c.Sync.OnSyncTimeout = s.OnSyncTimeout.Duration
			}
		},
		func(s *project.Sync, c *session.Config, _ string) { s.OnSyncTimeout = duration(c.Sync.OnSyncTimeout) }},
	{"pull-policy",
		func(s *project.Sync, c *session.Config, _ *string) { c.PullPolicy = s.PullPolicy },
		func(s *project.Sync, c *session.Config, _ string) { s.PullPolicy = c.PullPolicy }},
	{"refresh",
		func(s *project.Sync, c *session.Config, _ *string) { c.Refresh = s.Refresh },
		func(s *project.Sync, c *session.Config, _ string) { s.Refresh = c.Refresh }},
	{"restart",
		func(s *project.Sync, c *session.Config, _ *string) { c.Restart, _ = restart.Parse(s.Restart) }, // Load checked it
		func(s *project.Sync, c *session.Config, _ string) {
			if c.Restart.Kind != restart.None {
				s.Restart = c.Restart.String()
			}
		}},
	{"follow-tag",
		func(s *project.Sync, c *session.Config, _ *string) { c.FollowTag = s.FollowTag },
		func(s *project.Sync, c *session.Config, _ string) { s.FollowTag = c.FollowTag }},
	{"interval",
		func(s *project.Sync, c *session.Config, _ *string) {
			if s.Interval != nil {
				c.Interval = s.Interval.Duration
			}
		},
		func(s *project.Sync, c *session.Config, _ string) { s.Interval = duration(c.Interval) }},
	{"forward",
		func(s *project.Sync, c *session.Config, _ *string) {
			c.Forward = nil
			for _, raw := range s.Forward {
				sp, _ := forward.Parse(raw) // Load checked it
				c.Forward = append(c.Forward, sp)
			}
		},
		func(s *project.Sync, c *session.Config, _ string) {
			for _, sp := range c.Forward {
				s.Forward = append(s.Forward, sp.String())
			}
		}},
	{"logs",
		func(s *project.Sync, c *session.Config, _ *string) { c.Logs = s.Logs },
		func(s *project.Sync, c *session.Config, _ string) { s.Logs = c.Logs }},
	{"helper",
		func(s *project.Sync, c *session.Config, _ *string) {
			if s.Helper != "" {
				c.Helper = s.Helper
			}
		},
		func(s *project.Sync, c *session.Config, _ string) { s.Helper = c.Helper }},
	{"helper-image",
		func(s *project.Sync, c *session.Config, _ *string) {
			if s.HelperImage != "" {
				c.HelperImage = s.HelperImage
			}
		},
		func(s *project.Sync, c *session.Config, _ string) { s.HelperImage = c.HelperImage }},
}
