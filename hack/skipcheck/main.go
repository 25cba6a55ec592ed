// Command skipcheck reads `go test -json` on stdin, prints a short log, and fails when a test
// failed or skipped without being on the allow-list: a test that skips in CI proves nothing,
// and a skip is silent in go test's own exit code.
//
//	go test -json ./... | skipcheck -allow hack/skips-allowed.txt       package lines, failures, skips
//	go test -json ./... | skipcheck -v -allow hack/skips-allowed.txt    all output, as go test -v prints it
//
// The allow-list has one skip per line, "PACKAGE TEST # why", where PACKAGE is an import path or
// a /-separated suffix of one (pkg/watch) and TEST the name go test prints (TestX/sub_case). An
// entry without its "# why" is an error: the list is read by people deciding whether a skip is
// still right.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

func main() {
	verbose := flag.Bool("v", false, "print every line of test output, as go test -v does")
	allowPath := flag.String("allow", "", "allow-list `FILE` of expected skips")
	flag.Parse()
	var allow []allowed
	if *allowPath != "" {
		var err error
		if allow, err = readAllowList(*allowPath); err != nil {
			fmt.Fprintln(os.Stderr, "skipcheck:", err)
			os.Exit(2)
		}
	}
	c := &checker{out: os.Stdout, verbose: *verbose, allow: allow, open: map[key][]string{}}
	if err := c.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "skipcheck: reading go test -json:", err)
		os.Exit(2)
	}
	if !c.report(os.Stderr) {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output and build-fail events
}

type key struct{ pkg, test string }

// allowed is one entry of the allow-list.
type allowed struct{ pkg, test, why string }

func (a allowed) matches(k key) bool {
	return a.test == k.test && (k.pkg == a.pkg || strings.HasSuffix(k.pkg, "/"+a.pkg))
}

func readAllowList(path string) ([]allowed, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the allow-list: %w", err)
	}
	var out []allowed
	for i, line := range strings.Split(string(b), "\n") {
		entry, why, _ := strings.Cut(line, "#")
		fields := strings.Fields(entry)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 2 || strings.TrimSpace(why) == "" {
			return nil, fmt.Errorf("%s:%d: want \"PACKAGE TEST # why\", got %q", path, i+1, line)
		}
		out = append(out, allowed{pkg: fields[0], test: fields[1], why: strings.TrimSpace(why)})
	}
	return out, nil
}

// checker follows the tests of every package and keeps each one's output until it ends: a
// passing test's output is dropped, a failing or skipped test's printed.
type checker struct {
	out     io.Writer
	verbose bool
	allow   []allowed

	open       map[key][]string // output of tests still running
	failed     []key
	failedPkgs []string
	skipped    []key
	unexpected []string // skip lines with their reasons
	events     int
}

func (c *checker) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Action == "" {
			// Not test2json: e.g. go vet output or a message of the go command.
			fmt.Fprintln(c.out, sc.Text())
			continue
		}
		c.events++
		c.handle(ev)
	}
	return sc.Err()
}

func (c *checker) handle(ev event) {
	k := key{ev.Package, ev.Test}
	switch ev.Action {
	case "build-output":
		fmt.Fprint(c.out, ev.Output)
	case "output":
		switch {
		case c.verbose:
			fmt.Fprint(c.out, ev.Output)
		case ev.Test == "":
			// Package lines: ok, FAIL, "no test files", and whatever a test binary printed
			// outside any test (a panic, a TestMain error).
			if ev.Output != "PASS\n" {
				fmt.Fprint(c.out, ev.Output)
			}
		}
		if ev.Test != "" {
			c.open[k] = append(c.open[k], ev.Output)
		}
	case "pass":
		delete(c.open, k)
	case "fail":
		if ev.Test == "" {
			// The package failed: a test that never ended (panic, timeout) shows its output.
			c.failedPkgs = append(c.failedPkgs, ev.Package)
			for _, t := range c.running(ev.Package) {
				c.flush(t)
			}
			return
		}
		c.failed = append(c.failed, k)
		c.flush(k)
	case "skip":
		if ev.Test == "" {
			return // a package without tests
		}
		c.skipped = append(c.skipped, k)
		if !c.isAllowed(k) {
			c.unexpected = append(c.unexpected, fmt.Sprintf("%s %s: %s", k.pkg, k.test, reason(c.open[k])))
		}
		delete(c.open, k)
	}
}

func (c *checker) running(pkg string) []key {
	var keys []key
	for k := range c.open {
		if k.pkg == pkg {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b key) int { return strings.Compare(a.test, b.test) })
	return keys
}

// flush prints a test's output unless -v already did.
func (c *checker) flush(k key) {
	if !c.verbose {
		fmt.Fprint(c.out, strings.Join(c.open[k], ""))
	}
	delete(c.open, k)
}

func (c *checker) isAllowed(k key) bool {
	return slices.ContainsFunc(c.allow, func(a allowed) bool { return a.matches(k) })
}

// reason is what a skipped test logged, without go test's framing lines.
func reason(lines []string) string {
	var out []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return "no reason logged"
	}
	return strings.Join(out, " / ")
}

// report prints the verdict and says whether the run is clean.
func (c *checker) report(w io.Writer) bool {
	ok := true
	if c.events == 0 {
		fmt.Fprintln(w, "skipcheck: no go test -json events on stdin")
		ok = false
	}
	if len(c.failed) > 0 || len(c.failedPkgs) > 0 {
		fmt.Fprintf(w, "skipcheck: %d failed tests in %d failed packages\n", len(c.failed), len(c.failedPkgs))
		ok = false
	}
	if allowed := len(c.skipped) - len(c.unexpected); allowed > 0 {
		fmt.Fprintf(w, "skipcheck: %d skips on the allow-list\n", allowed)
	}
	if len(c.unexpected) > 0 {
		fmt.Fprintf(w, "skipcheck: %d tests skipped that are not on the allow-list; make them run (install what they need, e.g. in hack/deps.sh) or list them with why:\n", len(c.unexpected))
		for _, u := range c.unexpected {
			fmt.Fprintln(w, "  --- SKIP", u)
		}
		ok = false
	}
	return ok
}
