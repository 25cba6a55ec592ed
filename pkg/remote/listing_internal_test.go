package remote

import (
	"slices"
	"strings"
	"testing"
)

// splitFields splits stat's fields as strings.Fields did, reusing its room.
func TestSplitFields(t *testing.T) {
	var fa [8]string
	for _, s := range []string{"", " ", "81a4 12 1700000000", "81a4  12 1700000000 2026-12-06 21:15:01.123456789 +0000", " a b ", "a"} {
		if got, want := splitFields(s, fa[:0]), strings.Fields(s); !slices.Equal(got, want) {
			t.Errorf("splitFields(%q) = %q, want %q", s, got, want)
		}
	}
}

// parseLines finds each name after the fields, whatever spaces and newlines the names hold,
// and skips a name stat printed no line for.
func TestParseLines(t *testing.T) {
	names := []string{"./a b", "./gone", "./new\nline", "./x"}
	out := "81a4 1 2 ./a b\n81a4 3 4 ./new\nline\nbad line\n"
	var got []string
	parseLines(out, names, func(name, fields string) { got = append(got, fields+"|"+name) })
	if want := []string{"81a4 1 2|./a b", "81a4 3 4|./new\nline"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
