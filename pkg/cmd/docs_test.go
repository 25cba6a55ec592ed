package cmd

import (
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func TestFlagsMarkdownCoversEveryFlag(t *testing.T) {
	var b strings.Builder
	if err := WriteFlagsMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	root := NewCmdLiveSync(streams)
	for _, c := range append(root.Commands(), root) {
		if !c.IsAvailableCommand() && c != root {
			continue
		}
		if c.LocalNonPersistentFlags().HasAvailableFlags() && !strings.Contains(md, "### `"+c.CommandPath()+"`") {
			t.Errorf("no table for %s", c.CommandPath())
		}
		for _, name := range []string{"selector", "container", "output", "namespace", "context"} {
			if f := c.Flags().Lookup(name); f != nil && !strings.Contains(md, "--"+name) {
				t.Errorf("%s: --%s missing", c.CommandPath(), name)
			}
		}
	}
	if strings.Contains(md, "/root/") || strings.Contains(md, "/home/") {
		t.Errorf("a machine's home directory leaked into the docs")
	}
}
