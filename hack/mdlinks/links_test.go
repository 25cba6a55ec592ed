package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Restarting the app after a sync: `--restart`":     "restarting-the-app-after-a-sync---restart",
		"Helper containers: distroless, scratch, non-root": "helper-containers-distroless-scratch-non-root",
		"What a committed `livesync.yaml` can do":          "what-a-committed-livesyncyaml-can-do",
		"NDJSON events (`-o json`)":                        "ndjson-events--o-json",
		"JSON / YAML contract (stable)":                    "json--yaml-contract-stable",
		"See [Safety](safety.md) first":                    "see-safety-first",
		"**Bold** and snake_case":                          "bold-and-snake_case",
		"Größe ändern":                                     "größe-ändern",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A page\n\n## Twice\n\n## Twice\n\n<a id=\"custom\"></a>\n\n```sh\n# not a heading\n[not](a-link.md)\n```\n")
	write("docs/rbac.yaml", "kind: Role\n")
	write("README.md", strings.Join([]string{
		"# Top",
		"[ok](docs/a.md) [ok](docs/a.md#twice) [ok](docs/a.md#twice-1) [ok](docs/a.md#custom)",
		"[ok](#top) [ok](docs/rbac.yaml) [ok](docs/) [ok](https://example.com/x#y)",
		"[ok](https://github.com/livesync-dev/kubectl-livesync/blob/main/docs/a.md#a-page)",
		"`[code](missing.md)` is code, not a link",
		"[bad](docs/missing.md)",
		"[bad](docs/a.md#twice-2)",
		"[bad](#nowhere)",
		"[bad](../outside.md)",
		"[bad](https://github.com/livesync-dev/kubectl-livesync/blob/main/docs/gone.md)",
		"[bad](docs/rbac.yaml#role)",
		"[ref]: docs/also-missing.md",
		"",
	}, "\n"))
	c := newChecker(root)
	problems, err := c.checkFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"docs/missing.md", "#twice-2", "#nowhere", "../outside.md", "docs/gone.md", "rbac.yaml#role", "docs/also-missing.md"}
	if len(problems) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(problems), len(want), strings.Join(problems, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(problems[i], w) {
			t.Errorf("problem %d = %q, want it about %q", i, problems[i], w)
		}
	}
	a, err := c.anchorsOf(filepath.Join(root, "docs/a.md"))
	if err != nil {
		t.Fatal(err)
	}
	if a["not-a-heading"] {
		t.Error("a # line inside a code fence was taken for a heading")
	}
}
