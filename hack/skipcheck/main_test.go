package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stream renders events as `go test -json` prints them.
func stream(t *testing.T, evs ...event) string {
	t.Helper()
	var b strings.Builder
	for _, ev := range evs {
		j, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func test(pkg, name, action string, output ...string) []event {
	evs := []event{{Action: "run", Package: pkg, Test: name}, {Action: "output", Package: pkg, Test: name, Output: "=== RUN   " + name + "\n"}}
	for _, o := range output {
		evs = append(evs, event{Action: "output", Package: pkg, Test: name, Output: o + "\n"})
	}
	return append(evs, event{Action: action, Package: pkg, Test: name})
}

func TestChecker(t *testing.T) {
	const mod = "github.com/livesync-dev/kubectl-livesync/"
	pass := test(mod+"pkg/sync", "TestPlan", "pass", "    plan_test.go:10: passing log")
	gitSkip := test(mod+"pkg/ignore", "TestMatchAgreesWithGit", "skip", "    gitcompat_test.go:25: git not found", "--- SKIP: TestMatchAgreesWithGit (0.00s)")
	subSkip := test(mod+"pkg/watch", "TestX/in_a_namespace", "skip", "    x_test.go:3: no user namespaces")
	fail := test(mod+"pkg/sync", "TestBroken", "fail", "    broken_test.go:7: want 1, got 2", "--- FAIL: TestBroken (0.00s)")
	pkgOK := event{Action: "output", Package: mod + "pkg/sync", Output: "ok  \t" + mod + "pkg/sync\t0.1s\n"}
	noTests := event{Action: "skip", Package: mod + "cmd/kubectl-livesync"}

	tests := []struct {
		name    string
		allow   string
		verbose bool
		events  []event
		ok      bool
		out     []string // in the log
		notOut  []string // not in the log
		verdict []string // on stderr
	}{
		{
			name:   "passing tests print only package lines",
			events: append(append(pass, pkgOK), noTests),
			ok:     true, out: []string{"ok  \t" + mod + "pkg/sync"}, notOut: []string{"passing log", "=== RUN"},
		},
		{
			name:   "a skip not on the list fails the run and says why it skipped",
			events: append(pass, gitSkip...),
			out:    []string{}, verdict: []string{"1 tests skipped", "pkg/ignore TestMatchAgreesWithGit: gitcompat_test.go:25: git not found"},
		},
		{
			name:   "a listed skip passes",
			allow:  "# git is optional here\npkg/ignore TestMatchAgreesWithGit  # no git on this runner\n",
			events: gitSkip,
			ok:     true, verdict: []string{"1 skips on the allow-list"},
		},
		{
			name:   "subtests are listed by their full name",
			allow:  "pkg/watch TestX/in_a_namespace # why\n",
			events: subSkip,
			ok:     true,
		},
		{
			name:    "a listed name of another package does not match",
			allow:   "pkg/sync TestMatchAgreesWithGit # why\n",
			events:  gitSkip,
			verdict: []string{"not on the allow-list"},
		},
		{
			name:   "a failing test shows its output",
			events: append(pass, fail...),
			out:    []string{"want 1, got 2", "--- FAIL: TestBroken"}, notOut: []string{"passing log"}, verdict: []string{"1 failed tests"},
		},
		{
			name:    "-v prints everything",
			verbose: true,
			events:  pass,
			ok:      true, out: []string{"passing log", "=== RUN   TestPlan"},
		},
		{
			name:    "no events is not a clean run",
			events:  nil,
			verdict: []string{"no go test -json events"},
		},
		{
			name: "a test that never ended is shown when its package fails",
			events: []event{
				{Action: "run", Package: "p", Test: "TestHang"},
				{Action: "output", Package: "p", Test: "TestHang", Output: "panic: test timed out\n"},
				{Action: "fail", Package: "p"},
			},
			out: []string{"panic: test timed out"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var allow []allowed
			if tt.allow != "" {
				p := filepath.Join(t.TempDir(), "allow.txt")
				if err := os.WriteFile(p, []byte(tt.allow), 0o644); err != nil {
					t.Fatal(err)
				}
				var err error
				if allow, err = readAllowList(p); err != nil {
					t.Fatal(err)
				}
			}
			var out, verdict bytes.Buffer
			c := &checker{out: &out, verbose: tt.verbose, allow: allow, open: map[key][]string{}}
			if err := c.read(strings.NewReader(stream(t, tt.events...))); err != nil {
				t.Fatal(err)
			}
			if ok := c.report(&verdict); ok != tt.ok {
				t.Errorf("report = %v, want %v\nlog:\n%s\nverdict:\n%s", ok, tt.ok, out.String(), verdict.String())
			}
			for _, s := range tt.out {
				if !strings.Contains(out.String(), s) {
					t.Errorf("log lacks %q:\n%s", s, out.String())
				}
			}
			for _, s := range tt.notOut {
				if strings.Contains(out.String(), s) {
					t.Errorf("log has %q:\n%s", s, out.String())
				}
			}
			for _, s := range tt.verdict {
				if !strings.Contains(verdict.String(), s) {
					t.Errorf("verdict lacks %q:\n%s", s, verdict.String())
				}
			}
		})
	}
}

func TestAllowListNeedsAReason(t *testing.T) {
	for _, line := range []string{"pkg/watch TestX", "pkg/watch TestX #", "TestX # why", "pkg/watch TestX extra # why"} {
		p := filepath.Join(t.TempDir(), "allow.txt")
		if err := os.WriteFile(p, []byte(line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readAllowList(p); err == nil || !strings.Contains(err.Error(), "PACKAGE TEST # why") {
			t.Errorf("readAllowList(%q) = %v, want an error naming the format", line, err)
		}
	}
}
