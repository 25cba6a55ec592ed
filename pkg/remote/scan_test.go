package remote

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/ignore"
)

// scanNames returns the names a scan listed, sorted, without ".".
func scanNames(r *ScanResult) []string {
	var out []string
	for n := range r.Names {
		if n != "." {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func TestScan(t *testing.T) {
	for name, ex := range withStreams(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{
				"package.json": "{}", "package-lock.json": "v1", "gen/a.go": "a", "gen/sub/b.go": "b", "src/x.go": "x",
			})
			old := time.Now().Add(-time.Hour)
			for _, p := range []string{"package.json", "package-lock.json", "gen/a.go", "gen/sub/b.go", "gen/sub", "gen", "src/x.go", "src", "."} {
				must(t, os.Chtimes(filepath.Join(dir, p), old, old))
			}
			must(t, os.Symlink("/etc/passwd", filepath.Join(dir, "gen", "passwd")))
			must(t, os.Lchown(filepath.Join(dir, "gen", "passwd"), -1, -1))

			full, err := Scan(ctx, ex, testTarget, dir, 0, []string{".", "./gen", "./nope"}, nil)
			must(t, err)
			if full.Since || !full.Complete || full.Now == 0 || !slices.Equal(full.Missing, []string{"./nope"}) {
				t.Fatalf("full scan header: %+v", full)
			}
			want := []string{"./gen", "./gen/a.go", "./gen/passwd", "./gen/sub", "./gen/sub/b.go", "./package-lock.json", "./package.json", "./src", "./src/x.go"}
			if got := scanNames(full); !slices.Equal(got, want) {
				t.Fatalf("full scan names:\n got %q\nwant %q", got, want)
			}
			if l := full.Names["./gen/passwd"]; l.Type != TypeSymlink || l.Link != "/etc/passwd" {
				t.Fatalf("a symlink is listed as a link, not followed: %+v", l)
			}
			if f := full.Names["./package-lock.json"]; f.Type != TypeFile || f.Size != 2 || len(f.Sum) != 32 {
				t.Fatalf("file entry: %+v", f)
			}

			// A write in the same second as the scan that follows: the
			// marker is back-dated, so it is seen.
			since := full.Now - 2
			must(t, os.WriteFile(filepath.Join(dir, "package-lock.json"), []byte("v2"), 0o644))
			// A rename keeps the old mtime: seen through its directory.
			must(t, os.WriteFile(filepath.Join(dir, "gen", "tmp"), []byte("new"), 0o644))
			must(t, os.Chtimes(filepath.Join(dir, "gen", "tmp"), old, old))
			must(t, os.Rename(filepath.Join(dir, "gen", "tmp"), filepath.Join(dir, "gen", "c.go")))
			inc, err := Scan(ctx, ex, testTarget, dir, since, []string{".", "./gen"}, nil)
			must(t, err)
			if !inc.Since || !inc.Complete {
				t.Fatalf("incremental scan header: %+v", inc)
			}
			got := scanNames(inc)
			for _, w := range []string{"./package-lock.json", "./gen", "./gen/c.go", "./gen/a.go"} {
				if !slices.Contains(got, w) {
					t.Errorf("incremental scan lacks %q: %q", w, got)
				}
			}
			for _, nw := range []string{"./src/x.go", "./gen/sub/b.go", "./package.json"} {
				if slices.Contains(got, nw) {
					t.Errorf("incremental scan lists unchanged %q", nw)
				}
			}
			if inc.Incarnation != full.Incarnation {
				t.Errorf("same container, other incarnation: %q vs %q", inc.Incarnation, full.Incarnation)
			}
		})
	}
}

// TestScanListsChangedDirWhole: an incremental scan lists every entry of a
// directory that changed, whatever its mtime, and keeps the hash of a new
// file in it that both of its finds list.
func TestScanListsChangedDirWhole(t *testing.T) {
	for name, ex := range withStreams(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"gen/old.go": "o", "gen/new.go": "n"})
			old := time.Now().Add(-time.Hour)
			for _, p := range []string{"gen/old.go", "gen", "."} {
				must(t, os.Chtimes(filepath.Join(dir, p), old, old))
			}
			writeTree(t, dir, map[string]string{"gen/new.go": "n2", "gen/made.go": "m"})
			r, err := Scan(context.Background(), ex, testTarget, dir, time.Now().Unix()-60, []string{"./gen"}, nil)
			must(t, err)
			if !r.Since || !r.Complete || !slices.Equal(scanNames(r), []string{"./gen", "./gen/made.go", "./gen/new.go", "./gen/old.go"}) {
				t.Fatalf("scan: %+v %q", r, scanNames(r))
			}
			if !maps.Equal(r.Whole, map[string]bool{"./gen": true}) {
				t.Fatalf("directories listed whole: %v, want ./gen", r.Whole)
			}
			for n, c := range map[string]string{"./gen/old.go": "o", "./gen/new.go": "n2", "./gen/made.go": "m"} {
				if sum := sha256.Sum256([]byte(c)); !bytes.Equal(r.Names[n].Sum, sum[:]) {
					t.Errorf("%s: %+v, want its hash", n, r.Names[n])
				}
			}
		})
	}
}

func TestScanMissingRoot(t *testing.T) {
	for name, ex := range withStreams(t) {
		t.Run(name, func(t *testing.T) {
			r, err := Scan(context.Background(), ex, testTarget, filepath.Join(t.TempDir(), "gone"), 0, []string{"."}, nil)
			must(t, err)
			if r.Exists || !r.Complete || len(r.Names) != 0 {
				t.Fatalf("missing root: %+v", r)
			}
		})
	}
}

func TestParseScanTruncated(t *testing.T) {
	full := "SB1\x00100\x00mnt:[1]\x00newer\x00LS2\x00sha256sum\x00\x00dir\x00V\x00./gen\x00\x00END\x00OK\x00"
	if r, err := ParseScan([]byte(full)); err != nil || !maps.Equal(r.Whole, map[string]bool{"./gen": true}) {
		t.Fatalf("complete output: %+v %v", r, err)
	}
	// Every cut short of the last token is an error, never an empty listing.
	for i := range len(full) - 1 {
		if r, err := ParseScan([]byte(full[:i])); err == nil {
			t.Fatalf("output cut at %d parsed as %+v", i, r)
		}
	}
	if r, err := ParseScan([]byte(strings.Replace(full, "OK", "PARTIAL", 1))); err != nil || r.Complete {
		t.Fatalf("partial: %+v %v", r, err)
	}
}

func TestDownload(t *testing.T) {
	for name, ex := range withStreams(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"a.lock": "lock", "gen/x.go": "x"})
			must(t, os.Chmod(filepath.Join(dir, "gen", "x.go"), 0o755))
			must(t, os.Symlink("/etc/passwd", filepath.Join(dir, "gen", "passwd")))
			got := map[string]string{}
			err := Download(context.Background(), ex, testTarget, dir, []string{"./a.lock", "./gen/x.go"}, func(e ArchiveEntry) error {
				b, _ := io.ReadAll(e.Body)
				got[e.Rel] = e.Type.String() + ":" + e.Mode.String() + ":" + string(b)
				return nil
			})
			must(t, err)
			want := map[string]string{"a.lock": "file:-rw-r--r--:lock", "gen/x.go": "file:-rwxr-xr-x:x"}
			if len(got) != len(want) || got["a.lock"] != want["a.lock"] || got["gen/x.go"] != want["gen/x.go"] {
				t.Fatalf("got %q, want %q", got, want)
			}
			// A link to outside the root is refused, not followed.
			err = Download(context.Background(), ex, testTarget, dir, []string{"./gen/passwd"}, func(e ArchiveEntry) error {
				t.Errorf("entry handed on: %+v", e)
				return nil
			})
			if !errors.Is(err, ErrHostileEntry) {
				t.Fatalf("link to /etc/passwd: %v", err)
			}
		})
	}
}

func TestReadArchiveRefusesHostileEntries(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    tar.Header
	}{
		{"absolute", tar.Header{Name: "/etc/passwd", Typeflag: tar.TypeReg}},
		{"dotdot", tar.Header{Name: "../x", Typeflag: tar.TypeReg}},
		{"inner dotdot", tar.Header{Name: "./a/../../x", Typeflag: tar.TypeReg}},
		{"dotdot dir", tar.Header{Name: "a/../..", Typeflag: tar.TypeDir}},
		{"absolute link", tar.Header{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "/etc"}},
		{"escaping link", tar.Header{Name: "a/b", Typeflag: tar.TypeSymlink, Linkname: "../../etc"}},
		{"hard link", tar.Header{Name: "a", Typeflag: tar.TypeLink, Linkname: "b"}},
		{"hard link out", tar.Header{Name: "a", Typeflag: tar.TypeLink, Linkname: "../../etc/passwd"}},
		{"device", tar.Header{Name: "a", Typeflag: tar.TypeChar}},
		{"fifo", tar.Header{Name: "a", Typeflag: tar.TypeFifo}},
		{"backslash", tar.Header{Name: `..\x`, Typeflag: tar.TypeReg}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			must(t, tw.WriteHeader(&tar.Header{Name: "./ok", Typeflag: tar.TypeReg, Size: 2, Mode: 0o644}))
			_, _ = tw.Write([]byte("ok"))
			h := tc.h
			h.Mode = 0o644
			must(t, tw.WriteHeader(&h))
			must(t, tw.WriteHeader(&tar.Header{Name: "./after", Typeflag: tar.TypeReg, Mode: 0o644}))
			must(t, tw.Close())
			var seen []string
			err := ReadArchive(&buf, func(e ArchiveEntry) error {
				seen = append(seen, e.Rel)
				return nil
			})
			if !errors.Is(err, ErrHostileEntry) {
				t.Fatalf("want ErrHostileEntry, got %v", err)
			}
			if !slices.Equal(seen, []string{"ok"}) {
				t.Fatalf("entries handed on: %q (nothing at or after the hostile one)", seen)
			}
		})
	}
	// Links that stay inside are entries like any other.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	must(t, tw.WriteHeader(&tar.Header{Name: "a/b", Typeflag: tar.TypeSymlink, Linkname: "../c"}))
	must(t, tw.Close())
	must(t, ReadArchive(&buf, func(e ArchiveEntry) error {
		if e.Type != TypeSymlink || e.Link != "../c" {
			t.Errorf("inside link: %+v", e)
		}
		return nil
	}))
}

// TestIncarnation: what Incarnation reads before an initial sync is what
// every scan of the same container says, and a non-empty token.
func TestIncarnation(t *testing.T) {
	for name, ex := range withStreams(t) {
		t.Run(name, func(t *testing.T) {
			inc, err := Incarnation(context.Background(), ex, testTarget)
			must(t, err)
			r, err := Scan(context.Background(), ex, testTarget, t.TempDir(), 0, nil, nil)
			must(t, err)
			if inc == "" || inc != r.Incarnation {
				t.Fatalf("incarnation %q, scan's %q", inc, r.Incarnation)
			}
		})
	}
}

// hashTree is a tree with files that sync-back globs list and files they
// don't, under names find and gitignore might read differently.
var hashTree = map[string]string{
	"package-lock.json": "l", "web/package-lock.json": "wl", "package-lock.json.bak": "b", "gen/a.go": "a",
	"gen/sub/b.go": "b", "gen/keep.go": "k", "x/gen/a.go": "xa", "go.sum": "s", "sub/go.sum": "ss",
	"db/migrate/1.rb": "1", "db/migrate/sub/2.rb": "2", "x/db/migrate/3.rb": "3", "vendor/modules.txt": "m",
	"vendor/x/modules.txt": "xm", "node_modules/p/i.js": "i", "a/node_modules/q/j.js": "j", "yarn.lock": "y",
	".hidden.lock": "h", "d/.lock": "dl", "a.lock/f": "alf", "file1.txt": "f1", "fileé.txt": "fe",
	"x/file22.txt": "f22", "x.go": "x", "a/x.go": "ax", "a/b/c/x.go": "abcx", "a/x/b": "axb", "a/x/y/b": "axyb",
	"ab": "ab", "a/b/inner": "abi", "src/main.go": "main", "é/ü.lock": "ue", "sp ace/f f.lock": "ff",
	"a*b/c": "abc", ".env": "e", "z/.env": "ze",
}

// A full scan hashes the files the globs may list and lists every other
// entry as before, without a hash: what each glob lists has a hash under
// busybox's and GNU's find (in a UTF-8 locale too), and a file no glob
// lists has none.
func TestScanHashesWhatGlobsList(t *testing.T) {
	globs := []string{
		"package-lock.json", "gen/**", "db/migrate/", "vendor/modules.txt", "./go.sum", "node_modules/", "*.lock",
		"file?.txt", "**/x.go", "a/**/b", "a/**", "gen/*.go", "*", "*/", "**", "?", "a*b/*", "é/*", "sp ace/",
		".env", "./.env", "x/**/", "**/b/**", "a/*/b", "*/b",
	}
	dir := t.TempDir()
	writeTree(t, dir, hashTree)
	check := func(t *testing.T, ex Executor, set []string) *ScanResult {
		t.Helper()
		g, err := ignore.NewGlobs(set)
		must(t, err)
		tests, ok := g.FileTests()
		if !ok {
			t.Fatalf("no tests for %q", set)
		}
		r, err := Scan(context.Background(), ex, testTarget, dir, 0, g.Starts(), tests)
		must(t, err)
		if !r.Complete || r.Alg != "sha256sum" {
			t.Fatalf("scan of %q: %+v", set, r)
		}
		for rel, content := range hashTree {
			if !g.Match(rel, false) {
				continue
			}
			e, ok := r.Names["./"+rel]
			if sum := sha256.Sum256([]byte(content)); !ok || e.Type != TypeFile || !bytes.Equal(e.Sum, sum[:]) {
				t.Errorf("%q lists %q: the scan has %+v (listed: %v), want its sha256", set, rel, e, ok)
			}
		}
		return r
	}
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			for _, s := range globs {
				check(t, ex, []string{s})
			}
			t.Setenv("LC_ALL", "C.UTF-8")
			for _, s := range globs {
				check(t, ex, []string{s})
			}
		})
	}
	for name, ex := range withStreams(t) {
		t.Run(name+"/unlisted", func(t *testing.T) {
			set := []string{"package-lock.json", "gen/**", "db/migrate/", "vendor/modules.txt", "*.lock", "!gen/keep.go"}
			r := check(t, ex, set)
			g, _ := ignore.NewGlobs(set)
			all, err := Scan(context.Background(), ex, testTarget, dir, 0, g.Starts(), nil)
			must(t, err)
			if !slices.Equal(scanNames(r), scanNames(all)) {
				t.Fatalf("names with hash tests %q\nwithout %q", scanNames(r), scanNames(all))
			}
			for n, e := range all.Names {
				got := r.Names[n]
				if got.Type != e.Type || got.Mode != e.Mode || got.Size != e.Size || got.MTime != e.MTime || got.Link != e.Link {
					t.Errorf("%s: %+v with hash tests, %+v without", n, got, e)
				}
			}
			for _, rel := range []string{"src/main.go", "sub/go.sum", "x/gen/a.go", "package-lock.json.bak"} {
				if e := r.Names["./"+rel]; e.Type != TypeFile || e.Size != int64(len(hashTree[rel])) || len(e.Sum) != 0 {
					t.Errorf("%s, which no glob lists: %+v, want a file without a hash", rel, e)
				}
				if e := all.Names["./"+rel]; len(e.Sum) != 32 {
					t.Errorf("%s without hash tests: %+v, want its hash", rel, e)
				}
			}
			// gen/keep.go is taken away by a "!" pattern: the tests leave
			// those out, so it is hashed too.
			if e := r.Names["./gen/keep.go"]; len(e.Sum) != 32 {
				t.Errorf("gen/keep.go: %+v", e)
			}
		})
	}
}

// Tests a steady-state scan is given are not used: it lists and hashes
// what changed, as without them.
func TestScanSinceIgnoresHashTests(t *testing.T) {
	for name, ex := range withStreams(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"package-lock.json": "v1", "src/x.go": "x"})
			old := time.Now().Add(-time.Hour)
			for _, p := range []string{"package-lock.json", "src/x.go", "src", "."} {
				must(t, os.Chtimes(filepath.Join(dir, p), old, old))
			}
			tests := []string{"-path", "*/package-lock.json"}
			full, err := Scan(context.Background(), ex, testTarget, dir, 0, []string{"."}, tests)
			must(t, err)
			if len(full.Names["./src/x.go"].Sum) != 0 || len(full.Names["./package-lock.json"].Sum) != 32 {
				t.Fatalf("full scan: %+v", full.Names)
			}
			must(t, os.WriteFile(filepath.Join(dir, "src", "x.go"), []byte("x2"), 0o644))
			inc, err := Scan(context.Background(), ex, testTarget, dir, full.Now-2, []string{"."}, tests)
			must(t, err)
			if !inc.Since || !inc.Complete || !slices.Equal(scanNames(inc), []string{"./src/x.go"}) || len(inc.Names["./src/x.go"].Sum) != 32 {
				t.Fatalf("incremental scan: %+v, names %q", inc, scanNames(inc))
			}
		})
	}
}

// Past their bounds, the hash tests are not sent: every file is hashed.
func TestScanArgvBoundsHashTests(t *testing.T) {
	count := func(argv []string) string { return argv[7] }
	if got := count(ScanArgv("/app", 0, []string{"."}, []string{"-path", "*/a", "-path", "./b/*"})); got != "6" {
		t.Errorf("two tests: %s words", got)
	}
	many := make([]string, 0, 2*(maxHashTests+1))
	for range maxHashTests + 1 {
		many = append(many, "-path", "x")
	}
	long := []string{"-path", strings.Repeat("x", maxHashTestBytes+1)}
	for name, tests := range map[string][]string{"many": many, "long": long, "odd": {"-path"}, "none": nil} {
		if argv := ScanArgv("/app", 0, []string{"."}, tests); count(argv) != "0" || len(argv) != 9 {
			t.Errorf("%s: %q", name, argv[7:])
		}
	}
	if argv := ScanArgv("/app", 0, []string{"."}, many[2:]); count(argv) != strconv.Itoa(3*maxHashTests) {
		t.Errorf("%d tests: %s words", maxHashTests, count(argv))
	}
}
