package remote

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/localexec"
)

// racingExecutors returns localexec.Racing's runners, each also over a
// stream.
func racingExecutors(t *testing.T) map[string]Executor {
	t.Helper()
	out := map[string]Executor{}
	for name, r := range localexec.Racing(t) {
		out[name] = &localExecutor{Runner: *r}
		out[name+" stream"] = out[name]
	}
	return out
}

// TestApplyChecksAgainAsItReplaces: a container save that lands after
// apply.sh tested a file's precondition, before the batch replaces or
// deletes the file, is kept, reported as changed, and the rest of the batch
// is done. Before, the tar extracted over it (and rm deleted it) under a
// test that had passed: seeds of TestModel found such saves 1 ms after the
// local one lost three times.
func TestApplyChecksAgainAsItReplaces(t *testing.T) {
	sum := func(s string) *[32]byte { h := sha256.Sum256([]byte(s)); return &h }
	theirs := "v1, then the container's own save"
	for name, ex := range racingExecutors(t) {
		t.Run(name, func(t *testing.T) {
			for _, tt := range []struct {
				name      string
				there     bool   // lock.json holds v1 before the batch
				check     string // its precondition
				del       bool   // the batch deletes it, else sends "v2 from local"
				tool      string // when the container's save lands (see racingExecutors)
				at        int
				want      string // lock.json after the batch ("" gone)
				changedTo string // what the batch reports it found (sha256 hex), "" nothing
			}{
				{"replaced, no save", true, ExpectFile("./lock.json", sum("v1"), 2, 0), false, "", 0, "v2 from local", ""},
				{"replaced, the save before the tar", true, ExpectFile("./lock.json", sum("v1"), 2, 0), false, "tar", 1, theirs, hex.EncodeToString(sum(theirs)[:])},
				{"replaced, the save after it was taken aside", true, ExpectFile("./lock.json", sum("v1"), 2, 0), false, "ln", 1, theirs, hex.EncodeToString(sum(theirs)[:])},
				// After the new file was linked in: the container's
				// save is the newer, and stays; nothing was lost.
				{"replaced, the save after it was placed", true, ExpectFile("./lock.json", sum("v1"), 2, 0), false, "sha256sum", 2, theirs, ""},
				{"made, the save after nothing was taken", false, ExpectAbsent("./lock.json"), false, "ln", 1, theirs, hex.EncodeToString(sum(theirs)[:])},
				{"made, no save", false, ExpectAbsent("./lock.json"), false, "", 0, "v2 from local", ""},
				{"made, the save before the tar", false, ExpectAbsent("./lock.json"), false, "tar", 1, theirs, hex.EncodeToString(sum(theirs)[:])},
				{"one of, the save before the tar", true, ExpectOneOf("./lock.json", []*[32]byte{sum("v1"), sum("v2 from local")}), false, "tar", 1, theirs, hex.EncodeToString(sum(theirs)[:])},
				{"deleted, no save", true, ExpectFile("./lock.json", sum("v1"), 2, 0), true, "", 0, "", ""},
				{"deleted, the save before the delete", true, ExpectFile("./lock.json", sum("v1"), 2, 0), true, "sha256sum", 1, theirs, hex.EncodeToString(sum(theirs)[:])},
				// Made after the old file was taken aside and checked:
				// newer than the delete, so it stays, and nothing is
				// reported (the delete happened, and then the save).
				{"deleted, the save after it was taken aside", true, ExpectFile("./lock.json", sum("v1"), 2, 0), true, "sha256sum", 2, theirs, ""},
			} {
				dir, tmp := t.TempDir(), t.TempDir()
				t.Setenv("RACE_FILE", filepath.Join(dir, "lock.json"))
				t.Setenv("RACE_TMP", filepath.Join(tmp, "save"))
				t.Setenv("RACE_BODY", theirs)
				t.Setenv("RACE_COUNT", filepath.Join(tmp, "count"))
				t.Setenv("RACE_TOOL", tt.tool)
				t.Setenv("RACE_AT", fmt.Sprint(tt.at))
				ex := ex
				if strings.HasSuffix(name, " stream") {
					// A loop of its own: it keeps the environment it
					// started with.
					ex, _ = newTestStreams(t, ex)
				}
				if tt.there {
					writeTree(t, dir, map[string]string{"lock.json": "v1"})
				}
				var b bytes.Buffer
				tw := tar.NewWriter(&b)
				files := map[string]string{"other.txt": "sent beside it"}
				a := &ApplyArgs{Root: dir, Expect: []string{tt.check}, Tar: true}
				if tt.del {
					a.Takes = []string{TakeArgs(tt.check)}
				} else {
					files[StagedName("lock.json")] = "v2 from local"
					a.Places = []string{PlaceArgs(tt.check)}
				}
				for n, body := range files {
					must(t, tw.WriteHeader(&tar.Header{Name: n, Mode: 0o640, Size: int64(len(body)), ModTime: time.Unix(1700000000, 0)}))
					_, err := tw.Write([]byte(body))
					must(t, err)
				}
				must(t, tw.Close())
				_, err := Apply(context.Background(), ex, testTarget, "copying files", a, &b)
				var ce *ChangedError
				switch {
				case tt.changedTo == "" && err != nil:
					t.Errorf("%s: %v", tt.name, err)
				case tt.changedTo != "" && !errors.As(err, &ce):
					t.Errorf("%s: %v, want lock.json reported changed", tt.name, err)
				case tt.changedTo != "" && (!ce.Applied || len(ce.Changed) != 1 || ce.Changed[0] != Changed{Name: "./lock.json", Now: tt.changedTo}):
					t.Errorf("%s: %+v, want lock.json changed to %s, the rest applied", tt.name, ce, tt.changedTo)
				}
				got := readTree(t, dir)
				want := map[string]string{"other.txt": "file -rw-r----- sent beside it"}
				switch {
				case tt.want == "v2 from local":
					want["lock.json"] = "file -rw-r----- " + tt.want
				case tt.want != "":
					want["lock.json"] = "file -rw-r--r-- " + tt.want
				}
				if !maps.Equal(got, want) {
					t.Errorf("%s: the container holds %q, want %q", tt.name, got, want)
				}
				if tt.want == "v2 from local" {
					if fi, err := os.Stat(filepath.Join(dir, "lock.json")); err != nil || !fi.ModTime().Equal(time.Unix(1700000000, 0)) {
						t.Errorf("%s: lock.json's mtime: %v", tt.name, err)
					}
				}
			}
		})
	}
}
