// Command mdlinks fails when a relative link in the given Markdown files does not resolve: the
// file or directory must exist inside the repository, and a #fragment must name a heading (as
// GitHub writes its anchor) or an <a id/name> of the target page. Links to this repository on
// github.com (blob/tree/main) and raw.githubusercontent.com are checked as the local paths they
// name; other URLs are not followed.
//
//	go run ./hack/mdlinks README.md docs/*.md
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mdlinks FILE.md ...")
		os.Exit(2)
	}
	root, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mdlinks:", err)
		os.Exit(1)
	}
	c := newChecker(root)
	var problems []string
	for _, f := range os.Args[1:] {
		p, err := c.checkFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mdlinks:", err)
			os.Exit(1)
		}
		problems = append(problems, p...)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "mdlinks: %d broken link(s): fix the link or the heading it names\n", len(problems))
		os.Exit(1)
	}
	fmt.Printf("mdlinks: every relative link and anchor in %d file(s) resolves\n", len(os.Args)-1)
}
