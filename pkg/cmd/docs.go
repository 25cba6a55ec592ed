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

// WriteFlagsMarkdown writes the flags of every command as Markdown tables, generated from the
// cobra commands themselves so the README cannot drift from --help (hack/gendocs splices it in,
// hack/verify-docs.sh checks it).
func WriteFlagsMarkdown(w io.Writer) error {
	root := NewCmdLiveSync(genericiooptions.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
	var b strings.Builder
	for _, c := range append([]*cobra.Command{root}, root.Commands()...) {
		if c.Hidden || !c.IsAvailableCommand() {
			continue
		}
		flagsTable(&b, "`"+c.CommandPath()+"`", c.LocalNonPersistentFlags())
	}
	flagsTable(&b, "Global flags (every command; kubectl's kubeconfig flags)", root.PersistentFlags())
	_, err := io.WriteString(w, b.String())
	return err
}

func flagsTable(b *strings.Builder, title string, fs *pflag.FlagSet) {
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
	fmt.Fprintf(b, "### %s\n\n| flag | default | meaning |\n|---|---|---|\n%s\n\n", title, strings.Join(rows, "\n"))
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
