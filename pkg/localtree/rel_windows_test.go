package localtree

import "testing"

// TestRelToWindows: the spellings of one place that Windows accepts (any
// case, either slash, a UNC share) are under the root; another drive or
// share is not.
func TestRelToWindows(t *testing.T) {
	tests := []struct {
		root, p string
		want    string
		ok      bool
	}{
		{`C:\src`, `C:\src\a\b`, "a/b", true},
		{`C:\src`, `c:\SRC\a`, "a", true},
		{`C:\src`, `C:/src/a/b`, "a/b", true},
		{`C:\src`, `D:\src\a`, "", false},
		{`C:\src`, `C:\src\..\Windows`, "", false},
		{`C:\src`, `\src\a`, "", false}, // no volume: not absolute
		{`\\server\share\src`, `\\server\share\src\a`, "a", true},
		{`\\server\share\src`, `\\server2\share\src\a`, "", false},
		{`C:\`, `C:\a`, "a", true},
	}
	for _, tt := range tests {
		if got, ok := RelTo(tt.root, tt.p); got != tt.want || ok != tt.ok {
			t.Errorf("RelTo(%q, %q) = %q, %v; want %q, %v", tt.root, tt.p, got, ok, tt.want, tt.ok)
		}
	}
}
