// Package fakeproc is test support for the helper scripts of pkg/remote: a /proc of made-up
// processes in a temporary directory, which helper.sh and helper-probe.sh read instead of the
// real one when LIVESYNC_PROC names it.
package fakeproc

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Process is one process of a fake /proc.
type Process struct {
	PID      int
	Comm     string // its name in stat, "x" if empty
	Start    uint64 // its start time, field 22 of stat
	Cgroup   string // the content of its cgroup file
	Mnt      string // its ns/mnt link, "mnt:[1]" if empty
	UID, GID int
	Root     string // where its root link points, if anywhere
}

// Write writes a /proc with procs in it and returns its path; self, the helper's own
// process, is in mount namespace "mnt:[0]".
func Write(t *testing.T, procs ...Process) string {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	proc := t.TempDir()
	procs = append(procs, Process{PID: 99999, Mnt: "mnt:[0]", Cgroup: "0::/helper\n"})
	for _, p := range procs {
		dir := filepath.Join(proc, strconv.Itoa(p.PID))
		must(os.MkdirAll(filepath.Join(dir, "ns"), 0o755))
		must(os.Symlink(cmp.Or(p.Mnt, "mnt:[1]"), filepath.Join(dir, "ns", "mnt")))
		if p.Root != "" {
			must(os.Symlink(p.Root, filepath.Join(dir, "root")))
		}
		// Fields 3 to 52 after the name; 22 is the start time.
		rest := make([]string, 50)
		for i := range rest {
			rest[i] = strconv.Itoa(i + 3)
		}
		rest[0], rest[22-3] = "S", strconv.FormatUint(p.Start, 10)
		files := map[string]string{
			"stat":   fmt.Sprintf("%d (%s) %s\n", p.PID, cmp.Or(p.Comm, "x"), strings.Join(rest, " ")),
			"status": fmt.Sprintf("Name:\t%s\nUid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\n", cmp.Or(p.Comm, "x"), p.UID, p.UID, p.UID, p.UID, p.GID, p.GID, p.GID, p.GID),
			"cgroup": p.Cgroup,
		}
		for name, content := range files {
			must(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
		}
	}
	must(os.Symlink("99999", filepath.Join(proc, "self")))
	return proc
}

// In returns script, one of pkg/remote's scripts as a helper runs it (argv[2] of
// remote.HelperArgv), reading the fake /proc at proc.
func In(proc, script string) string {
	return "LIVESYNC_PROC='" + strings.ReplaceAll(proc, "'", `'\''`) + "'\n" + script
}
