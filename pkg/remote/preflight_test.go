package remote

import (
	"strings"
	"testing"
)

func TestParsePreflight(t *testing.T) {
	good := "uid=1000\ngid=1000\nstream=yes\ntar=yes\nroot=missing\nwritable=no\nhelper=no\n"
	c, err := ParsePreflight(good)
	if err != nil || *c != (Check{UID: "1000", GID: "1000", Stream: true, Tar: true, Root: RootMissing}) {
		t.Errorf("ParsePreflight(%q) = %+v, %v", good, c, err)
	}
	for _, bad := range []string{"", "uid=0\n", strings.Replace(good, "root=missing", "root=what", 1),
		strings.Replace(good, "tar=yes", "tar=", 1), "sh: oops\n" + good} {
		if _, err := ParsePreflight(bad); err == nil || !strings.Contains(err.Error(), "unexpected preflight output") {
			t.Errorf("ParsePreflight(%q): err %v", bad, err)
		}
	}
}
