// Package version holds the build's version, commit and date: stamped by the release build with
// -ldflags "-X github.com/livesync-dev/kubectl-livesync/pkg/version.Version=v0.1.0 ...", else read
// from the build information the go command records (`go install ...@v0.1.0`, or a build in a
// git checkout).
package version

import (
	"runtime"
	"runtime/debug"
)

// Stamped at link time; the defaults describe a plain `go build`.
var (
	Version = "v0.0.0-dev"
	Commit  = "unknown"
	Date    = "unknown"
)

// unstamped is Version when the link stamped nothing.
const unstamped = "v0.0.0-dev"

// Info is the version report printed by `kubectl livesync version`.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the stamped build information, or what the go command recorded where nothing was
// stamped.
func Get() Info {
	i := Info{Version: Version, Commit: Commit, Date: Date, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if Version == unstamped {
		bi, ok := debug.ReadBuildInfo()
		i = fromBuildInfo(i, bi, ok)
	}
	return i
}

// fromBuildInfo fills what i lacks from bi: the module's version (a tag for `go install
// module@tag`, a pseudo-version for a build in a checkout; "(devel)" says nothing), and the
// VCS revision and time the go command stamps in a checkout, the revision marked "+dirty" when
// the tree had changes.
func fromBuildInfo(i Info, bi *debug.BuildInfo, ok bool) Info {
	if !ok || bi == nil {
		return i
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		i.Version = v
	}
	var rev, at string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && i.Commit == "unknown" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "+dirty"
		}
		i.Commit = rev
	}
	if at != "" && i.Date == "unknown" {
		i.Date = at
	}
	return i
}
