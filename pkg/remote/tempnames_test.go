package remote

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/ignore"
)

var (
	// mktempTemplate finds mktemp's template: its argument (options and
	// quotes stripped) that ends in X's.
	mktempTemplate = regexp.MustCompile(`mktemp(?:\s+-[a-zA-Z]+)*\s+"?([^"\s;|&)]*XXX)`)
	// livesyncLiteral finds a ".livesync-" name as written, with what
	// expands after it ("$$", "${x##*/}", "$v", or a comment's "<pid>").
	livesyncLiteral = regexp.MustCompile(`\.livesync-[A-Za-z0-9_.-]*(\$\{[^}]*\}|\$[A-Za-z0-9_$]+|<[a-z]+>)?`)
	// tmpdirName finds a name a script makes in $TMPDIR (through stream.sh's
	// livesync_sd, or apply.sh's stage written out), with its expansions ("$$", "$livesync_fam") and an
	// optional suffix after them.
	tmpdirName = regexp.MustCompile(`(?:\$livesync_sd|\$\{TMPDIR:-/tmp\})/(livesync-[A-Za-z0-9_.$-]*)"?`)
	expansion  = regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z0-9_$]+`)
	// stageName finds the stage file's name and the names made beside it
	// ("$livesync_stage.e").
	stageName   = regexp.MustCompile(`livesync_stage=\$livesync_sd/(\S+)`)
	stageSuffix = regexp.MustCompile(`\$livesync_stage(\.[A-Za-z0-9]+)`)
)

// tempNames returns the names the container's scripts make beside what they
// change or in $TMPDIR, found in text: mktemp templates with their X's
// filled as mktemp fills them, and ".livesync-" names with what they expand
// filled in.
func tempNames(text string) []string {
	var out []string
	for _, m := range mktempTemplate.FindAllStringSubmatch(text, -1) {
		tmpl := path.Base(m[1])
		x := len(tmpl) - len(strings.TrimRight(tmpl, "X"))
		out = append(out, strings.TrimRight(tmpl, "X")+"a7Zq90bK3x"[:x])
	}
	for _, m := range livesyncLiteral.FindAllStringSubmatch(text, -1) {
		name := m[0]
		if m[1] != "" {
			name = strings.TrimSuffix(m[0], m[1]) + "12345"
		}
		out = append(out, strings.TrimRight(name, "."))
	}
	for _, m := range tmpdirName.FindAllStringSubmatchIndex(text, -1) {
		if strings.HasPrefix(text[m[1]:], ".*") {
			continue // a glob of such names, not one made
		}
		out = append(out, expansion.ReplaceAllString(text[m[2]:m[3]], "12345"))
	}
	if m := stageName.FindStringSubmatch(text); m != nil {
		stage := expansion.ReplaceAllString(m[1], "12345")
		for _, x := range stageSuffix.FindAllStringSubmatch(text, -1) {
			out = append(out, stage+x[1])
		}
	}
	return out
}

// TestScriptTempNamesAreIgnored reads every script this package runs in a
// container, and the Go files that build script text, for the names they
// create, and checks that pkg/ignore always ignores each, on both sides: a
// temporary left by a killed exec must neither come home with --sync-back
// nor be sent, and no ignore file can re-include it. A new temporary name
// in a script fails here until it is a built-in ignore.
func TestScriptTempNamesAreIgnored(t *testing.T) {
	texts := map[string]string{}
	err := fs.WalkDir(scripts, "scripts", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := scripts.ReadFile(p)
		texts[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	gos, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range gos {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		texts[p] = string(b)
	}
	root := t.TempDir()
	// An ignore file that re-includes everything: built-ins still win.
	if err := os.WriteFile(filepath.Join(root, ignore.FileName), []byte("!*\n!.*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := ignore.New(root, ignore.Options{Excludes: []string{"!.livesync-*", "!livesync-*"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for p, text := range texts {
		for _, name := range tempNames(text) {
			if seen[name] {
				continue
			}
			seen[name] = true
			for _, rel := range []string{name, "sub/dir/" + name} {
				if !m.Match(rel, false) || !m.Match(rel, true) {
					t.Errorf("%s creates %q, which is not a built-in ignore (pkg/ignore/builtin.go)", p, rel)
				}
			}
		}
	}
	// The parse must keep finding the names it was written for.
	for _, want := range []string{".livesync-patch.12345", ".livesync-lit.12345", ".livesync-cp.12345", ".livesync-supervisor.tmp", "livesync-scan.a7Zq90", "livesync-frame.12345", "livesync-frame.12345.e", "livesync-stream.12345.12345"} {
		if !seen[want] {
			t.Errorf("found no %q in the scripts; found %v", want, seen)
		}
	}
}
