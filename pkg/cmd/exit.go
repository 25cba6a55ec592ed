package cmd

import (
	"errors"

	"github.com/spf13/cobra"
)

// The exit codes of kubectl-livesync (docs/troubleshooting.md#exit-codes).
const (
	// ExitFailed: the command ran and failed: a sync that did not converge, a refused or
	// failed patch or rollout, a workload that is not there.
	ExitFailed = 1
	// ExitUsage: the command line or livesync.yaml is wrong, or there is nothing to do;
	// nothing was sent to the cluster.
	ExitUsage = 2
	// ExitCluster: the cluster could not be reached or refused the credentials before
	// anything was done: no kubeconfig, a wrong context, refused, no answer, TLS, 401.
	ExitCluster = 3
)

// ExitCode is the process exit code for an error returned by the root command (0 for nil).
func ExitCode(err error) int {
	var u usageError
	var c clusterError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return ExitUsage
	case errors.As(err, &c):
		return ExitCluster
	}
	return ExitFailed
}

// usageError is bad input: a flag, an argument, a livesync.yaml entry, or nothing to do.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// clusterError is a cluster that could not be reached or refused the credentials.
type clusterError struct{ error }

func (e clusterError) Unwrap() error { return e.error }

// errNothingToSync is the root command with no workload, no selector and no livesync.yaml: a
// CI step that runs it must not pass having synced nothing.
var errNothingToSync = usageError{errors.New("nothing to sync: no workload given and no livesync.yaml here or above: run kubectl livesync deploy/my-app ./src:/app, or write an entry with kubectl livesync init (see kubectl livesync --help)")}

// markUsageErrors makes the argument-count errors of cmd and its subcommands usage errors.
func markUsageErrors(cmd *cobra.Command) {
	if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, c := range cmd.Commands() {
		markUsageErrors(c)
	}
}
