package cmd

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// DocsBase is where the repository's files are read on the web; help ends with a link below it.
const DocsBase = "https://github.com/livesync-dev/kubectl-livesync/blob/main/"

// docsPages names, per command, the page of docs/ (with its section, where the page covers several
// commands) that covers it. --help ends with it and docs/reference.md links it, so
// hack/verify-docs.sh checks that every one resolves.
var docsPages = map[string]string{
	"livesync":    "docs/sync.md",
	"init":        "docs/livesync-yaml.md",
	"check":       "docs/troubleshooting.md#check-before-you-sync",
	"inspect":     "docs/images.md#inspect",
	"refresh":     "docs/images.md#refresh",
	"pull-policy": "docs/images.md#pull-policy",
	"restore":     "docs/images.md#restore",
	"version":     "docs/install.md",
	"wait":        "docs/scripts-and-agents.md#wait",
	"mcp":         "docs/scripts-and-agents.md#mcp",
	"completion":  "docs/install.md#completion",
}

// docsPage returns the repository path of the page that covers c, or "" for commands of cobra's own.
func docsPage(c *cobra.Command) string { return docsPages[c.Name()] }

// addDocsToHelp makes every command's help end with the web address of the page that covers it.
func addDocsToHelp(root *cobra.Command) {
	help := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		help(c, args)
		if page := docsPage(c); page != "" {
			writeln(c.OutOrStdout(), "\nDocs: %s%s", DocsBase, page)
		}
	})
}

// WriteReferenceMarkdown writes, for every command, its synopsis, the page that covers it and its
// flags as a Markdown table, generated from the cobra commands themselves so docs/reference.md
// cannot drift from --help (hack/gendocs splices it in, hack/verify-docs.sh checks it). Links are
// relative to docs/.
func WriteReferenceMarkdown(w io.Writer) error {
	root := NewCmdLiveSync(genericiooptions.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
	var b strings.Builder
	for _, c := range append([]*cobra.Command{root}, root.Commands()...) {
		if c != root && (c.Hidden || !c.IsAvailableCommand()) {
			continue
		}
		fmt.Fprintf(&b, "### `%s`\n\n%s\n\n```\n%s\n```\n\n", c.CommandPath(), c.Short, c.UseLine())
		if page := docsPage(c); page != "" {
			rel := strings.TrimPrefix(page, "docs/")
			fmt.Fprintf(&b, "Docs: [%s](%s)\n\n", rel, rel)
		}
		flagsTable(&b, c.LocalNonPersistentFlags())
	}
	b.WriteString("### Global flags (every command; kubectl's kubeconfig flags)\n\n")
	flagsTable(&b, root.PersistentFlags())
	_, err := io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n\n")
	return err
}

func flagsTable(b *strings.Builder, fs *pflag.FlagSet) {
	var rows []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		name, usage := pflag.UnquoteUsage(f)
		flag := "--" + f.Name
		if f.Shorthand != "" {
			flag = "-" + f.Shorthand + ", " + flag
		}
		if name != "" {
			flag += " " + name
		}
		def := ""
		switch f.DefValue {
		case "", "false", "[]", "0", "0s":
		default:
			def = "`" + homeToTilde(f.DefValue) + "`"
		}
		rows = append(rows, fmt.Sprintf("| `%s` | %s | %s |", flag, def, mdCell(usage)))
	})
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "| flag | default | meaning |\n|---|---|---|\n%s\n\n", strings.Join(rows, "\n"))
}

// homeToTilde keeps defaults such as --cache-dir the same on every machine.
func homeToTilde(s string) string {
	if home, err := os.UserHomeDir(); err == nil && home != "" && strings.HasPrefix(s, home) {
		return "~" + strings.TrimPrefix(s, home)
	}
	return s
}

// mdCell keeps a usage string inside one Markdown table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
