// Package version holds the build's version, commit and date, stamped by the release build
// with -ldflags "-X github.com/livesync-dev/kubectl-livesync/pkg/version.Version=v0.1.0 ...".
package version

import "runtime"

// Stamped at link time; the defaults describe a plain `go build`.
var (
	Version = "v0.0.0-dev"
	Commit  = "unknown"
	Date    = "unknown"
)

// Info is the version report printed by `kubectl livesync version`.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the stamped build information.
func Get() Info {
	return Info{Version: Version, Commit: Commit, Date: Date, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}
