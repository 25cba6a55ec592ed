package main

import (
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
)

var (
	pkgOnce sync.Once
	pkgPats []*regexp.Regexp
	pkgErr  error
)

// pkgLiterals reads the module's own pkg/ once: the lines below are checked against the messages
// the binary really prints.
func pkgLiterals(t *testing.T) []*regexp.Regexp {
	t.Helper()
	pkgOnce.Do(func() { pkgPats, pkgErr = literals(filepath.Join("..", "..", "pkg")) })
	if pkgErr != nil {
		t.Fatal(pkgErr)
	}
	return pkgPats
}

func TestUncoveredAgainstPkg(t *testing.T) {
	pats := pkgLiterals(t)
	for _, tc := range []struct {
		name, line string
		ok         bool
	}{
		{"nothing to sync as printed", `nothing to sync: no workload given and no livesync.yaml here or above: run kubectl livesync deploy/my-app ./src:/app, or write an entry with kubectl livesync init (see kubectl livesync --help)`, true},
		{"nothing to sync with a word changed", `nothing to sync: no workload named and no livesync.yaml here or above: run kubectl livesync deploy/my-app ./src:/app, or write an entry with kubectl livesync init (see kubectl livesync --help)`, false},
		{"crash loop as printed", `dev/web-7c9f-x2/app restarted 2 times within 5m0s, last exit code 3: each restart wipes the synced files from the container's writable layer and livesync syncs them again; the app is probably crashing: kubectl logs web-7c9f-x2 -c app --previous -n dev`, true},
		{"crash loop with a clause changed", `dev/web-7c9f-x2/app restarted 2 times within 5m0s, last exit code 3: each restart wipes the synced files from the container's writable layer and livesync syncs them again; the app probably crashed: kubectl logs web-7c9f-x2 -c app --previous -n dev`, false},
		// The owner's hold command is a %q of a whole command: one value, however many words.
		{"owner refusal with its hold command", `deployment/api: Flux (kustomize-controller, Kustomization flux-system/apps) re-applies what it owns: hold it first with "flux suspend kustomization apps -n flux-system", then run again with --force`, true},
		{"revert with its hold command", `deployment/api: container "app" image reverted by kustomize-controller 2s after the pin (now 127.0.0.1:5000/my-app:dev): the pin did not hold: hold it with "flux suspend kustomization apps -n flux-system", then run again`, true},
		{"owner refusal with a word changed beside the quote", `deployment/api: Flux (kustomize-controller, Kustomization flux-system/apps) re-applies what it owns: hold it before with "flux suspend kustomization apps -n flux-system", then run again with --force`, false},
		{"revert with words added after the quote", `deployment/api: container "app" image reverted by kustomize-controller 2s after the pin (now 127.0.0.1:5000/my-app:dev): the pin did not hold: hold it with "flux suspend kustomization apps -n flux-system" and wait a while, then run again`, false},
		{"quotes alone prove nothing", `"flux suspend kustomization apps -n flux-system" "then run again with --force"`, false},
		{"a made-up line", `the cluster is on fire: call the fire brigade`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gap := uncovered(pats, tc.line)
			if tc.ok && gap != "" {
				t.Errorf("uncovered = %q, want the whole line covered", gap)
			}
			if !tc.ok && gap == "" {
				t.Errorf("uncovered = \"\", want a stale part reported")
			}
		})
	}
}

func TestQuotedValues(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`a "b c" d`, `  xxxxx  `},
		{"run `kubectl get pods` now", "    xxxxxxxxxxxxxxxxxx    "},
		{`x "a\"b" y`, `  xxxxxx  `},
		{`a stray " quote`, `               `},
	} {
		got := quotedValues(tc.text)
		s := make([]byte, len(got))
		for i, v := range got {
			s[i] = ' '
			if v {
				s[i] = 'x'
			}
		}
		if string(s) != tc.want {
			t.Errorf("quotedValues(%q) = %q, want %q", tc.text, s, tc.want)
		}
	}
}

// TestDocsPass runs the check over the repository's own Markdown, as make verify-docs does.
func TestDocsPass(t *testing.T) {
	pats := pkgLiterals(t)
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join("..", "..", "README.md"))
	n := 0
	for _, md := range pages {
		lines, err := quoted(md)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			n++
			if gap := uncovered(pats, l.text); gap != "" {
				t.Errorf("%s:%d: %q is printed by no message: %s", md, l.n, gap, l.text)
			}
		}
	}
	if n == 0 {
		t.Error("no quoted error/warning line found in docs/: the scan reads nothing")
	}
}

func TestQuoted(t *testing.T) {
	md := filepath.Join(t.TempDir(), "a.md")
	text := "error: outside a block\n```text\n$ cmd\nerror: one\n[api] warning: two\nother\n```\nwarning: outside again\n"
	if err := os.WriteFile(md, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	lines, err := quoted(md)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || lines[0] != (line{4, "one"}) || lines[1] != (line{5, "two"}) {
		t.Errorf("quoted = %+v, want one at 4 and two at 5", lines)
	}
}
