package tarstream

import (
	"bytes"
	"strings"
	"testing"
)

func TestCopyExact(t *testing.T) {
	tests := []struct {
		name       string
		src        string
		size       int64
		want       string
		wantIntact bool
	}{
		{"exact", "abcd", 4, "abcd", true},
		{"shrank: padded", "ab", 4, "ab\x00\x00", false},
		{"grew: cut", "abcdef", 4, "abcd", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			r := strings.NewReader(tt.src)
			intact, err := copyExact(&out, r, r, tt.size)
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want || intact != tt.wantIntact {
				t.Errorf("copyExact = %q, %v; want %q, %v", out.String(), intact, tt.want, tt.wantIntact)
			}
		})
	}
}
