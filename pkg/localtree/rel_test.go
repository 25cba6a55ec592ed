package localtree

import "testing"

func TestRelTo(t *testing.T) {
	tests := []struct {
		root, p string
		want    string
		ok      bool
	}{
		{"/src", "/src", "", true},
		{"/src", "/src/a/b", "a/b", true},
		{"/src", "/src/a/../b", "b", true},
		{"/src", "/srcx/a", "", false},
		{"/src", "/other", "", false},
		{"/src", "a/b", "", false},
		{"/src", "/src/../etc/passwd", "", false},
	}
	for _, tt := range tests {
		got, ok := RelTo(tt.root, tt.p)
		if got != tt.want || ok != tt.ok {
			t.Errorf("RelTo(%q, %q) = %q, %v; want %q, %v", tt.root, tt.p, got, ok, tt.want, tt.ok)
		}
	}
}
