package cmd

import (
	"errors"

	"github.com/spf13/cobra"
)

func newCmdSync(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "livesync (TYPE/NAME | TYPE NAME | POD | [TYPE] -l SELECTOR) LOCAL:REMOTE [LOCAL:REMOTE ...]",
		Short: "Live-sync local files into the running containers of a workload; pin and follow mutable image tags",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return errors.New("not wired yet")
		},
	}
}
