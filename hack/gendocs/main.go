// Command gendocs renders every kubectl-livesync command's synopsis, docs page and flags table into
// docs/reference.md, between the markers <!-- flags:begin --> and <!-- flags:end -->.
//
//	go run ./hack/gendocs docs/reference.md          rewrite the section (make docs)
//	go run ./hack/gendocs -check docs/reference.md   exit 1 if the section is out of date
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/livesync-dev/kubectl-livesync/pkg/cmd"
)

const (
	begin = "<!-- flags:begin -->\n"
	end   = "<!-- flags:end -->"
	note  = "<!-- generated from the cobra commands by `make docs` (hack/gendocs); do not edit by hand -->\n\n"
)

func main() {
	check := flag.Bool("check", false, "report whether the section is current instead of rewriting it")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: gendocs [-check] docs/reference.md")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *check); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

func run(path string, check bool) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i := bytes.Index(old, []byte(begin))
	j := bytes.Index(old, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q ... %q section", path, begin[:len(begin)-1], end)
	}
	var section bytes.Buffer
	section.WriteString(note)
	if err := cmd.WriteReferenceMarkdown(&section); err != nil {
		return err
	}
	updated := append(append(append([]byte{}, old[:i+len(begin)]...), section.Bytes()...), old[j:]...)
	if bytes.Equal(old, updated) {
		return nil
	}
	if check {
		return fmt.Errorf("the generated section of %s is out of date: run `make docs` and commit the result", path)
	}
	return os.WriteFile(path, updated, 0o644)
}
