package cmd

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// defaultHelperImage is --helper-image's default: Docker's official busybox, a few MB with
// every tool the sync scripts use (sh, tar, dd, gzip, find, stat, sha256sum), pinned to a
// release tag.
const defaultHelperImage = "docker.io/library/busybox:1.37.0"

// helperOptions are --helper and --helper-image.
type helperOptions struct {
	mode  string
	image string
	m     workload.HelperMode
}

func (h *helperOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&h.mode, "helper", string(workload.HelperAuto), "sync through an ephemeral helper container that shares the target's processes: auto (only where the container has no sh or tar), ephemeral (always: also for directories the container's user can't write), never")
	f.StringVar(&h.image, "helper-image", defaultHelperImage, "image of the helper container (needs sh, tar and dd)")
}

func (h *helperOptions) validate() error {
	m, err := workload.ParseHelperMode(h.mode)
	if err != nil {
		return err
	}
	if h.image == "" {
		return fmt.Errorf("--helper-image is empty: name an image with sh, tar and dd, e.g. %s", defaultHelperImage)
	}
	h.m = m
	return nil
}

// executor wraps pods in the helper's executor (which execs straight into the containers
// under --helper never).
func (h *helperOptions) executor(pods *workload.PodExecutor, dryRun bool, r filesync.Reporter) filesync.Executor {
	return &workload.HelperExecutor{
		Pods:     pods,
		Helpers:  &workload.Helpers{Client: pods.Client, Image: h.image, DryRun: dryRun},
		Mode:     h.m,
		Reporter: r,
	}
}
