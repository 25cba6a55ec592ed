// Command kubectl-livesync is the kubectl plugin `kubectl livesync`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/livesync-dev/kubectl-livesync/pkg/cmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer startHeapProfiles()()  // off unless the bench asks (LIVESYNC_HEAP_PROFILE)
	stopCPU := startCPUProfile() // off unless the bench asks (LIVESYNC_CPU_PROFILE)
	defer stopCPU()
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	root := cmd.NewCmdLiveSync(streams)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		stop()
		stopCPU()
		os.Exit(cmd.ExitCode(err))
	}
}
