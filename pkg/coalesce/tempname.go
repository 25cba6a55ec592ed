package coalesce

import (
	"path/filepath"
	"strings"
	"time"
)

// TempSettle is how long a batch waits, after a temporary-looking file (see
// TempName) was closed, for the rename that usually follows: a build tool or
// `cp x .x.tmp && mv .x.tmp x` writes a temporary file and renames it over
// the real one. Cut on the close (save-complete), the batch would send the
// file under its temporary name, and the next one all of it again under the
// real name; within TempSettle the rename joins the batch, whose plan then
// finds only the real name (the temporary one is gone) and sends it once.
const TempSettle = 50 * time.Millisecond

// TempName reports whether the file at path looks like one written to be
// renamed: "x.tmp", ".x.tmp", "x.tmp.123", "x.temp", "x.part", "x.new",
// Python's and mktemp's "tmpab12cd" and "tmp.AbC123", rsync's ".x.AbC123".
// A wrong guess only costs a save TempSettle more.
func TempName(path string) bool {
	name := strings.ToLower(filepath.Base(path))
	for _, s := range []string{".tmp", ".temp", ".part", ".partial", ".new", ".crdownload"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	if strings.Contains(name, ".tmp.") || strings.Contains(name, ".tmp-") || strings.HasPrefix(name, "tmp") || strings.HasPrefix(name, ".tmp") {
		return true
	}
	// rsync's ".name.XXXXXX": hidden, and six letters or digits after the last dot.
	if dot := strings.LastIndexByte(name, '.'); len(name) > 1 && name[0] == '.' && dot > 1 && len(name)-dot-1 == 6 {
		for _, r := range filepath.Base(path)[dot+1:] {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return false
			}
		}
		return true
	}
	return false
}
