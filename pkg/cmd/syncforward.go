package cmd

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/livesync-dev/kubectl-livesync/pkg/forward"
	"github.com/livesync-dev/kubectl-livesync/pkg/logs"
	"github.com/livesync-dev/kubectl-livesync/pkg/session"
)

// forwardFlag is --forward, repeatable: each value is parsed as it is given.
type forwardFlag struct{ specs *[]forward.Spec }

func (f forwardFlag) String() string {
	if f.specs == nil {
		return ""
	}
	var s []string
	for _, sp := range *f.specs {
		s = append(s, sp.String())
	}
	return strings.Join(s, ",")
}

func (f forwardFlag) Set(s string) error {
	sp, err := forward.Parse(s)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), fmt.Sprintf("invalid forward %q: ", s)))
	}
	*f.specs = append(*f.specs, sp)
	return nil
}

func (forwardFlag) Type() string { return "[ADDRESS:]LOCAL:REMOTE" }

// addLogsFlags adds --logs-tail and --logs-since (--logs is an entry flag).
func addLogsFlags(f *pflag.FlagSet, c *logs.Config) {
	f.Int64Var(&c.Tail, "logs-tail", logs.DefaultTail, "with --logs, how many of their last lines the containers already running show (-1: all); containers that start later show every line")
	f.DurationVar(&c.Since, "logs-since", 0, "with --logs, show only the lines of the containers already running younger than this, e.g. 5m (as kubectl logs --since)")
}

// checkLive checks what needs a running session: --forward and --logs. name words a flag as
// the user gave it: "--forward", or "forward: (livesync.yaml)" for an entry's field.
func checkLive(c *session.Config, dryRun bool, name func(flag string) string) error {
	if len(c.Forward) == 0 && !c.Logs {
		return nil
	}
	var what []string
	if len(c.Forward) > 0 {
		what = append(what, name("forward"))
	}
	if c.Logs {
		what = append(what, name("logs"))
	}
	need := "needs"
	if len(what) > 1 {
		need = "need"
	}
	switch {
	case c.Once:
		return fmt.Errorf("%s %s a running session and --once ends after the initial sync: drop one of them", strings.Join(what, " and "), need)
	case dryRun:
		return fmt.Errorf("%s %s a running session and --dry-run changes nothing and ends: drop one of them", strings.Join(what, " and "), need)
	case c.LogsConfig.Tail < -1:
		return fmt.Errorf("--logs-tail %d: use -1 (all), 0 or more", c.LogsConfig.Tail)
	case c.LogsConfig.Since < 0:
		return fmt.Errorf("--logs-since %s: use a positive duration", c.LogsConfig.Since)
	}
	seen := map[string]string{}
	for _, sp := range c.Forward {
		if sp.Local == 0 {
			continue
		}
		key := fmt.Sprintf("%s:%d", sp.ListenAddress(), sp.Local)
		if prev, ok := seen[key]; ok {
			return fmt.Errorf("--forward %s and %s both listen on %s: give each its own LOCAL port (0 picks a free one)", prev, sp, key)
		}
		seen[key] = sp.String()
	}
	return nil
}
