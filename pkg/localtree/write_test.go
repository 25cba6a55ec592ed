package localtree

import (
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testtree"
)

func expectOf(t *testing.T, content string) Expect {
	t.Helper()
	return Expect{Size: int64(len(content)), Sum: sha256.Sum256([]byte(content))}
}

func TestReplaceFile(t *testing.T) {
	mtime := time.Unix(1_700_000_000, 0)
	t.Run("new file in new directories keeps mode and mtime", func(t *testing.T) {
		root := t.TempDir()
		sum := sha256.Sum256([]byte("lock"))
		fi, err := ReplaceFile(root, "gen/sub/a.lock", strings.NewReader("lock"), 0o751, mtime, &sum, Expect{Absent: true})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(root, "gen/sub/a.lock"))
		if string(b) != "lock" || fi.Mode().Perm() != filePerm(0o751) || !fi.ModTime().Equal(mtime) {
			t.Fatalf("content %q mode %v mtime %v", b, fi.Mode(), fi.ModTime())
		}
		assertNoTemp(t, filepath.Join(root, "gen/sub"))
	})
	t.Run("replaces the ancestor", func(t *testing.T) {
		root := t.TempDir()
		writeFile(t, filepath.Join(root, "a"), "old")
		if _, err := ReplaceFile(root, "a", strings.NewReader("new"), 0o644, mtime, nil, expectOf(t, "old")); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(root, "a")); string(b) != "new" {
			t.Fatalf("got %q", b)
		}
	})
	t.Run("a local edit is never overwritten", func(t *testing.T) {
		for name, local := range map[string]string{"content": "OLD", "size": "edited", "created": "x"} {
			t.Run(name, func(t *testing.T) {
				root := t.TempDir()
				writeFile(t, filepath.Join(root, "a"), local)
				want := expectOf(t, "old")
				if name == "created" {
					want = Expect{Absent: true}
				}
				_, err := ReplaceFile(root, "a", strings.NewReader("new"), 0o644, mtime, nil, want)
				if !errors.Is(err, ErrChanged) {
					t.Fatalf("want ErrChanged, got %v", err)
				}
				if b, _ := os.ReadFile(filepath.Join(root, "a")); string(b) != local {
					t.Fatalf("local file now %q", b)
				}
				assertNoTemp(t, root)
			})
		}
	})
	t.Run("an edit while the download is written is never overwritten", func(t *testing.T) {
		root := t.TempDir()
		writeFile(t, filepath.Join(root, "a"), "old")
		r := &editWhileRead{name: filepath.Join(root, "a"), s: "new"}
		_, err := ReplaceFile(root, "a", r, 0o644, mtime, nil, expectOf(t, "old"))
		if !errors.Is(err, ErrChanged) {
			t.Fatalf("want ErrChanged, got %v", err)
		}
		if b, _ := os.ReadFile(filepath.Join(root, "a")); string(b) != "saved by the user" {
			t.Fatalf("local file now %q", b)
		}
		assertNoTemp(t, root)
	})
	t.Run("content that does not hash to the scan's is not written", func(t *testing.T) {
		root := t.TempDir()
		sum := sha256.Sum256([]byte("other"))
		if _, err := ReplaceFile(root, "a", strings.NewReader("new"), 0o644, mtime, &sum, Expect{Absent: true}); err == nil {
			t.Fatal("written")
		}
		if _, err := os.Lstat(filepath.Join(root, "a")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a exists: %v", err)
		}
		assertNoTemp(t, root)
	})
	t.Run("never through a symlink", func(t *testing.T) {
		outside := t.TempDir()
		for name, link := range map[string]string{"outside": outside, "inside": "real"} {
			t.Run(name, func(t *testing.T) {
				root := t.TempDir()
				if err := os.Mkdir(filepath.Join(root, "real"), 0o755); err != nil {
					t.Fatal(err)
				}
				testtree.Symlink(t, link, filepath.Join(root, "gen"))
				_, err := ReplaceFile(root, "gen/a", strings.NewReader("x"), 0o644, mtime, nil, Expect{Absent: true})
				if !errors.Is(err, ErrSymlinkInPath) {
					t.Fatalf("want ErrSymlinkInPath, got %v", err)
				}
				for _, d := range []string{outside, filepath.Join(root, "real")} {
					if ents, _ := os.ReadDir(d); len(ents) != 0 {
						t.Fatalf("written through the link into %s: %v", d, ents)
					}
				}
			})
		}
	})
	t.Run("a symlink at the name is a local change", func(t *testing.T) {
		root := t.TempDir()
		testtree.Symlink(t, "/etc/passwd", filepath.Join(root, "a"))
		if _, err := ReplaceFile(root, "a", strings.NewReader("x"), 0o644, mtime, nil, expectOf(t, "old")); !errors.Is(err, ErrChanged) {
			t.Fatalf("want ErrChanged, got %v", err)
		}
	})
	t.Run("never outside the root", func(t *testing.T) {
		root := t.TempDir()
		for _, rel := range []string{"../x", "/etc/x", "a/../../x", ""} {
			if _, err := ReplaceFile(root, rel, strings.NewReader("x"), 0o644, mtime, nil, Expect{Absent: true}); err == nil {
				t.Fatalf("%q written", rel)
			}
		}
	})
}

func TestRemoveFile(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "a"), "old")
	writeFile(t, filepath.Join(root, "b"), "edited")
	if err := RemoveFile(root, "a", expectOf(t, "old")); err != nil {
		t.Fatal(err)
	}
	if err := RemoveFile(root, "b", expectOf(t, "old")); !errors.Is(err, ErrChanged) {
		t.Fatalf("want ErrChanged, got %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a is still there")
	}
	if b, _ := os.ReadFile(filepath.Join(root, "b")); string(b) != "edited" {
		t.Fatalf("b is %q", b)
	}
}

func TestMakeDir(t *testing.T) {
	root := t.TempDir()
	if _, err := MakeDir(root, "a/b/c", 0o700); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(root, "a/b/c"))
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != dirPerm(0o700) {
		t.Fatalf("%v %v", fi, err)
	}
	writeFile(t, filepath.Join(root, "f"), "x")
	if _, err := MakeDir(root, "f", 0o755); !errors.Is(err, ErrChanged) {
		t.Fatalf("a file in the way: %v", err)
	}
}

// editWhileRead is a download during which the user saves the file.
type editWhileRead struct {
	name string
	s    string
	done bool
}

func (r *editWhileRead) Read(p []byte) (int, error) {
	if r.done {
		return 0, errEOF
	}
	r.done = true
	if err := os.WriteFile(r.name, []byte("saved by the user"), 0o644); err != nil {
		return 0, err
	}
	return copy(p, r.s), nil
}

var errEOF = io.EOF

func writeFile(t *testing.T, name, s string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".livesync-") {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
}

// filePerm is the mode a file made with perm shows: Windows keeps only
// whether the owner may write (the read-only attribute).
func filePerm(perm fs.FileMode) fs.FileMode {
	if runtime.GOOS != "windows" {
		return perm
	}
	if perm&0o200 != 0 {
		return 0o666
	}
	return 0o444
}

// dirPerm is the mode a directory made with perm shows: Windows has none.
func dirPerm(perm fs.FileMode) fs.FileMode {
	if runtime.GOOS == "windows" {
		return 0o777
	}
	return perm
}

// TestNoWriteIntoGit: the writers refuse a path in .git however spelled,
// whatever the local file system makes of it.
func TestNoWriteIntoGit(t *testing.T) {
	root := t.TempDir()
	for _, rel := range []string{".GIT/config", "sub/.g\u200cit/hooks/post-checkout", "GIT~1/x", ".git./x", ".git"} {
		if _, err := ReplaceFile(root, rel, strings.NewReader("x"), 0o755, time.Now(), nil, Expect{Absent: true}); !errors.Is(err, ErrGitPath) {
			t.Errorf("ReplaceFile(%q): %v", rel, err)
		}
		if _, err := MakeDir(root, rel, 0o755); !errors.Is(err, ErrGitPath) {
			t.Errorf("MakeDir(%q): %v", rel, err)
		}
		if err := RemoveFile(root, rel, Expect{}); !errors.Is(err, ErrGitPath) {
			t.Errorf("RemoveFile(%q): %v", rel, err)
		}
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("written: %v", ents)
	}
}

// TestReplaceFileSaveBeforeRename: an editor's save (temp + rename) that
// lands after ReplaceFile's checks and right before its own rename, or
// right after the rename took the file away, is never replaced: ErrChanged,
// and the save is what the file holds. With the atomic exchange and with
// the fallback used where there is none.
func TestReplaceFileSaveBeforeRename(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(map[bool]string{false: "exchange", true: "fallback"}[fallback], func(t *testing.T) {
			if fallback {
				noExchange = true
				t.Cleanup(func() { noExchange = false })
			}
			for _, tc := range []struct {
				name, local, at string
				want            Expect
			}{
				{"over the ancestor", "old", "rename", expectOf(t, "old")},
				{"over nothing", "", "rename", Expect{Absent: true}},
				{"after the rename took the ancestor", "old", "taken", expectOf(t, "old")},
			} {
				t.Run(tc.name, func(t *testing.T) {
					root := t.TempDir()
					name := filepath.Join(root, "a")
					if tc.local != "" {
						writeFile(t, name, tc.local)
					}
					hooked := 0
					hook = func(at string) {
						if at != tc.at {
							return
						}
						hooked++
						writeFile(t, filepath.Join(root, ".a.swp"), "saved by the user")
						if err := os.Rename(filepath.Join(root, ".a.swp"), name); err != nil {
							t.Fatal(err)
						}
					}
					t.Cleanup(func() { hook = nil })
					_, err := ReplaceFile(root, "a", strings.NewReader("from the container"), 0o644, time.Now(), nil, tc.want)
					if hooked != 1 {
						t.Fatalf("the hook ran %d times", hooked)
					}
					if b, _ := os.ReadFile(name); string(b) != "saved by the user" {
						t.Fatalf("the user's save was replaced: the file holds %q (ReplaceFile: %v)", b, err)
					}
					if !errors.Is(err, ErrChanged) {
						t.Fatalf("want ErrChanged, got %v", err)
					}
					assertNoTemp(t, root)
				})
			}
		})
	}
}
