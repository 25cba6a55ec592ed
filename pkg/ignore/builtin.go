package ignore

import "strings"

// builtin reports whether a path component is always ignored: git's
// metadata, the temporary files editors write next to the file being
// saved, and kubectl-livesync's own. Syncing those would push half-written
// or lock files into the container (or bring a killed exec's leftovers
// home), and no ignore file can re-include them.
//
// Written as string tests rather than patterns because every Match runs it.
func builtin(name string) bool {
	n := len(name)
	switch {
	case n == 0:
		return false
	case name == ".git": // a repository (or a submodule's gitfile)
		return true
	case name == "4913": // vim probes whether it may create files in a dir
		return true
	case name[n-1] == '~': // vim and emacs backups, "file~"
		return true
	case n >= 2 && name[0] == '#' && name[n-1] == '#': // emacs auto-save "#file#"
		return true
	case strings.HasPrefix(name, ".#"): // emacs lock symlink ".#file"
		return true
	case strings.HasSuffix(name, "___jb_tmp___"), strings.HasSuffix(name, "___jb_old___"): // JetBrains safe write
		return true
	case strings.HasSuffix(name, ".swp"), strings.HasSuffix(name, ".swx"): // vim swap and its writability probe
		return true
	case name[0] == '.' && n >= 6 && name[n-4:n-1] == ".sw" && name[n-1] >= 'a' && name[n-1] <= 'p':
		// vim's further swap files ".file.swo", ".file.swn", … when .swp is taken
		return true
	case strings.HasSuffix(name, ".kate-swp"):
		return true
	case strings.HasPrefix(name, ".livesync-"):
		// The container scripts' names beside a file (apply.sh's patch being
		// built, a compressed patch's literal bytes, a copy on its way) and
		// the supervisor's state: a killed exec leaves them behind, and they
		// must never come home nor be sent. The whole prefix, so a new one is
		// covered (pkg/remote's TestScriptTempNamesAreIgnored reads the
		// scripts for them).
		return true
	case strings.HasPrefix(name, "livesync-scan.") && n == len("livesync-scan.")+6:
		// a scan's marker, mktemp's "livesync-scan.XXXXXX" in $TMPDIR (a
		// mapping of /tmp holds it)
		return true
	case strings.HasPrefix(name, "livesync-frame.") || strings.HasPrefix(name, "livesync-stream."):
		// a stream loop's stage file ("livesync-frame.PID", its dd count
		// beside it, ".e", a parted frame's parts, ".0" and ".1", its apply's
		// stderr, ".x", and its FIFO, ".p") and its fence record
		// ("livesync-stream.FAMILY.PID"), in $TMPDIR: a mapping of /tmp holds
		// them
		return streamTemp(name)
	case name[0] == '.' && localTemp(name):
		return true
	}
	return false
}

// localTemp reports whether name is pkg/localtree's temporary beside a file
// it replaces, ".<name>.livesync-<pid>-<nanoseconds>": a sync-back write
// killed mid-way leaves it in the local tree, and it must not be sent.
func localTemp(name string) bool {
	i := strings.LastIndex(name, ".livesync-")
	if i < 1 {
		return false
	}
	pid, nanos, ok := strings.Cut(name[i+len(".livesync-"):], "-")
	return ok && digits(pid) && digits(nanos)
}

// streamTemp reports whether name is one of stream.sh's files in $TMPDIR:
// "livesync-frame.<pid>", "livesync-frame.<pid>.<e, 0, 1, x or p>" or
// "livesync-stream.<hex family>.<pid>".
func streamTemp(name string) bool {
	if rest, ok := strings.CutPrefix(name, "livesync-frame."); ok {
		if pid, suf, ok := strings.Cut(rest, "."); ok {
			return digits(pid) && len(suf) == 1 && strings.Contains("e01xp", suf)
		}
		return digits(rest)
	}
	rest, _ := strings.CutPrefix(name, "livesync-stream.")
	fam, pid, ok := strings.Cut(rest, ".")
	return ok && hexDigits(fam) && digits(pid)
}

func hexDigits(s string) bool {
	for i := range len(s) {
		if (s[i] < '0' || s[i] > '9') && (s[i] < 'a' || s[i] > 'f') {
			return false
		}
	}
	return s != ""
}

func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
