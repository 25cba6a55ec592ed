package remote

import (
	"strings"
	"testing"
)

// The scripts travel without their comment and blank lines, and start with
// their first command.
func TestScriptsDropComments(t *testing.T) {
	for name, first := range map[string]string{
		"apply.sh":      "set -e\n",
		"list.sh":       "d=$1\n",
		"list-chunk.sh": "h=$1; shift\n",
		"on-sync.sh":    `export LIVESYNC_CHANGED="$1"; exec sh -c "$2"` + "\n",
	} {
		got := script(name)
		if !strings.HasPrefix(got, first) {
			t.Errorf("script(%q) starts with %q, want %q", name, got[:min(len(got), 40)], first)
		}
		for line := range strings.Lines(got) {
			if s := strings.TrimSpace(line); s == "" || strings.HasPrefix(s, "#") {
				t.Errorf("script(%q) kept line %q", name, line)
			}
		}
	}
}
