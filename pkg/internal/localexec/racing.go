package localexec

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Racing returns the busybox and GNU runners (see Variants) with tar and
// sha256sum wrapped, so that a test can land a container's own save in the
// moment between a script's check of a file and what it does to the file,
// deterministically. The environment the command starts with says when:
// the $RACE_AT-th run of $RACE_TOOL ("tar", "ln" or "sha256sum"; counted
// in the file $RACE_COUNT.TOOL) writes $RACE_BODY to $RACE_TMP and renames
// it over $RACE_FILE, as an editor or a build saves: right before tar or ln
// runs, right after sha256sum ran. With $RACE_KILL naming the tool, each of
// its runs (or only the $RACE_KILL_AT-th) kills the script that ran it
// instead (SIGKILL to its parent), as a cut stream or a killed exec ends it. With RACE_TOOL unset the wrappers only
// count.
func Racing(t testing.TB) map[string]*Runner {
	t.Helper()
	out := map[string]*Runner{}
	for name := range Variants(t) {
		bin := t.TempDir()
		real := map[string]string{"tar": "/bin/busybox tar", "ln": "/bin/busybox ln", "sha256sum": "/bin/busybox sha256sum"}
		if name == "gnu" {
			for tool := range real {
				p, err := exec.LookPath(tool)
				if err != nil {
					t.Fatal(err)
				}
				real[tool] = p
			}
		}
		for tool, cmd := range real {
			script := fmt.Sprintf(`#!/bin/sh
c="$RACE_COUNT.%[1]s"; n=$(cat "$c" 2>/dev/null || echo 0); n=$((n+1)); [ -z "$RACE_COUNT" ] || echo "$n" >"$c"
save() { printf '%%s' "$RACE_BODY" >"$RACE_TMP" && mv -f "$RACE_TMP" "$RACE_FILE"; }
if [ "$RACE_KILL" = %[1]s ] && { [ -z "$RACE_KILL_AT" ] || [ "$n" = "$RACE_KILL_AT" ]; }; then kill -9 "$PPID"; exit 137; fi
if [ "$RACE_TOOL" = %[1]s ] && [ "$n" = "$RACE_AT" ] && [ %[1]s != sha256sum ]; then save; fi
%[2]s "$@"; s=$?
if [ "$RACE_TOOL" = %[1]s ] && [ "$n" = "$RACE_AT" ] && [ %[1]s = sha256sum ]; then save; fi
exit $s
`, tool, cmd)
			if err := os.WriteFile(filepath.Join(bin, tool), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if name == "gnu" {
			// Every other tool is the host's, through a link.
			for _, dir := range []string{"/usr/bin", "/bin", "/usr/sbin", "/sbin"} {
				entries, _ := os.ReadDir(dir)
				for _, e := range entries {
					if _, ok := real[e.Name()]; ok {
						continue
					}
					if _, err := os.Lstat(filepath.Join(bin, e.Name())); err == nil {
						continue
					}
					if err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(bin, e.Name())); err != nil {
						t.Fatal(err)
					}
				}
			}
			out[name] = &Runner{Bin: bin, Tmp: TempDir(t)}
			continue
		}
		bb, err := NewBusybox("/bin/busybox", t.TempDir(), "tar", "ln", "sha256sum")
		if err != nil {
			t.Fatal(err)
		}
		for tool := range real {
			if err := os.Symlink(filepath.Join(bin, tool), filepath.Join(bb.Bin, tool)); err != nil {
				t.Fatal(err)
			}
		}
		bb.Tmp = TempDir(t)
		out[name] = bb
	}
	return out
}
