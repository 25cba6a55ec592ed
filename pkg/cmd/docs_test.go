package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func TestReferenceMarkdownCoversEveryFlag(t *testing.T) {
	var b strings.Builder
	if err := WriteReferenceMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	root := NewCmdLiveSync(streams)
	for _, c := range append(root.Commands(), root) {
		if !c.IsAvailableCommand() && c != root {
			continue
		}
		if !strings.Contains(md, "### `"+c.CommandPath()+"`") {
			t.Errorf("no section for %s", c.CommandPath())
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

// TestHelpEndsWithItsDocsPage holds every command's --help to ending with the address of a page
// that exists in docs/ (its #section is checked by hack/verify-docs.sh through docs/reference.md).
func TestHelpEndsWithItsDocsPage(t *testing.T) {
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	root := NewCmdLiveSync(streams)
	for _, c := range append(root.Commands(), root) {
		if !c.IsAvailableCommand() && c != root {
			continue
		}
		t.Run(c.Name(), func(t *testing.T) {
			page := docsPage(c)
			if page == "" {
				t.Fatalf("%s has no docs page: add it to docsPages", c.CommandPath())
			}
			file, _, _ := strings.Cut(page, "#")
			if _, err := os.Stat(filepath.Join("..", "..", file)); err != nil {
				t.Fatalf("%s: docs page %s: %v", c.CommandPath(), file, err)
			}
			streams, _, out, _ := genericiooptions.NewTestIOStreams()
			root := NewCmdLiveSync(streams)
			args := []string{"--help"}
			if c.Name() != "livesync" {
				args = []string{c.Name(), "--help"}
			}
			root.SetArgs(args)
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			want := "\nDocs: " + DocsBase + page + "\n"
			if !strings.HasSuffix(out.String(), want) {
				t.Errorf("%s --help ends with %q, want %q", c.CommandPath(), tail(out.String()), want)
			}
		})
	}
}

func tail(s string) string {
	if len(s) > 120 {
		return s[len(s)-120:]
	}
	return s
}
