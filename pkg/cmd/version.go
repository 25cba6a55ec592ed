package cmd

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/livesync-dev/kubectl-livesync/pkg/version"
)

func newCmdVersion(g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version [-o json]",
		Short: "Print the version of kubectl-livesync",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			switch output {
			case "":
				writeln(g.Out, "kubectl-livesync %s (commit %s, built %s, %s, %s)", info.Version, info.Commit, info.Date, info.GoVersion, info.Platform)
			case "json":
				b, err := json.MarshalIndent(info, "", "  ")
				if err != nil {
					return err
				}
				writeln(g.Out, "%s", b)
			default:
				return fmt.Errorf("invalid output format %q: use json or leave -o out", output)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json")
	return cmd
}
