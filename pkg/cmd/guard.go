package cmd

import (
	"net"
	"os"

	"k8s.io/cli-runtime/pkg/printers"

	"github.com/livesync-dev/kubectl-livesync/pkg/guard"
	"github.com/livesync-dev/kubectl-livesync/pkg/project"
	"github.com/livesync-dev/kubectl-livesync/pkg/restart"
	"github.com/livesync-dev/kubectl-livesync/pkg/session"
)

// guardWrites refuses what, a change to workload objects, in a run no one watches (no terminal,
// or LIVESYNC_NONINTERACTIVE or CI set) on a context whose API server is not local, unless
// livesync.yaml's allowContexts names it at that server (see pkg/guard). file is the
// livesync.yaml being run, or nil for the nearest one above the working directory.
func (g *globalOptions) guardWrites(what string, file *project.File) error {
	c := guard.Check{Terminal: printers.IsTerminal(g.In) && printers.IsTerminal(g.ErrOut), Getenv: os.Getenv, LookupHost: net.LookupHost}
	if !c.NonInteractive() {
		return nil
	}
	if cfg, err := g.configFlags.ToRESTConfig(); err == nil {
		c.Server, c.Proxy = cfg.Host, cfg.Proxy != nil
	}
	c.Context = g.flagValue(g.configFlags.Context)
	if c.Context == "" {
		if raw, err := g.configFlags.ToRawKubeConfigLoader().RawConfig(); err == nil {
			c.Context = raw.CurrentContext
		}
	}
	if c.Local() {
		return nil
	}
	if file == nil {
		file = nearestProject()
	}
	if file != nil {
		c.File = file.Path()
		for _, a := range file.AllowContexts {
			c.Allowed = append(c.Allowed, guard.Allow{Context: a.Context, Server: a.Server})
		}
	}
	if err := c.Writes(what); err != nil {
		// Nothing was sent: allowing the context is a change to livesync.yaml or the run.
		return usageError{err}
	}
	return nil
}

// nearestProject is the livesync.yaml here or above, nil when there is none or it does not
// load (the command that runs it says why; here it allows nothing).
func nearestProject() *project.File {
	wd, err := os.Getwd()
	if err != nil {
		return nil
	}
	path, err := project.Find(wd)
	if err != nil {
		return nil
	}
	f, err := project.Load(path)
	if err != nil {
		return nil
	}
	return f
}

// sessionWrites names the first change a session makes to its workload, "" for none: the
// image steps, following the tag, and --restart process's rollout.
func sessionWrites(c session.Config) string {
	switch {
	case c.Sync.DryRun:
	case c.PullPolicy != "":
		return "--pull-policy"
	case c.Refresh:
		return "--refresh"
	case c.FollowTag:
		return "--follow-tag"
	case c.Restart.Kind == restart.Process:
		return "--restart process"
	}
	return ""
}

// guardSession refuses a session's writes to its workload as guardWrites does.
func (o *SyncOptions) guardSession(c session.Config, entry string) error {
	flag := sessionWrites(c)
	if flag == "" {
		return nil
	}
	what := "kubectl livesync " + flag
	if entry != "" {
		what = "entry " + entry + " of " + project.FileName + ": " + flag
	}
	return o.g.guardWrites(what, o.project)
}
