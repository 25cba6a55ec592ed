package cmd

import "testing"

func TestShellWords(t *testing.T) {
	got := shellWords([]string{"/bin/sh", "-c", "exec /app/server --port=80", "", "it's"})
	if want := `/bin/sh -c 'exec /app/server --port=80' '' 'it'\''s'`; got != want {
		t.Errorf("shellWords = %s, want %s", got, want)
	}
}
