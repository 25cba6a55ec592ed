package remote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// apply.sh moves and copies what the container holds, under the checks of
// any entry: a source is used only if it is the confirmed content and is
// reached through no symlink, a destination never through one; a refusal
// changes nothing and exits 6.
func TestApplyMoves(t *testing.T) {
	big := strings.Repeat("the binary\n", 1000)
	sum := sha256.Sum256([]byte(big))
	other := sha256.Sum256([]byte("something else"))
	tests := []struct {
		name    string
		tree    map[string]string
		links   map[string]string // name -> target, made after tree
		args    ApplyArgs
		refused bool
		want    map[string]string // what the tree holds after
	}{
		{name: "rename over the old file",
			tree: map[string]string{".server.tmp": big, "server": "old"},
			args: ApplyArgs{Moves: [][2]string{MoveArgs("./.server.tmp", "./server", sum, false, 0o755)}, Deletes: []string{"./.server.tmp"}},
			want: map[string]string{"server": big}},
		{name: "copy keeps the source, into a new directory",
			tree: map[string]string{"a/x.bin": big},
			args: ApplyArgs{Moves: [][2]string{MoveArgs("./a/x.bin", "./b/c/x.bin", sum, true, 0o644)}},
			want: map[string]string{"a/x.bin": big, "b/c/x.bin": big}},
		{name: "a moved directory: moves before the delete",
			tree: map[string]string{"old/x.bin": big, "old/y": "y"},
			args: ApplyArgs{Moves: [][2]string{MoveArgs("./old/x.bin", "./new/x.bin", sum, false, 0o644)}, Deletes: []string{"./old"}},
			want: map[string]string{"new/x.bin": big}},
		{name: "a source that changed is refused, nothing changes",
			tree:    map[string]string{"a": big, "gone": "g"},
			args:    ApplyArgs{Moves: [][2]string{MoveArgs("./a", "./b", other, false, 0o644)}, Deletes: []string{"./gone"}},
			refused: true, want: map[string]string{"a": big, "gone": "g"}},
		{name: "a missing source is refused",
			tree:    map[string]string{"b": "old"},
			args:    ApplyArgs{Moves: [][2]string{MoveArgs("./a", "./b", sum, false, 0o644)}},
			refused: true, want: map[string]string{"b": "old"}},
		{name: "a source through a symlink is refused",
			tree:    map[string]string{"real/a": big},
			links:   map[string]string{"via": "real"},
			args:    ApplyArgs{Moves: [][2]string{MoveArgs("./via/a", "./b", sum, false, 0o644)}},
			refused: true, want: map[string]string{"real/a": big, "via": "->real"}},
		{name: "a source that is a symlink is refused",
			tree:    map[string]string{"real": big},
			links:   map[string]string{"a": "real"},
			args:    ApplyArgs{Moves: [][2]string{MoveArgs("./a", "./b", sum, true, 0o644)}},
			refused: true, want: map[string]string{"real": big, "a": "->real"}},
		{name: "a destination through a symlink is refused",
			tree:    map[string]string{"a": big, "elsewhere/.keep": ""},
			links:   map[string]string{"d": "elsewhere"},
			args:    ApplyArgs{Moves: [][2]string{MoveArgs("./a", "./d/b", sum, true, 0o644)}},
			refused: true, want: map[string]string{"a": big, "elsewhere/.keep": "", "d": "->elsewhere"}},
		{name: "a directory in the way is refused",
			tree:    map[string]string{"a": big, "b/.keep": ""},
			args:    ApplyArgs{Moves: [][2]string{MoveArgs("./a", "./b", sum, false, 0o644)}},
			refused: true, want: map[string]string{"a": big, "b/.keep": ""}},
	}
	exs := executors(t)
	exs["busybox-nosha256sum"] = busybox(t, "sha256sum")
	for name, ex := range exs {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				root := t.TempDir()
				writeTree(t, root, tt.tree)
				for l, target := range tt.links {
					must(t, os.Symlink(target, filepath.Join(root, l)))
				}
				a := tt.args
				a.Root = root
				var out bytes.Buffer
				err := ex.Exec(context.Background(), testTarget, a.Argv(), nil, &out, io.Discard)
				refused := tt.refused || name == "busybox-nosha256sum"
				if refused != IsMoveRefused(err) || !refused && err != nil {
					t.Fatalf("apply: %v (stdout %q), want refused %v", err, out.String(), refused)
				}
				want := tt.want
				if name == "busybox-nosha256sum" {
					// A copy: adding the links to tt.tree itself made the next
					// executor's writeTree write them as files first (map order).
					want = maps.Clone(tt.tree)
					for l, target := range tt.links {
						want[l] = "->" + target
					}
				}
				got := readLinksTree(t, root)
				if len(got) != len(want) {
					t.Fatalf("tree %q, want %q", got, want)
				}
				for k, v := range want {
					if got[k] != v {
						t.Fatalf("tree %q, want %q", got, want)
					}
				}
				if !refused {
					for _, m := range a.Moves {
						dst := filepath.Join(root, strings.TrimPrefix(m[1][strings.Index(m[1], "./"):], "./"))
						fi, err := os.Stat(dst)
						must(t, err)
						if want := strings.TrimPrefix(m[1][:strings.Index(m[1], "./")], "t"); fi.Mode().Perm().String() != modeString(want) {
							t.Errorf("%s: mode %v, want %s", dst, fi.Mode().Perm(), want)
						}
					}
				}
			})
		}
	}
}

// readLinksTree is readTree with symlinks as "->target" and empty
// directories left out.
func readLinksTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	must(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[filepath.ToSlash(rel)] = "->" + l
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	}))
	return out
}

func modeString(octal string) string {
	var m os.FileMode
	for _, c := range octal {
		m = m<<3 | os.FileMode(c-'0')
	}
	return m.Perm().String()
}

// A move's or copy's source saved by the container between its check and what is done to it
// (a write that lands after sha256sum looked) never goes under the destination's name: a copy
// is hashed where it was copied to, a move's source is taken aside and hashed there, and one
// that differs is refused (exit 6: the file is sent whole); a moved source goes back. Before,
// the container's new bytes went under the local name (TestModel seed 15561879248287108722
// round 706: a dd into the source while the session copied it), and a moved source was gone.
func TestApplyMoveHashesWhatItTook(t *testing.T) {
	big := strings.Repeat("the binary\n", 1000)
	sum := sha256.Sum256([]byte(big))
	for _, tt := range []struct {
		name, tool, shim string
		keep             bool
		want             map[string]string
	}{
		// The container's write lands between the check and the copy.
		{"copy", "cp", "printf 'written meanwhile' >>\"$2\"\n", true, map[string]string{"a/x.bin": big + "written meanwhile"}},
		// The container's write lands right before the first rename of the source.
		{"move", "mv", "case $3 in */a/x.bin) printf 'written meanwhile' >>\"$3\" ;; esac\n", false, map[string]string{"a/x.bin": big + "written meanwhile"}},
		// The source became a link to the same bytes (reached from either directory): a link never
		// goes under the local name.
		{"move of a source now a link", "mv", "case $3 in */a/x.bin) /bin/busybox mv \"$3\" \"${3%/*}/real.bin\"; /bin/busybox ln -s ../a/real.bin \"$3\" ;; esac\n", false,
			map[string]string{"a/x.bin": "->../a/real.bin", "a/real.bin": big}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ex := busybox(t, tt.tool)
			shim := "#!/bin/sh\n" + tt.shim + "exec /bin/busybox " + tt.tool + " \"$@\"\n"
			must(t, os.WriteFile(filepath.Join(ex.Bin, tt.tool), []byte(shim), 0o755))
			root := t.TempDir()
			writeTree(t, root, map[string]string{"a/x.bin": big})
			a := ApplyArgs{Root: root, Moves: [][2]string{MoveArgs("./a/x.bin", "./b/x.bin", sum, tt.keep, 0o644)}}
			var out bytes.Buffer
			err := ex.Exec(context.Background(), testTarget, a.Argv(), nil, &out, io.Discard)
			if !IsMoveRefused(err) {
				t.Fatalf("apply: %v (stdout %q), want the %s refused", err, out.String(), tt.name)
			}
			if got := readLinksTree(t, root); !maps.Equal(got, tt.want) {
				t.Fatalf("tree %q, want only the source, as the container left it: %q", got, tt.want)
			}
		})
	}
}
