package filesync

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/tarstream"
)

// prefixWriter keeps the first max bytes written to it, then fails: the
// header of a huge entry without streaming its content.
type prefixWriter struct {
	bytes.Buffer
	max int
}

var errPrefixFull = errors.New("prefix is full")

func (w *prefixWriter) Write(p []byte) (int, error) {
	n := min(len(p), w.max-w.Len())
	w.Buffer.Write(p[:n])
	if n < len(p) {
		return n, errPrefixFull
	}
	return n, nil
}

// A file of 8 GiB or more does not fit the octal size field of a ustar
// header. Busybox tar ignores the PAX size record that archive/tar writes
// for it and extracts an empty file; both tars read the GNU base-256 size
// field. Streaming 8 GiB through tar takes minutes on a loaded machine, so
// this test lists the header of a prefix of the archive with each tar
// (`tar -tv` prints an entry before reading its content) and checks the size
// they see; the content itself takes the same path as any other file.
func TestWriteArchiveHugeFileSize(t *testing.T) {
	dir := t.TempDir()
	const size = 8<<30 + 5 // one past the largest ustar size, plus some
	// A long non-ASCII name: the GNU format carries it in a long-name entry.
	name := "dir with space/ünïcødé-" + strings.Repeat("long-", 30)
	huge := filepath.Join(dir, name)
	must(t, os.MkdirAll(filepath.Dir(huge), 0o755))
	f, err := os.Create(huge)
	must(t, err)
	must(t, f.Close())
	must(t, os.Truncate(huge, size)) // sparse: no disk used
	writeTree(t, dir, map[string]string{"small": "s"})

	w := &prefixWriter{max: 64 << 10}
	if _, err := tarstream.Write(w, planner.TarFiles(copiesOf(t, dir))); !errors.Is(err, errPrefixFull) {
		t.Fatalf("writeArchive = %v, want it stopped by the prefix writer", err)
	}
	for tool, argv := range map[string][]string{
		"busybox": {"/bin/busybox", "tar", "-tvf", "-"},
		"gnu":     {"tar", "-tvf", "-"},
	} {
		t.Run(tool, func(t *testing.T) {
			if _, err := exec.LookPath(argv[0]); err != nil {
				t.Skipf("needs %s", argv[0])
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Stdin = bytes.NewReader(w.Bytes())
			out, _ := cmd.Output() // the prefix ends mid-entry: tar fails after listing it
			var got int64 = -1
			for _, line := range strings.Split(string(out), "\n") {
				if f := strings.Fields(line); len(f) >= 6 && strings.HasSuffix(line, " "+name) {
					got, _ = strconv.ParseInt(f[2], 10, 64)
				}
			}
			if got != size {
				t.Errorf("%s lists the huge file with size %d, want %d; output:\n%s", tool, got, int64(size), out)
			}
		})
	}
}
