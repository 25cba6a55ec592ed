package ignore

import "strings"

// builtin reports whether a path component is always ignored: git's
// metadata and the temporary files editors write next to the file being
// saved. Syncing those would push half-written or lock files into the
// container, and no ignore file can re-include them.
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
	case strings.HasPrefix(name, ".livesync-patch."): // a delta being assembled in the container (apply.sh): never comes home
		return true
	}
	return false
}
