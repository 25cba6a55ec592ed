package cmd

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/session"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// defaultHelperImage is --helper-image's default: Docker's official busybox, a few MB with
// every tool the sync scripts use (sh, tar, dd, gzip, find, stat, sha256sum), pinned to a
// release tag.
const defaultHelperImage = "docker.io/library/busybox:1.37.0"

// addHelperFlags adds --helper and --helper-image, which an entry of livesync.yaml can carry.
func addHelperFlags(f *pflag.FlagSet, c *session.Config) {
	f.StringVar(&c.Helper, "helper", string(workload.HelperAuto), "sync through an ephemeral helper container that shares the target's processes: auto (only where the container has no sh or tar), ephemeral (always: also for directories the container's user can't write), never")
	f.StringVar(&c.HelperImage, "helper-image", defaultHelperImage, "image of the helper container (needs sh, tar and dd)")
}

func validateHelper(c *session.Config) error {
	if _, err := workload.ParseHelperMode(c.Helper); err != nil {
		return err
	}
	if c.HelperImage == "" {
		return fmt.Errorf("--helper-image is empty: name an image with sh, tar and dd, e.g. %s", defaultHelperImage)
	}
	return nil
}

// helperExecutor wraps pods in the helper's executor (which execs straight into the
// containers under --helper never).
func helperExecutor(pods *workload.PodExecutor, c session.Config, r filesync.Reporter) filesync.Executor {
	mode, _ := workload.ParseHelperMode(c.Helper) // validated
	return &workload.HelperExecutor{
		Pods:     pods,
		Helpers:  &workload.Helpers{Client: pods.Client, Image: c.HelperImage, DryRun: c.Sync.DryRun},
		Mode:     mode,
		Reporter: r,
	}
}
