package cmd

import (
	"os"
	"path/filepath"
	"regexp"
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

// TestDocsLivesyncYAMLIsWhatInitWrites runs the init lines of docs/livesync-yaml.md in an empty
// checkout and compares the file they write with the page's livesync.yaml, byte for byte (the e2e
// test TestLivesyncYAML runs that file on the cluster).
func TestDocsLivesyncYAMLIsWhatInitWrites(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "livesync-yaml.md"))
	if err != nil {
		t.Fatal(err)
	}
	yaml := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(page)
	inits := regexp.MustCompile(`(?m)^kubectl livesync (init .*?)(?:\s+#.*)?$`).FindAllSubmatch(page, -1)
	if yaml == nil || len(inits) == 0 {
		t.Fatal("docs/livesync-yaml.md has no yaml block or no `kubectl livesync init` line")
	}
	root := repo(t, ".")
	for _, line := range inits {
		if _, _, err := execute(t, splitDocsLine(t, string(line[1]))...); err != nil {
			t.Fatalf("kubectl livesync %s: %v", line[1], err)
		}
	}
	got, err := os.ReadFile(filepath.Join(root, "livesync.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(yaml[1]) {
		t.Errorf("init wrote\n%s\nthe page shows\n%s", got, yaml[1])
	}
}

// splitDocsLine splits a command line the way sh does for the words the docs use: plain words and
// single-quoted ones.
func splitDocsLine(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	for _, m := range regexp.MustCompile(`'([^']*)'|(\S+)`).FindAllStringSubmatch(line, -1) {
		if strings.Contains(m[2], `"`) || strings.Contains(m[2], `\`) {
			t.Fatalf("splitDocsLine: %q needs a real shell", m[2])
		}
		words = append(words, m[1]+m[2])
	}
	return words
}
