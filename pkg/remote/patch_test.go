package remote

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// apply.sh builds a patched file from blocks of the old one and bytes of
// stdin, beside it, and renames it over the old one only once it hashes as
// the new one; anything else leaves the old file as it was and exits 7.
func TestApplyPatch(t *testing.T) {
	old := []byte("AAAABBBBCCCCDDDD")
	newer := []byte("AAAAxyBBBBCCCCzzDD") // bytes inserted: later blocks shift
	ops := []string{"B0:1", "L2", "B1:2", "L4"}
	lit := "xyzzDD"
	sum := func(b []byte) [32]byte { return sha256.Sum256(b) }
	tests := []struct {
		name    string
		old     [32]byte
		new     [32]byte
		stdin   string
		link    bool   // a symlink sits where the temporary file goes
		held    []byte // what the container holds, if not old
		refused bool
	}{
		{name: "patched", old: sum(old), new: sum(newer), stdin: lit},
		{name: "a symlink at the temporary name is not written through", old: sum(old), new: sum(newer), stdin: lit, link: true},
		{name: "the old file changed", old: sum(old), new: sum(newer), stdin: lit, held: []byte("AAAAbbbbCCCCDDDD"), refused: true},
		{name: "stdin cut short", old: sum(old), new: sum(newer), stdin: lit[:3], refused: true},
		{name: "the result is not the new file", old: sum(old), new: sum([]byte("other")), stdin: lit, refused: true},
	}
	for name, ex := range withStreams(t) {
		for _, tc := range tests {
			for _, gz := range []bool{false, true} {
				tt := tc
				if gz {
					var b bytes.Buffer
					zw := gzip.NewWriter(&b)
					_, _ = zw.Write([]byte(tt.stdin))
					_ = zw.Close()
					if tt.name == "stdin cut short" {
						tt.stdin = b.String()[:b.Len()/2]
					} else {
						tt.stdin = b.String()
					}
				}
				t.Run(fmt.Sprintf("%s/%s/gz=%v", name, tt.name, gz), func(t *testing.T) {
					root := t.TempDir()
					held := old
					if tt.held != nil {
						held = tt.held
					}
					writeTree(t, root, map[string]string{"d/bin": string(held)})
					outside := filepath.Join(t.TempDir(), "outside")
					must(t, os.WriteFile(outside, []byte("keep"), 0o644))
					if tt.link {
						must(t, os.Symlink(outside, filepath.Join(root, "d", ".livesync-patch.bin")))
					}
					a := &ApplyArgs{Root: root, Patch: PatchArgs("./d/bin", tt.old, tt.new, 0o755, 4, ops), Gz: gz}
					err := ex.Exec(context.Background(), testTarget, a.Argv(), strings.NewReader(tt.stdin), io.Discard, io.Discard)
					if tt.refused != IsPatchRefused(err) || !tt.refused && err != nil {
						t.Fatalf("apply: %v, want refused %v", err, tt.refused)
					}
					want := newer
					if tt.refused {
						want = held
					}
					got, err := os.ReadFile(filepath.Join(root, "d", "bin"))
					must(t, err)
					if !bytes.Equal(got, want) {
						t.Fatalf("file %q, want %q", got, want)
					}
					if b, _ := os.ReadFile(outside); string(b) != "keep" {
						t.Fatalf("written through a symlink: %q", b)
					}
					tree := readLinksTree(t, root)
					if len(tree) != 1 {
						t.Fatalf("left behind: %q", tree)
					}
					if fi, _ := os.Stat(filepath.Join(root, "d", "bin")); !tt.refused && fi.Mode().Perm() != 0o755 {
						t.Errorf("mode %v, want 0755", fi.Mode().Perm())
					}
				})
			}
		}
	}
}

// A patch carries its file's precondition (sync-back's) in its own exec,
// tested before anything is built: a container change the patch does not
// carry (bytes appended past its last block) is refused as a
// *ChangedError naming what is there, the file as it was and nothing left
// beside it; a file that still holds the ancestor is patched.
func TestApplyPatchPrecondition(t *testing.T) {
	old := []byte("AAAABBBBCCCCDDDD")
	newer := []byte("AAAAxyBBBBCCCCzzDD")
	ops := []string{"B0:1", "L2", "B1:2", "L4"}
	lit := "xyzzDD"
	appended := append(bytes.Clone(old), "appended by the app"...)
	for name, ex := range withStreams(t) {
		for _, held := range [][]byte{old, appended} {
			t.Run(fmt.Sprintf("%s/%d bytes held", name, len(held)), func(t *testing.T) {
				root := t.TempDir()
				writeTree(t, root, map[string]string{"d/bin": string(held)})
				sum := sha256.Sum256(old)
				a := &ApplyArgs{Root: root, Expect: []string{ExpectFile("./d/bin", &sum, int64(len(old)), 0)},
					Patch: PatchArgs("./d/bin", sum, sha256.Sum256(newer), 0o755, 4, ops)}
				_, err := Apply(context.Background(), ex, testTarget, "patching files", a, strings.NewReader(lit))
				want := newer
				if !bytes.Equal(held, old) {
					want = held
					var ce *ChangedError
					if !errors.As(err, &ce) || len(ce.Changed) != 1 || ce.Changed[0] != (Changed{Name: "./d/bin", Now: fmt.Sprintf("%x", sha256.Sum256(held))}) {
						t.Fatalf("apply: %v, want the precondition's *ChangedError", err)
					}
				} else if err != nil {
					t.Fatal(err)
				}
				if got, _ := os.ReadFile(filepath.Join(root, "d", "bin")); !bytes.Equal(got, want) {
					t.Fatalf("file %q, want %q", got, want)
				}
				if tree := readLinksTree(t, root); len(tree) != 1 {
					t.Fatalf("left behind: %q", tree)
				}
			})
		}
	}
}
