package cmd

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// TestOutputHelpListsEveryEvent holds -o's help and the reference's NDJSON table to the event
// types the reporter writes: every "type" a jsonEvent literal sets in this package (and the
// sync-back pair chosen at run time) is named in both.
func TestOutputHelpListsEveryEvent(t *testing.T) {
	types := map[string]bool{"synced-back": true, "dry-run-sync-back": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	typeLit := regexp.MustCompile(`jsonEvent\{Type: "([a-z-]+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range typeLit.FindAllStringSubmatch(string(src), -1) {
			types[m[1]] = true
		}
	}
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	usage := NewCmdLiveSync(streams).Flags().Lookup("output").Usage
	ref, err := os.ReadFile(filepath.Join("..", "..", "docs", "reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := regexp.MustCompile(`[a-z-]+`).FindAllString(usage[strings.Index(usage, "("):], -1)
	for typ := range types {
		if !slices.Contains(listed, typ) {
			t.Errorf("-o's help does not list the %q event: %s", typ, usage)
		}
		if !strings.Contains(string(ref), "| `"+typ+"` |") && !strings.Contains(string(ref), "`"+typ+"` under") {
			t.Errorf("docs/reference.md's NDJSON table has no row for %q", typ)
		}
	}
}
